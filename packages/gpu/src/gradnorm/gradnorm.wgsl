// Global L2 norm of a gradient held in one or more chunks, in a fixed order (deterministic):
//   `partial`: workgroup g of a chunk sums the squares of elements
//              [start + g·itemsPerGroup, start + min((g+1)·itemsPerGroup, n)) of `input`
//              into output[outOffset + g]; every chunk of every segment gets its own slots.
//   `finish`:  one workgroup sums the n partials in `input` and writes output[0] = ‖g‖₂ and
//              output[1] = clip scale = min(1, maxNorm / (‖g‖₂ + 1e-6)) (1 when maxNorm ≤ 0),
//              which AdamW reads on the GPU.

override WORKGROUP_SIZE: u32 = 256;  // a power of two (tree reduction)

struct Params {
  start: u32,          // first element of the chunk inside its view (`partial`); 0 for `finish`
  n: u32,              // elements to reduce
  itemsPerGroup: u32,  // a multiple of WORKGROUP_SIZE (`partial`)
  outOffset: u32,      // first partial slot of this chunk (`partial`)
  maxNorm: f32,        // clip threshold (`finish`); ≤ 0: no clipping
}

@group(0) @binding(0) var<storage, read> input: array<f32>;
@group(0) @binding(1) var<storage, read_write> output: array<f32>;
@group(0) @binding(2) var<uniform> params: Params;

var<workgroup> scratch: array<f32, WORKGROUP_SIZE>;

// Tree sum over the workgroup; the result is valid in lane 0.
fn workgroupSum(lane: u32, value: f32) -> f32 {
  scratch[lane] = value;
  workgroupBarrier();
  for (var stride = WORKGROUP_SIZE / 2u; stride > 0u; stride >>= 1u) {
    if (lane < stride) {
      scratch[lane] += scratch[lane + stride];
    }
    workgroupBarrier();
  }
  return scratch[0];
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn partial(@builtin(workgroup_id) group: vec3u, @builtin(local_invocation_index) lane: u32) {
  let first = group.x * params.itemsPerGroup;
  let end = min(first + params.itemsPerGroup, params.n);
  // Strided per lane, so neighbouring lanes read neighbouring addresses.
  var acc = 0.0;
  for (var i = first + lane; i < end; i += WORKGROUP_SIZE) {
    let g = input[params.start + i];
    acc += g * g;
  }
  let total = workgroupSum(lane, acc);
  if (lane == 0u) {
    output[params.outOffset + group.x] = total;
  }
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn finish(@builtin(local_invocation_index) lane: u32) {
  var acc = 0.0;
  for (var i = lane; i < params.n; i += WORKGROUP_SIZE) {
    acc += input[i];
  }
  let total = workgroupSum(lane, acc);
  if (lane == 0u) {
    let norm = sqrt(total);
    output[0] = norm;
    output[1] = select(1.0, min(1.0, params.maxNorm / (norm + 1e-6)), params.maxNorm > 0.0);
  }
}
