// Residual connection, flat over n = B·T·C floats:
//   forward     out = x + y               (out, a, b)
//   backward    out += x, y += x          (da, dout, db: dout read once for both branches)
//   accumulate  out += x                  (dst, src: any gradient that fans in)
// One invocation per element on a 2D grid of workgroups (n may exceed 65535 workgroups):
// workgroup (x, y) covers elements [(y·groups.x + x)·WORKGROUP_SIZE, … + WORKGROUP_SIZE).
//
// Every storage binding is read_write, inputs too: WebGPU tracks usage per buffer, not per range,
// so a read-only and a writable binding of the same buffer in one dispatch is a validation error,
// and the model packs many tensors into one buffer.

override WORKGROUP_SIZE: u32 = 256;

struct Params {
  n: u32,  // elements
}

@group(0) @binding(0) var<storage, read_write> out: array<f32>;
@group(0) @binding(1) var<storage, read_write> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<uniform> params: Params;

fn elementIndex(group: vec3u, groups: vec3u, lane: u32) -> u32 {
  return (group.y * groups.x + group.x) * WORKGROUP_SIZE + lane;
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn forward(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,
           @builtin(local_invocation_index) lane: u32) {
  let i = elementIndex(group, groups, lane);
  if (i < params.n) {
    out[i] = x[i] + y[i];
  }
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn accumulate(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,
              @builtin(local_invocation_index) lane: u32) {
  let i = elementIndex(group, groups, lane);
  if (i < params.n) {
    out[i] += x[i];
  }
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn backward(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,
            @builtin(local_invocation_index) lane: u32) {
  let i = elementIndex(group, groups, lane);
  if (i < params.n) {
    let d = x[i];
    out[i] += d;
    y[i] += d;
  }
}
