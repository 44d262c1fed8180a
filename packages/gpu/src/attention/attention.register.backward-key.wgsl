// Causal attention backward for dK and dV, register-tiled (after attention.register.common.wgsl;
// run after the dQ kernel, which writes delta). Workgroup (x, h, b) owns keys x·32 … and streams
// the queries that can see them (from the block's first key to T − 1), STREAM at a time. Per
// step, each invocation computes its 4 × PER_LANE tile of s = k·(scale · q) and dp = v·dout and,
// with lse and delta of the streamed queries, P[t, s] = exp(s − lse[t]) and
// dS[t, s] = P[t, s] · (dp − delta[t]) (no reduction); after a barrier it accumulates
//   dv_s += Σ_t P[t, s] · dout_t,   dk_s += Σ_t dS[t, s] · (scale · q_t)
// in registers. Each workgroup writes only its own rows of dqkv, so no atomics are needed.

@group(0) @binding(0) var<storage, read_write> qkv: array<f32>;    // [B, T, 3C]
@group(0) @binding(1) var<storage, read_write> dout: array<f32>;   // [B, T, C]
@group(0) @binding(2) var<storage, read_write> lse: array<f32>;    // [B, NH, T]
@group(0) @binding(3) var<storage, read_write> delta: array<f32>;  // [B, NH, T]
@group(0) @binding(4) var<storage, read_write> dqkv: array<f32>;   // [B, T, 3C], k and v parts accumulated
@group(0) @binding(5) var<uniform> params: Params;

var<workgroup> keys: array<vec4f, OWNED_VECS>;      // owned [OWNED, HEAD_VECS]
var<workgroup> values: array<vec4f, OWNED_VECS>;    // owned [OWNED, HEAD_VECS]
var<workgroup> queries: array<vec4f, STREAM_VECS>;  // streamed [STREAM, STRIDE], pre-scaled by 1/√hs
var<workgroup> grads: array<vec4f, STREAM_VECS>;    // streamed dout [STREAM, STRIDE]
var<workgroup> probs: array<vec4f, SCORE_VECS>;     // [STREAM, GRID]: query j's P for keys 4·ty …
var<workgroup> dscores: array<vec4f, SCORE_VECS>;   // [STREAM, GRID]: query j's dS for keys 4·ty …
var<workgroup> streamLse: array<f32, STREAM>;
var<workgroup> streamDelta: array<f32, STREAM>;

fn doutVec(base: u32, v: u32) -> vec4f {
  let c = base + 4u * v;
  return select(vec4f(0.0), vec4f(dout[c], dout[c + 1u], dout[c + 2u], dout[c + 3u]), channelMask(v));
}

