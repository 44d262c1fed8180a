// Causal attention backward for dQ (after attention.common.wgsl). Workgroup (x, h, b) owns
// queries x·ROWS … and streams keys and values 0 … last query. Per owned query t it first writes
//   delta[t] = Σ_c dout[t, c] · out[t, c]  (= Σ_j P[t, j] · dP[t, j])
// for the dK/dV kernel, then recomputes P[t, j] = exp(scale · q_t·k_j − lse[t]) and accumulates
//   dS[t, j] = P[t, j] · (dout_t·v_j − delta[t]),   dq_t += scale · Σ_j dS[t, j] · k_j.
// Each workgroup writes only its own rows of dqkv, so no atomics are needed.

@group(0) @binding(0) var<storage, read_write> qkv: array<f32>;           // [B, T, 3C]
@group(0) @binding(1) var<storage, read_write> out: array<f32>;           // [B, T, C] forward output
@group(0) @binding(2) var<storage, read_write> dout: array<f32>;          // [B, T, C]
@group(0) @binding(3) var<storage, read_write> lse: array<f32>;           // [B, NH, T]
@group(0) @binding(4) var<storage, read_write> delta: array<f32>;   // [B, NH, T], written
@group(0) @binding(5) var<storage, read_write> dqkv: array<f32>;    // [B, T, 3C], q part accumulated
@group(0) @binding(6) var<uniform> params: Params;

var<workgroup> queries: array<vec4f, ROW_VECS>;     // [ROWS, HEAD_VECS]
var<workgroup> grads: array<vec4f, ROW_VECS>;       // dout rows [ROWS, HEAD_VECS]
var<workgroup> keys: array<vec4f, TILE_VECS>;       // [TILE, TILE_STRIDE]
var<workgroup> values: array<vec4f, TILE_VECS>;     // [TILE, TILE_STRIDE]
var<workgroup> scores: array<f32, WORKGROUP_SIZE>;  // [ROWS, PARTS, TILE] partial q·k
var<workgroup> dprobs: array<f32, WORKGROUP_SIZE>;  // [ROWS, PARTS, TILE] partial dout·v

// vec4 v of the dout head row starting at element `base`, zero past hs.
fn doutVec(base: u32, v: u32) -> vec4f {
  let c = base + 4u * v;
  return select(vec4f(0.0), vec4f(dout[c], dout[c + 1u], dout[c + 2u], dout[c + 3u]), channelMask(v));
}

fn outVec(base: u32, v: u32) -> vec4f {
  let c = base + 4u * v;
  return select(vec4f(0.0), vec4f(out[c], out[c + 1u], out[c + 2u], out[c + 3u]), channelMask(v));
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) group: vec3u, @builtin(local_invocation_index) local: u32) {
  let T = params.T;
  let C = params.C;
  let C3 = 3u * C;
  let first = group.x * ROWS;
  let h = group.y;
  let b = group.z;
  let row = local / LANES;
  let lane = local % LANES;
  let t = first + row;
  let valid = t < T;
  let batch = b * T * C3;
  let head = h * HEAD_SIZE;
  let stat = (b * params.NH + h) * T + t;  // index into lse and delta

  for (var e = local; e < ROW_VECS; e += WORKGROUP_SIZE) {
    let tq = first + e / HEAD_VECS;
    let v = e % HEAD_VECS;
    var q = vec4f(0.0);
    var g = vec4f(0.0);
    if (tq < T) {
      q = qkvVec(batch + tq * C3 + head, v);
      g = doutVec(b * T * C + tq * C + head, v);
    }
    queries[e] = q;
    grads[e] = g;
  }

  // delta[t]: lane partials over vec4s lane, lane + LANES, …, summed in order by every lane.
  var partial = 0.0;
  if (valid) {
    let at = b * T * C + t * C + head;
    for (var v = lane; v < HEAD_VECS; v += LANES) {
      partial += dot(doutVec(at, v), outVec(at, v));
    }
  }
  scores[local] = partial;
  workgroupBarrier();
  var rowDelta = 0.0;
  for (var k = 0u; k < LANES; k++) {
    rowDelta += scores[row * LANES + k];
  }
  var rowLse = 0.0;
  if (valid) {
    rowLse = lse[stat];
    if (lane == 0u) {
      delta[stat] = rowDelta;
    }
  }

  let j = lane % TILE;
  let part = lane / TILE;
  var dq: array<vec4f, MAX_VECS_PER_LANE>;
  let keyEnd = min(first + ROWS, T);
  let tiles = (keyEnd + TILE - 1u) / TILE;
  for (var tile = 0u; tile < tiles; tile++) {
    let k0 = tile * TILE;
    workgroupBarrier();  // the previous tile (the first time: the delta partials) is consumed
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
    var s = 0.0;
    var dp = 0.0;
    for (var v = part; v < HEAD_VECS; v += PARTS) {
      s += dot(queries[row * HEAD_VECS + v], keys[j * TILE_STRIDE + v]);
      dp += dot(grads[row * HEAD_VECS + v], values[j * TILE_STRIDE + v]);
    }
    scores[local] = s;
    dprobs[local] = dp;
    workgroupBarrier();

    let visible = select(0u, min(TILE, t + 1u - k0), valid && k0 <= t);
    for (var jj = 0u; jj < visible; jj++) {
      var sv = 0.0;
      var dpv = 0.0;
      for (var p = 0u; p < PARTS; p++) {
        sv += scores[row * LANES + p * TILE + jj];
        dpv += dprobs[row * LANES + p * TILE + jj];
      }
      let ds = exp(sv * params.scale - rowLse) * (dpv - rowDelta);
      for (var i = 0u; i < VECS_PER_LANE; i++) {
        dq[i] += ds * keys[jj * TILE_STRIDE + laneVec(lane, i)];
      }
    }
  }

  if (valid) {
    let at = batch + t * C3 + head;
    for (var i = 0u; i < VECS_PER_LANE; i++) {
      let v = lane + i * LANES;
      for (var k = 0u; k < 4u; k++) {
        if (v < HEAD_VECS && 4u * v + k < HEAD_SIZE) {
          dqkv[at + 4u * v + k] += dq[i][k] * params.scale;
        }
      }
    }
  }
}
