// Causal attention backward for dK and dV (after attention.common.wgsl; run after the dQ
// kernel, which writes delta). Workgroup (x, h, b) owns keys x·ROWS … and streams the queries
// that can see them (from the owned block's first key to T − 1). Per owned key s:
//   P[t, s] = exp(scale · q_t·k_s − lse[t]),  dv_s += Σ_t P[t, s] · dout_t,
//   dS[t, s] = P[t, s] · (dout_t·v_s − delta[t]),  dk_s += scale · Σ_t dS[t, s] · q_t.
// Each workgroup writes only its own rows of dqkv, so no atomics are needed.

@group(0) @binding(0) var<storage, read_write> qkv: array<f32>;          // [B, T, 3C]
@group(0) @binding(1) var<storage, read_write> dout: array<f32>;         // [B, T, C]
@group(0) @binding(2) var<storage, read_write> lse: array<f32>;          // [B, NH, T]
@group(0) @binding(3) var<storage, read_write> delta: array<f32>;        // [B, NH, T]
@group(0) @binding(4) var<storage, read_write> dqkv: array<f32>;   // [B, T, 3C], k and v parts accumulated
@group(0) @binding(5) var<uniform> params: Params;

var<workgroup> keys: array<vec4f, ROW_VECS>;        // owned keys [ROWS, HEAD_VECS]
var<workgroup> values: array<vec4f, ROW_VECS>;      // owned values [ROWS, HEAD_VECS]
var<workgroup> queries: array<vec4f, TILE_VECS>;    // streamed [TILE, TILE_STRIDE]
var<workgroup> grads: array<vec4f, TILE_VECS>;      // streamed dout [TILE, TILE_STRIDE]
var<workgroup> tileLse: array<f32, TILE>;
var<workgroup> tileDelta: array<f32, TILE>;
var<workgroup> scores: array<f32, WORKGROUP_SIZE>;  // [ROWS, PARTS, TILE] partial k·q
var<workgroup> dprobs: array<f32, WORKGROUP_SIZE>;  // [ROWS, PARTS, TILE] partial v·dout

fn doutVec(base: u32, v: u32) -> vec4f {
  let c = base + 4u * v;
  return select(vec4f(0.0), vec4f(dout[c], dout[c + 1u], dout[c + 2u], dout[c + 3u]), channelMask(v));
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) group: vec3u, @builtin(local_invocation_index) local: u32) {
  let T = params.T;
  let C = params.C;
  let C3 = 3u * C;
  let first = group.x * ROWS;  // first key of the block
  let h = group.y;
  let b = group.z;
  let row = local / LANES;
  let lane = local % LANES;
  let s = first + row;  // this invocation's key
  let batch = b * T * C3;
  let head = h * HEAD_SIZE;
  let stats = (b * params.NH + h) * T;

  for (var e = local; e < ROW_VECS; e += WORKGROUP_SIZE) {
    let tk = first + e / HEAD_VECS;
    let v = e % HEAD_VECS;
    var kx = vec4f(0.0);
    var vx = vec4f(0.0);
    if (tk < T) {
      let at = batch + tk * C3 + head;
      kx = qkvVec(at + C, v);
      vx = qkvVec(at + 2u * C, v);
    }
    keys[e] = kx;
    values[e] = vx;
  }

  let j = lane % TILE;
  let part = lane / TILE;
  var dk: array<vec4f, MAX_VECS_PER_LANE>;
  var dv: array<vec4f, MAX_VECS_PER_LANE>;
  // Queries before `first` see none of the owned keys: stream queries first … T − 1.
  let tiles = (T - first + TILE - 1u) / TILE;
  for (var tile = 0u; tile < tiles; tile++) {
    let q0 = first + tile * TILE;
    workgroupBarrier();  // the previous tile is consumed (the first time: keys and values are stored)
    for (var e = local; e < TILE * HEAD_VECS; e += WORKGROUP_SIZE) {
      let r = e / HEAD_VECS;
      let v = e % HEAD_VECS;
      var q = vec4f(0.0);
      var g = vec4f(0.0);
      if (q0 + r < T) {
        q = qkvVec(batch + (q0 + r) * C3 + head, v);
        g = doutVec(b * T * C + (q0 + r) * C + head, v);
      }
      queries[r * TILE_STRIDE + v] = q;
      grads[r * TILE_STRIDE + v] = g;
    }
    if (local < TILE) {
      var x = 0.0;
      var d = 0.0;
      if (q0 + local < T) {
        x = lse[stats + q0 + local];
        d = delta[stats + q0 + local];
      }
      tileLse[local] = x;
      tileDelta[local] = d;
    }
    workgroupBarrier();
    var sc = 0.0;
    var dp = 0.0;
    for (var v = part; v < HEAD_VECS; v += PARTS) {
      sc += dot(keys[row * HEAD_VECS + v], queries[j * TILE_STRIDE + v]);
      dp += dot(values[row * HEAD_VECS + v], grads[j * TILE_STRIDE + v]);
    }
    scores[local] = sc;
    dprobs[local] = dp;
    workgroupBarrier();

    // Queries q0 + jj that see key s: s ≤ q0 + jj < T.
    let lo = select(0u, s - q0, s > q0);
    let hi = min(TILE, T - q0);
    for (var jj = lo; jj < hi; jj++) {
      var sv = 0.0;
      var dpv = 0.0;
      for (var p = 0u; p < PARTS; p++) {
        sv += scores[row * LANES + p * TILE + jj];
        dpv += dprobs[row * LANES + p * TILE + jj];
      }
      let prob = exp(sv * params.scale - tileLse[jj]);
      let ds = prob * (dpv - tileDelta[jj]);
      for (var i = 0u; i < VECS_PER_LANE; i++) {
        let v = laneVec(lane, i);
        dv[i] += prob * grads[jj * TILE_STRIDE + v];
        dk[i] += ds * queries[jj * TILE_STRIDE + v];
      }
    }
  }

  if (s < T) {
    let at = batch + s * C3 + head;
    for (var i = 0u; i < VECS_PER_LANE; i++) {
      let v = lane + i * LANES;
      for (var k = 0u; k < 4u; k++) {
        if (v < HEAD_VECS && 4u * v + k < HEAD_SIZE) {
          dqkv[at + C + 4u * v + k] += dk[i][k] * params.scale;
          dqkv[at + 2u * C + 4u * v + k] += dv[i][k];
        }
      }
    }
  }
}
