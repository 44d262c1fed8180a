// Fused softmax + cross-entropy with separate outputs (after crossentropy.common.wgsl):
//   forward:  output = losses [N], losses[r] = log Σ exp(x − max) − (x[target] − max) = −log softmax(x)[target]
//   backward: output = dlogits [N, V], overwritten (not accumulated: only this kernel produces it)

@group(0) @binding(0) var<storage, read_write> logits: array<f32>;        // [N, V]
@group(0) @binding(1) var<storage, read_write> targets: array<i32>;       // [N], each in [0, V)
@group(0) @binding(2) var<storage, read_write> output: array<f32>;  // losses [N] or dlogits [N, V]
@group(0) @binding(3) var<uniform> params: Params;

fn storeGrad(index: u32, value: f32) {
  output[index] = value;
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn forward(
  @builtin(workgroup_id) group: vec3u,
  @builtin(num_workgroups) groups: vec3u,
  @builtin(local_invocation_index) local: u32,
) {
  let at = place(group, groups, local);
  let stats = rowStats(at);
  if (at.valid && at.lane == 0u) {
    let base = at.row * params.vocab;
    let label = u32(targets[at.row]);
    output[at.row] = log(stats.y) - (logits[base + label] - stats.x);
  }
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn backward(
  @builtin(workgroup_id) group: vec3u,
  @builtin(num_workgroups) groups: vec3u,
  @builtin(local_invocation_index) local: u32,
) {
  backwardRow(place(group, groups, local));
}
