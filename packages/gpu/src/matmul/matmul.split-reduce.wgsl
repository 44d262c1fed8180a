// Adds split-K partial results into a gradient: destination[i] += Σ_s partials[s·len + i], the
// splits summed in ascending order, so the result is the same from run to run (no atomics).

struct Params {
  len: u32,     // values in destination
  splits: u32,  // partial results in partials, each `len` long
}

@group(0) @binding(0) var<storage, read_write> partials: array<f32>;
@group(0) @binding(1) var<storage, read_write> destination: array<f32>;
@group(0) @binding(2) var<uniform> params: Params;

override WORKGROUP_SIZE: u32 = 256;

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(
  @builtin(workgroup_id) group: vec3u,
  @builtin(num_workgroups) groups: vec3u,
  @builtin(local_invocation_index) lane: u32,
) {
  // 1D index over a 2D grid (len can exceed 65535 workgroups).
  let i = (group.x + group.y * groups.x) * WORKGROUP_SIZE + lane;
  if (i >= params.len) {
    return;
  }
  var sum = 0.0;
  for (var s = 0u; s < params.splits; s++) {
    sum += partials[s * params.len + i];
  }
  destination[i] += sum;
}