@compute @workgroup_size(WORKGROUP)
fn main(@builtin(workgroup_id) group: vec3u, @builtin(local_invocation_index) local: u32) {
  let T = params.T;
  let C = params.C;
  let C3 = 3u * C;
  let first = group.x * OWNED;  // first key of the block
  let h = group.y;
  let b = group.z;
  let tx = local % GRID;
  let ty = local / GRID;
  let batch = b * T * C3;
  let head = h * HEAD_SIZE;
  let stats = (b * params.NH + h) * T;

  for (var e = local; e < OWNED_VECS; e += WORKGROUP) {
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

  var dk: array<vec4f, ROWS_PER_LANE * MAX_CHANNEL_VECS>;  // [i, c]: key 4·ty + i, channel vec4 tx + 8c
  var dv: array<vec4f, ROWS_PER_LANE * MAX_CHANNEL_VECS>;
  // Queries before `first` see none of the owned keys: stream queries first … T − 1.
  let steps = (T - first + STREAM - 1u) / STREAM;
  for (var step = 0u; step < steps; step++) {
    let q0 = first + step * STREAM;
    workgroupBarrier();  // the previous step is consumed (the first time: owned rows are stored)
    for (var e = local; e < STREAM * HEAD_VECS; e += WORKGROUP) {
      let r = e / HEAD_VECS;
      let v = e % HEAD_VECS;
      var q = vec4f(0.0);
      var g = vec4f(0.0);
      if (q0 + r < T) {
        q = qkvVec(batch + (q0 + r) * C3 + head, v) * params.scale;
        g = doutVec(b * T * C + (q0 + r) * C + head, v);
      }
      queries[r * STRIDE + v] = q;
      grads[r * STRIDE + v] = g;
    }
    if (local < STREAM) {
      var x = 0.0;
      var d = 0.0;
      if (q0 + local < T) {
        x = lse[stats + q0 + local];
        d = delta[stats + q0 + local];
      }
      streamLse[local] = x;
      streamDelta[local] = d;
    }
    workgroupBarrier();

    // s[j][i] = k_{4ty+i} · q_{q0+tx+8j} (q pre-scaled), dp[j][i] = v_{4ty+i} · dout_{q0+tx+8j}.
    var s = array<vec4f, MAX_PER_LANE>();  // zeroed each step: an explicit initializer, not the declaration's implicit one
    var dp = array<vec4f, MAX_PER_LANE>();
    for (var v = 0u; v < HEAD_VECS; v++) {
      var k: array<vec4f, ROWS_PER_LANE>;
      var value: array<vec4f, ROWS_PER_LANE>;
      for (var i = 0u; i < ROWS_PER_LANE; i++) {
        k[i] = keys[(ROWS_PER_LANE * ty + i) * HEAD_VECS + v];
        value[i] = values[(ROWS_PER_LANE * ty + i) * HEAD_VECS + v];
      }
      for (var j = 0u; j < MAX_PER_LANE; j++) {
        if (j < PER_LANE) {
          let q = queries[(tx + GRID * j) * STRIDE + v];
          let g = grads[(tx + GRID * j) * STRIDE + v];
          s[j] += vec4f(dot(k[0], q), dot(k[1], q), dot(k[2], q), dot(k[3], q));
          dp[j] += vec4f(dot(value[0], g), dot(value[1], g), dot(value[2], g), dot(value[3], g));
        }
      }
    }
    // Query q0 + tx + 8j sees owned key 4·ty + i when it is not earlier, and exists.
    let owned = vec4u(first + ROWS_PER_LANE * ty) + vec4u(0u, 1u, 2u, 3u);
    for (var j = 0u; j < MAX_PER_LANE; j++) {
      if (j < PER_LANE) {
        let col = tx + GRID * j;
        let query = q0 + col;
        let visible = (vec4u(query) >= owned) & vec4<bool>(query < T);
        let p = exp(s[j] - streamLse[col]);
        let ds = p * (dp[j] - streamDelta[col]);
        probs[col * GRID + ty] = select(vec4f(0.0), p, visible);
        dscores[col * GRID + ty] = select(vec4f(0.0), ds, visible);
      }
    }
    workgroupBarrier();

    for (var u = 0u; u < STREAM; u += 4u) {
      for (var kk = 0u; kk < 4u; kk++) {
        let k = u + kk;
        let p = probs[k * GRID + ty];
        let ds = dscores[k * GRID + ty];
        for (var c = 0u; c < MAX_CHANNEL_VECS; c++) {
          if (c < CHANNEL_VECS) {
            let at = k * STRIDE + channelVec(tx, c);
            let g = grads[at];
            let q = queries[at];
            for (var i = 0u; i < ROWS_PER_LANE; i++) {
              dv[i * MAX_CHANNEL_VECS + c] += p[i] * g;
              dk[i * MAX_CHANNEL_VECS + c] += ds[i] * q;
            }
          }
        }
      }
    }
  }

  for (var i = 0u; i < ROWS_PER_LANE; i++) {
    let key = first + ROWS_PER_LANE * ty + i;
    if (key < T) {
      let at = batch + key * C3 + head;
      for (var c = 0u; c < CHANNEL_VECS; c++) {
        let v = tx + GRID * c;
        for (var k = 0u; k < 4u; k++) {
          if (v < HEAD_VECS && 4u * v + k < HEAD_SIZE) {
            dqkv[at + C + 4u * v + k] += dk[i * MAX_CHANNEL_VECS + c][k];
            dqkv[at + 2u * C + 4u * v + k] += dv[i * MAX_CHANNEL_VECS + c][k];
          }
        }
      }
    }
  }
}
