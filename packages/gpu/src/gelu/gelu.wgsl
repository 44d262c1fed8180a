// GELU, GPT-2's tanh approximation, flat over n = B·T·4C floats:
//   forward   out  = ½·x·(1 + tanh a),  a = √(2/π)·(x + 0.044715·x³)
//   backward  dinp += gelu′(x)·dout
//
// Evaluated through the logistic function, since ½·(1 + tanh a) = σ(2a) = 1/(1 + e^(−2a)) and
// ½·sech²(a) = 2·σ(2a)·(1 − σ(2a)), with 1 − σ(2a) = e^(−2a)·σ(2a). One exp, no cancellation
// near tanh = ±1 (1 + tanh a for very negative x loses every digit in f32), and no tanh, which
// some implementations evaluate as (e^2a − 1)/(e^2a + 1) = ∞/∞ = NaN for large |a|. a is clamped
// to ±30 so e^(−2a) ≤ e^60 ≈ 1e26 stays finite; σ(±60) is 1 or < 1e-26, so nothing is lost.
//
// One invocation per element on a 2D grid of workgroups (n may exceed 65535 workgroups):
// workgroup (x, y) covers elements [(y·groups.x + x)·WORKGROUP_SIZE, … + WORKGROUP_SIZE).
// Every storage binding is read_write, inputs too: WebGPU tracks usage per buffer, not per range,
// so a read-only and a writable binding of the same buffer in one dispatch is a validation error,
// and the model packs many tensors into one buffer.

override WORKGROUP_SIZE: u32 = 256;

const GELU_SCALE: f32 = 0.7978845608028654;  // √(2/π)
const GELU_CUBIC: f32 = 0.044715;
const ARGUMENT_LIMIT: f32 = 30.0;

struct Params {
  n: u32,  // elements
}

@group(0) @binding(0) var<storage, read_write> inp: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;   // forward
@group(0) @binding(2) var<storage, read_write> dout: array<f32>;  // backward
@group(0) @binding(3) var<storage, read_write> dinp: array<f32>;  // backward
@group(0) @binding(4) var<uniform> params: Params;

fn elementIndex(group: vec3u, groups: vec3u, lane: u32) -> u32 {
  return (group.y * groups.x + group.x) * WORKGROUP_SIZE + lane;
}

// e^(−2a) for x, with a = √(2/π)·(x + 0.044715·x³) clamped to ±ARGUMENT_LIMIT.
fn expMinusTwoA(x: f32) -> f32 {
  let a = clamp(GELU_SCALE * (x + GELU_CUBIC * x * x * x), -ARGUMENT_LIMIT, ARGUMENT_LIMIT);
  return exp(-2.0 * a);
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn forward(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,
           @builtin(local_invocation_index) lane: u32) {
  let i = elementIndex(group, groups, lane);
  if (i < params.n) {
    let x = inp[i];
    out[i] = x / (1.0 + expMinusTwoA(x));  // x·σ(2a)
  }
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn backward(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,
            @builtin(local_invocation_index) lane: u32) {
  let i = elementIndex(group, groups, lane);
  if (i < params.n) {
    let x = inp[i];
    let e = expMinusTwoA(x);
    let s = 1.0 / (1.0 + e);          // σ(2a) = ½·(1 + tanh a)
    let halfSech2 = 2.0 * s * (e * s);  // ½·sech²(a)
    let grad = s + x * halfSech2 * GELU_SCALE * (1.0 + 3.0 * GELU_CUBIC * x * x);
    dinp[i] += grad * dout[i];
  }
}
