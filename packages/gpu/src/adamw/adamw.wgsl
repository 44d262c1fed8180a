// AdamW (PyTorch / nanoGPT semantics) over elements [start, start + n) of one chunk of the flat
// parameter, gradient and moment buffers, which share one layout:
//   g = grad · gradScale            (gradScale: the global-norm clip factor, written on the GPU)
//   m = β1·m + (1 − β1)·g
//   v = β2·v + (1 − β2)·g²
//   θ −= lr · ( (m / bc1) / (√(v / bc2) + ε) + λ·θ )     bc1 = 1 − β1ᵗ, bc2 = 1 − β2ᵗ
// Every element is independent, so the update is deterministic and needs no workgroup memory.

override WORKGROUP_SIZE: u32 = 256;

// Per-step scalars, rewritten by the caller with queue.writeBuffer before each step (AdamWKernels.writeStep).
struct Hyper {
  lr: f32,
  beta1: f32,
  beta2: f32,
  eps: f32,
  biasCorrection1: f32,  // 1 − β1ᵗ, computed in float64 on the CPU
  biasCorrection2: f32,  // 1 − β2ᵗ
}

// Fixed per binding: which elements this dispatch updates.
struct Segment {
  start: u32,        // first element, relative to the (256-byte aligned) views
  n: u32,            // elements to update
  weightDecay: f32,  // λ: 0.1 for matrices, 0 for biases and LayerNorm (nanoGPT)
  scaleIndex: u32,   // which element of `gradScale` multiplies the gradient
}

@group(0) @binding(0) var<storage, read_write> params: array<f32>;
@group(0) @binding(1) var<storage, read> grads: array<f32>;
@group(0) @binding(2) var<storage, read_write> m: array<f32>;
@group(0) @binding(3) var<storage, read_write> v: array<f32>;
@group(0) @binding(4) var<storage, read> gradScale: array<f32>;
@group(0) @binding(5) var<uniform> hyper: Hyper;
@group(0) @binding(6) var<uniform> segment: Segment;

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(global_invocation_id) id: vec3u, @builtin(num_workgroups) groups: vec3u) {
  let scale = gradScale[segment.scaleIndex];
  let lr = hyper.lr;
  let beta1 = hyper.beta1;
  let beta2 = hyper.beta2;
  let invBc1 = 1.0 / hyper.biasCorrection1;
  let invBc2 = 1.0 / hyper.biasCorrection2;
  // Grid-stride loop: the grid is capped at the per-dimension dispatch limit (65535 groups).
  let stride = groups.x * WORKGROUP_SIZE;
  for (var k = id.x; k < segment.n; k += stride) {
    let i = segment.start + k;
    let g = grads[i] * scale;
    let mi = beta1 * m[i] + (1.0 - beta1) * g;
    let vi = beta2 * v[i] + (1.0 - beta2) * g * g;
    m[i] = mi;
    v[i] = vi;
    let theta = params[i];
    let update = (mi * invBc1) / (sqrt(vi * invBc2) + hyper.eps) + segment.weightDecay * theta;
    params[i] = theta - lr * update;
  }
}
