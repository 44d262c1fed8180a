// Causal attention forward (after attention.common.wgsl). Workgroup (x, h, b) owns queries
// x·ROWS … x·ROWS + ROWS − 1 of head h in batch b and streams keys and values 0 … last query
// through workgroup memory, keeping an online softmax (running max m, running sum l) per query.
// Writes out [B, T, C] and lse [B, NH, T] = m + log l (of the scaled scores), which the backward
// kernels use to recompute probabilities instead of saving att [B, NH, T, T].

@group(0) @binding(0) var<storage, read_write> qkv: array<f32>;        // [B, T, 3C]
@group(0) @binding(1) var<storage, read_write> out: array<f32>;  // [B, T, C]
@group(0) @binding(2) var<storage, read_write> lse: array<f32>;  // [B, NH, T]
@group(0) @binding(3) var<uniform> params: Params;

var<workgroup> queries: array<vec4f, ROW_VECS>;       // [ROWS, HEAD_VECS], pre-scaled by 1/√hs
var<workgroup> keys: array<vec4f, TILE_VECS>;         // [TILE, TILE_STRIDE]
var<workgroup> values: array<vec4f, TILE_VECS>;       // [TILE, TILE_STRIDE]
var<workgroup> partials: array<f32, WORKGROUP_SIZE>;  // [ROWS, PARTS, TILE] partial q·k

// Scaled score of owned row `row` with streamed key `j`: the PARTS partials, in order.
fn score(row: u32, j: u32) -> f32 {
  var s = 0.0;
  for (var p = 0u; p < PARTS; p++) {
    s += partials[row * LANES + p * TILE + j];
  }
  return s;
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) group: vec3u, @builtin(local_invocation_index) local: u32) {
  let T = params.T;
  let C = params.C;
  let C3 = 3u * C;
  let first = group.x * ROWS;  // first query of the block
  let h = group.y;
  let b = group.z;
  let row = local / LANES;
  let lane = local % LANES;
  let t = first + row;  // this invocation's query (≥ T in a partial last block: computed, not written)
  let batch = b * T * C3;
  let head = h * HEAD_SIZE;

  for (var e = local; e < ROW_VECS; e += WORKGROUP_SIZE) {
    let tq = first + e / HEAD_VECS;
    var q = vec4f(0.0);
    if (tq < T) {
      q = qkvVec(batch + tq * C3 + head, e % HEAD_VECS) * params.scale;
    }
    queries[e] = q;
  }

  let j = lane % TILE;
  let part = lane / TILE;
  var o: array<vec4f, MAX_VECS_PER_LANE>;
  var m = LOWEST;
  var l = 0.0;
  let keyEnd = min(first + ROWS, T);  // keys 0 … keyEnd − 1 are visible to some query of the block
  let tiles = (keyEnd + TILE - 1u) / TILE;
  for (var tile = 0u; tile < tiles; tile++) {
    let k0 = tile * TILE;
    workgroupBarrier();  // the previous tile is consumed (the first time: queries are stored)
    for (var e = local; e < TILE * HEAD_VECS; e += WORKGROUP_SIZE) {
      let r = e / HEAD_VECS;
      let v = e % HEAD_VECS;
      var kx = vec4f(0.0);
      var vx = vec4f(0.0);
      if (k0 + r < T) {
        let at = batch + (k0 + r) * C3 + head;
        kx = qkvVec(at + C, v);
        vx = qkvVec(at + 2u * C, v);
      }
      keys[r * TILE_STRIDE + v] = kx;
      values[r * TILE_STRIDE + v] = vx;
    }
    workgroupBarrier();
    var partial = 0.0;
    for (var v = part; v < HEAD_VECS; v += PARTS) {
      partial += dot(queries[row * HEAD_VECS + v], keys[j * TILE_STRIDE + v]);
    }
    partials[local] = partial;
    workgroupBarrier();

    // Online softmax over this tile's visible keys k0 … min(t, k0 + TILE − 1); every lane of
    // the row computes the same m and l.
    let visible = select(0u, min(TILE, t + 1u - k0), k0 <= t);
    var tileMax = LOWEST;
    for (var jj = 0u; jj < visible; jj++) {
      tileMax = max(tileMax, score(row, jj));
    }
    let mNew = max(m, tileMax);
    let alpha = exp(m - mNew);  // rescales what was summed under the old max
    l *= alpha;
    for (var i = 0u; i < VECS_PER_LANE; i++) {
      o[i] *= alpha;
    }
    for (var jj = 0u; jj < visible; jj++) {
      let p = exp(score(row, jj) - mNew);
      l += p;
      for (var i = 0u; i < VECS_PER_LANE; i++) {
        o[i] += p * values[jj * TILE_STRIDE + laneVec(lane, i)];
      }
    }
    m = mNew;
  }

  if (t < T) {
    let inv = 1.0 / l;
    let at = b * T * C + t * C + head;
    for (var i = 0u; i < VECS_PER_LANE; i++) {
      let v = lane + i * LANES;
      for (var k = 0u; k < 4u; k++) {
        if (v < HEAD_VECS && 4u * v + k < HEAD_SIZE) {
          out[at + 4u * v + k] = o[i][k] * inv;
        }
      }
    }
    if (lane == 0u) {
      lse[(b * params.NH + h) * T + t] = m + log(l);
    }
  }
}
