// Layer normalisation over the last axis, as GPT-2 / llm.c (see layernorm.cpu.ts for the math).
// Shapes: inp, out, dout, dinp [rows, C]; weight, bias, dweight, dbias [C]; mean, rstd [rows];
// partials [blocks, 2, C]: per block of rowsPerBlock rows, Σ dout·norm then Σ dout per channel.
//
//   forward              LANES_PER_ROW lanes per row: reduce Σx, then Σ(x − mean)², then write
//   backwardInput        LANES_PER_ROW lanes per row: reduce Σdnorm and Σdnorm·norm, then dinp +=
//                        (32 lanes on a GPU; 1 on a CPU implementation, where barriers and
//                        shared-memory sums cost more than the row itself: see layernorm.ts)
//   backwardParamPartial one workgroup per (block of COLUMNS channels, block of rows): partials
//   backwardParamReduce  one invocation per (channel, dweight|dbias): sums the partials of all row
//                        blocks in block order and adds into dweight / dbias
//
// No float atomics: every sum has a fixed order that depends only on the shape and the
// workgroup sizes, so the gradients are the same bit for bit from run to run.
// Row groups are indexed on a 2D grid of workgroups (group.y·groups.x + group.x), so rows may
// exceed 65535 workgroups' worth.
//
// Every storage binding is read_write, inputs too: WebGPU tracks usage per buffer, not per range,
// so a read-only and a writable binding of the same buffer in one dispatch is a validation error,
// and the model packs many tensors into one buffer.

override LANES_PER_ROW: u32 = 32;   // forward, backwardInput: invocations sharing one row …
override ROWS_PER_GROUP: u32 = 8;   // … × rows per workgroup
override COLUMNS: u32 = 64;         // backwardParamPartial: channels per workgroup …
override ROW_LANES: u32 = 4;        // … × lanes splitting the block's rows
override WORKGROUP_SIZE: u32 = 256; // backwardParamReduce

const EPS: f32 = 1e-5;

struct Params {
  rows: u32,
  channels: u32,
  rowsPerBlock: u32,  // backwardParamPartial: rows summed into one partial
  blocks: u32,        // ⌈rows / rowsPerBlock⌉
}

@group(0) @binding(0) var<storage, read_write> inp: array<f32>;
@group(0) @binding(1) var<storage, read_write> weight: array<f32>;
@group(0) @binding(2) var<storage, read_write> bias: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
@group(0) @binding(4) var<storage, read_write> mean: array<f32>;
@group(0) @binding(5) var<storage, read_write> rstd: array<f32>;
@group(0) @binding(6) var<storage, read_write> dout: array<f32>;
@group(0) @binding(7) var<storage, read_write> dinp: array<f32>;
@group(0) @binding(8) var<storage, read_write> partials: array<f32>;
@group(0) @binding(9) var<storage, read_write> dweight: array<f32>;
@group(0) @binding(10) var<storage, read_write> dbias: array<f32>;
@group(0) @binding(11) var<uniform> params: Params;

var<workgroup> rowScratch: array<vec2f, LANES_PER_ROW * ROWS_PER_GROUP>;  // 2 KiB at 32 × 8
var<workgroup> columnScratch: array<vec2f, COLUMNS * ROW_LANES>;         // 2 KiB at 64 × 4

// Σ over the row's LANES_PER_ROW lanes of each lane's `value`, returned to every lane of the row.
// Every lane sums the row's partials itself, in lane order (broadcast reads): two barriers per
// reduction instead of a tree's log2(lanes), and every lane of the row gets the same bits.
// Called in uniform control flow.
fn rowSum(local: vec3u, value: vec2f) -> vec2f {
  let first = local.y * LANES_PER_ROW;
  rowScratch[first + local.x] = value;
  workgroupBarrier();
  var total = vec2f(0.0);
  for (var lane = 0u; lane < LANES_PER_ROW; lane++) {
    total += rowScratch[first + lane];
  }
  workgroupBarrier();  // every lane has read the partials before the next call overwrites them
  return total;
}

