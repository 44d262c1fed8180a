// Cross-entropy backward that overwrites the logits with dlogits, as llm.c does (after
// crossentropy.common.wgsl). A separate module because WebGPU cannot bind one buffer range as
// both read-only and writable storage in one dispatch.

@group(0) @binding(0) var<storage, read_write> logits: array<f32>;  // [N, V] in: logits, out: dlogits
@group(0) @binding(1) var<storage, read_write> targets: array<i32>;       // [N], each in [0, V)
@group(0) @binding(2) var<uniform> params: Params;

fn storeGrad(index: u32, value: f32) {
  logits[index] = value;
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn backward(
  @builtin(workgroup_id) group: vec3u,
  @builtin(num_workgroups) groups: vec3u,
  @builtin(local_invocation_index) local: u32,
) {
  backwardRow(place(group, groups, local));
}
