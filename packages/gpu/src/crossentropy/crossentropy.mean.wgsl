// Mean of the per-row losses into one float, by one workgroup in a fixed order (deterministic),
// so the training step needs no readback unless the loss is asked for.

override WORKGROUP_SIZE: u32 = 256;  // a power of two

struct Params {
  n: u32,       // losses
  invN: f32,    // 1/n
}

@group(0) @binding(0) var<storage, read_write> losses: array<f32>;      // [N]
@group(0) @binding(1) var<storage, read_write> mean: array<f32>;  // [1]
@group(0) @binding(2) var<uniform> params: Params;

var<workgroup> scratch: array<f32, WORKGROUP_SIZE>;

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(local_invocation_index) lane: u32) {
  var acc = 0.0;
  for (var i = lane; i < params.n; i += WORKGROUP_SIZE) {
    acc += losses[i];
  }
  scratch[lane] = acc;
  workgroupBarrier();
  for (var stride = WORKGROUP_SIZE / 2u; stride > 0u; stride >>= 1u) {
    if (lane < stride) {
      scratch[lane] += scratch[lane + stride];
    }
    workgroupBarrier();
  }
  if (lane == 0u) {
    mean[0] = scratch[0] * params.invN;
  }
}