// forward and backwardInput: workgroup g takes rows g·ROWS_PER_GROUP + local.y; lane local.x of
// a row takes channels local.x, local.x + LANES_PER_ROW, … (neighbouring lanes, neighbouring
// addresses). Lanes of rows past the end read nothing but still reach the barriers.
@compute @workgroup_size(LANES_PER_ROW, ROWS_PER_GROUP)
fn forward(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,
           @builtin(local_invocation_id) local: vec3u) {
  let row = (group.y * groups.x + group.x) * ROWS_PER_GROUP + local.y;
  let inRange = row < params.rows;
  let C = select(0u, params.channels, inRange);  // an empty row for the inactive lanes
  let base = row * C;
  // Σ(x − x₀) with x₀ the row's first value: a row far from zero (all x ≈ 3, say) then sums
  // values near zero, and a long serial f32 sum (1 lane per row: C terms) loses far fewer digits.
  let shift = inp[base];
  var sum = 0.0;
  for (var i = local.x; i < C; i += LANES_PER_ROW) {
    sum += inp[base + i] - shift;
  }
  let m = shift + rowSum(local, vec2f(sum, 0.0)).x / f32(C);
  // Two passes (mean, then squared deviations) rather than E[x²] − m², which cancels badly.
  var squares = 0.0;
  for (var i = local.x; i < C; i += LANES_PER_ROW) {
    let d = inp[base + i] - m;
    squares += d * d;
  }
  let s = inverseSqrt(rowSum(local, vec2f(squares, 0.0)).x / f32(C) + EPS);
  for (var i = local.x; i < C; i += LANES_PER_ROW) {
    out[base + i] = (inp[base + i] - m) * s * weight[i] + bias[i];
  }
  if (inRange && local.x == 0u) {
    mean[row] = m;
    rstd[row] = s;
  }
}

@compute @workgroup_size(LANES_PER_ROW, ROWS_PER_GROUP)
fn backwardInput(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,
                 @builtin(local_invocation_id) local: vec3u) {
  let row = (group.y * groups.x + group.x) * ROWS_PER_GROUP + local.y;
  let inRange = row < params.rows;
  let C = select(0u, params.channels, inRange);
  let base = row * C;
  var m = 0.0;
  var s = 0.0;
  if (inRange) {
    m = mean[row];
    s = rstd[row];
  }
  var sums = vec2f(0.0);  // (Σ dnorm, Σ dnorm·norm) over this lane's channels
  for (var i = local.x; i < C; i += LANES_PER_ROW) {
    let norm = (inp[base + i] - m) * s;
    let dnorm = weight[i] * dout[base + i];
    sums += vec2f(dnorm, dnorm * norm);
  }
  let means = rowSum(local, sums) / f32(C);
  for (var i = local.x; i < C; i += LANES_PER_ROW) {
    let norm = (inp[base + i] - m) * s;
    let dnorm = weight[i] * dout[base + i];
    dinp[base + i] += (dnorm - means.x - norm * means.y) * s;
  }
}

// Workgroup (column block, row block): lane (x, y) takes channel x of the column block and rows
// y, y + ROW_LANES, … of the row block; neighbouring x read neighbouring addresses.
@compute @workgroup_size(COLUMNS, ROW_LANES)
fn backwardParamPartial(@builtin(workgroup_id) group: vec3u, @builtin(local_invocation_id) local: vec3u) {
  let C = params.channels;
  let channel = group.x * COLUMNS + local.x;
  let block = group.y;
  var sums = vec2f(0.0);  // (Σ dout·norm, Σ dout)
  if (channel < C) {
    let end = min((block + 1u) * params.rowsPerBlock, params.rows);
    for (var row = block * params.rowsPerBlock + local.y; row < end; row += ROW_LANES) {
      let d = dout[row * C + channel];
      let norm = (inp[row * C + channel] - mean[row]) * rstd[row];
      sums += vec2f(d * norm, d);
    }
  }
  columnScratch[local.y * COLUMNS + local.x] = sums;
  workgroupBarrier();
  if (local.y == 0u && channel < C) {
    var total = columnScratch[local.x];
    for (var lane = 1u; lane < ROW_LANES; lane++) {
      total += columnScratch[lane * COLUMNS + local.x];
    }
    partials[block * 2u * C + channel] = total.x;
    partials[block * 2u * C + C + channel] = total.y;
  }
}

// Invocation j < C adds channel j's Σ dout·norm into dweight; j in [C, 2C) adds Σ dout into dbias.
@compute @workgroup_size(WORKGROUP_SIZE)
fn backwardParamReduce(@builtin(global_invocation_id) id: vec3u) {
  let C = params.channels;
  let j = id.x;
  if (j >= 2u * C) {
    return;
  }
  var total = 0.0;
  for (var block = 0u; block < params.blocks; block++) {
    total += partials[block * 2u * C + j];
  }
  if (j < C) {
    dweight[j] += total;
  } else {
    dbias[j - C] += total;
  }
}
