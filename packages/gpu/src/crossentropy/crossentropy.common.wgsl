// Shared by the two cross-entropy modules (concatenated in front of crossentropy.wgsl and
// crossentropy.inplace.wgsl, which declare `logits`, `targets`, `params` and `storeGrad`).
// A workgroup holds ROWS rows of logits [N, V], LANES invocations per row striding over the V
// columns. Several rows per workgroup matter on CPU implementations (SwiftShader, lavapipe),
// where each workgroup and barrier has a fixed cost.

override LANES: u32 = 16;           // invocations per row, a power of two (tree reductions)
override ROWS: u32 = 16;            // rows per workgroup
override WORKGROUP_SIZE: u32 = 256; // LANES × ROWS, set by the host

struct Params {
  rows: u32,   // N = B·T
  vocab: u32,  // V ≥ 2 columns per row
  scale: f32,  // backward: factor on (softmax − onehot), 1/N for the mean loss
}

const LOWEST = -3.0e38;  // below any finite logit, without relying on infinities

var<workgroup> scratch: array<f32, WORKGROUP_SIZE>;  // [ROWS, LANES]

// Where an invocation works: its row (may be ≥ N in the last workgroup), its lane in the row and
// its slot in `scratch`. More than 65535 workgroups spill into y: group index = y·gridX + x.
struct Place {
  row: u32,
  lane: u32,
  slot: u32,  // first scratch index of the row
  valid: bool,
}

fn place(group: vec3u, groups: vec3u, local: u32) -> Place {
  let row = (group.y * groups.x + group.x) * ROWS + local / LANES;
  return Place(row, local % LANES, (local / LANES) * LANES, row < params.rows);
}

// Tree max over the LANES lanes of one row, returned to each of them. The order is fixed.
// Called by every invocation of the workgroup (the barriers need uniform control flow).
fn reduceMax(at: Place, value: f32) -> f32 {
  scratch[at.slot + at.lane] = value;
  workgroupBarrier();
  for (var stride = LANES / 2u; stride > 0u; stride >>= 1u) {
    if (at.lane < stride) {
      scratch[at.slot + at.lane] = max(scratch[at.slot + at.lane], scratch[at.slot + at.lane + stride]);
    }
    workgroupBarrier();
  }
  let result = scratch[at.slot];
  workgroupBarrier();  // every lane has read the result before the next reduction reuses scratch
  return result;
}

fn reduceSum(at: Place, value: f32) -> f32 {
  scratch[at.slot + at.lane] = value;
  workgroupBarrier();
  for (var stride = LANES / 2u; stride > 0u; stride >>= 1u) {
    if (at.lane < stride) {
      scratch[at.slot + at.lane] += scratch[at.slot + at.lane + stride];
    }
    workgroupBarrier();
  }
  let result = scratch[at.slot];
  workgroupBarrier();
  return result;
}

// (row max, Σ exp(x − max)) of the invocation's row: the max keeps exp from overflowing.
// Rows past N contribute nothing and skip their loads, but still take part in the barriers.
fn rowStats(at: Place) -> vec2f {
  let base = at.row * params.vocab;
  let columns = select(0u, params.vocab, at.valid);
  var localMax = LOWEST;
  for (var i = at.lane; i < columns; i += LANES) {
    localMax = max(localMax, logits[base + i]);
  }
  let rowMax = reduceMax(at, localMax);
  var localSum = 0.0;
  for (var i = at.lane; i < columns; i += LANES) {
    localSum += exp(logits[base + i] - rowMax);
  }
  return vec2f(rowMax, reduceSum(at, localSum));
}

// dlogits[row] = (softmax(logits[row]) − onehot(target)) · scale. Each lane reads a logit and then
// writes the same index, after the reductions' barriers: safe when storeGrad overwrites logits.
fn backwardRow(at: Place) {
  let stats = rowStats(at);
  if (!at.valid) {
    return;
  }
  let base = at.row * params.vocab;
  let label = u32(targets[at.row]);
  let invSum = 1.0 / stats.y;
  for (var i = at.lane; i < params.vocab; i += LANES) {
    let p = exp(logits[base + i] - stats.x) * invSum;
    storeGrad(base + i, (p - select(0.0, 1.0, i == label)) * params.scale);
  }
}
