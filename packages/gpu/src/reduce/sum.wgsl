// Parallel sum, one pass: workgroup g reduces input[g·itemsPerGroup, (g+1)·itemsPerGroup) ∩ [0, n)
// to partials[g]. The host runs passes until one value is left. The order of additions depends
// only on n and the workgroup size, so the result is the same from run to run.

override WORKGROUP_SIZE: u32 = 256;

struct Params {
  n: u32,              // values in `input`
  itemsPerGroup: u32,  // a multiple of WORKGROUP_SIZE
}

@group(0) @binding(0) var<storage, read> input: array<f32>;
@group(0) @binding(1) var<storage, read_write> partials: array<f32>;
@group(0) @binding(2) var<uniform> params: Params;

var<workgroup> scratch: array<f32, WORKGROUP_SIZE>;

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) group: vec3u, @builtin(local_invocation_index) lane: u32) {
  let start = group.x * params.itemsPerGroup;
  let end = min(start + params.itemsPerGroup, params.n);
  // Each lane accumulates a strided slice: neighbouring lanes read neighbouring addresses.
  var acc = 0.0;
  for (var i = start + lane; i < end; i += WORKGROUP_SIZE) {
    acc += input[i];
  }
  scratch[lane] = acc;
  workgroupBarrier();
  // Tree reduction over the workgroup; WORKGROUP_SIZE is a power of two.
  for (var stride = WORKGROUP_SIZE / 2u; stride > 0u; stride >>= 1u) {
    if (lane < stride) {
      scratch[lane] += scratch[lane + stride];
    }
    workgroupBarrier();
  }
  if (lane == 0u) {
    partials[group.x] = scratch[0];
  }
}
