// Causal attention backward for dQ, register-tiled (after attention.register.common.wgsl).
// Workgroup (x, h, b) owns queries x·32 … and streams keys and values 0 … last query. Invocation
// r < 32 first writes, for owned query t = x·32 + r,
//   delta[t] = Σ_c dout[t, c] · out[t, c]  (= Σ_j P[t, j] · dP[t, j])
// for the dK/dV kernel. Per step, each invocation computes its 4 × PER_LANE tile of both
// s = scale · q·k and dp = dout·v, then, with lse from the forward, with no reduction at all,
//   dS[t, j] = exp(s − lse[t]) · (dp − delta[t]),
// and after a barrier accumulates dq_t += Σ_j dS[t, j] · k_j in registers (scaled once at the end).
// Each workgroup writes only its own rows of dqkv, so no atomics are needed.

@group(0) @binding(0) var<storage, read_write> qkv: array<f32>;    // [B, T, 3C]
@group(0) @binding(1) var<storage, read_write> out: array<f32>;    // [B, T, C] forward output
@group(0) @binding(2) var<storage, read_write> dout: array<f32>;   // [B, T, C]
@group(0) @binding(3) var<storage, read_write> lse: array<f32>;    // [B, NH, T]
@group(0) @binding(4) var<storage, read_write> delta: array<f32>;  // [B, NH, T], written
@group(0) @binding(5) var<storage, read_write> dqkv: array<f32>;   // [B, T, 3C], q part accumulated
@group(0) @binding(6) var<uniform> params: Params;

var<workgroup> queries: array<vec4f, OWNED_VECS>;  // [OWNED, HEAD_VECS], pre-scaled by 1/√hs
var<workgroup> grads: array<vec4f, OWNED_VECS>;    // dout rows [OWNED, HEAD_VECS]
var<workgroup> keys: array<vec4f, STREAM_VECS>;    // [STREAM, STRIDE]
var<workgroup> values: array<vec4f, STREAM_VECS>;  // [STREAM, STRIDE]
var<workgroup> dscores: array<vec4f, SCORE_VECS>;  // [STREAM, GRID]: key j's dS for rows 4·ty …
var<workgroup> stats: array<f32, 2u * OWNED>;      // lse of the owned rows, then delta

fn doutVec(base: u32, v: u32) -> vec4f {
  let c = base + 4u * v;
  return select(vec4f(0.0), vec4f(dout[c], dout[c + 1u], dout[c + 2u], dout[c + 3u]), channelMask(v));
}

fn outVec(base: u32, v: u32) -> vec4f {
  let c = base + 4u * v;
  return select(vec4f(0.0), vec4f(out[c], out[c + 1u], out[c + 2u], out[c + 3u]), channelMask(v));
}

@compute @workgroup_size(WORKGROUP)
fn main(@builtin(workgroup_id) group: vec3u, @builtin(local_invocation_index) local: u32) {
  let T = params.T;
  let C = params.C;
  let C3 = 3u * C;
  let first = group.x * OWNED;
  let h = group.y;
  let b = group.z;
  let tx = local % GRID;
  let ty = local / GRID;
  let batch = b * T * C3;
  let head = h * HEAD_SIZE;
  let stat = (b * params.NH + h) * T;  // row 0 of this (batch, head) in lse and delta

  for (var e = local; e < OWNED_VECS; e += WORKGROUP) {
    let tq = first + e / HEAD_VECS;
    let v = e % HEAD_VECS;
    var q = vec4f(0.0);
    var g = vec4f(0.0);
    if (tq < T) {
      q = qkvVec(batch + tq * C3 + head, v) * params.scale;
      g = doutVec(b * T * C + tq * C + head, v);
    }
    queries[e] = q;
    grads[e] = g;
  }
  if (local < OWNED) {
    let t = first + local;
    var d = 0.0;
    var x = 0.0;
    if (t < T) {
      let at = b * T * C + t * C + head;
      for (var v = 0u; v < HEAD_VECS; v++) {
        d += dot(doutVec(at, v), outVec(at, v));
      }
      delta[stat + t] = d;
      x = lse[stat + t];
    }
    stats[local] = x;
    stats[OWNED + local] = d;
  }
  workgroupBarrier();
  let r0 = ROWS_PER_LANE * ty;
  let rowLse = vec4f(stats[r0], stats[r0 + 1u], stats[r0 + 2u], stats[r0 + 3u]);
  let rowDelta = vec4f(stats[OWNED + r0], stats[OWNED + r0 + 1u], stats[OWNED + r0 + 2u], stats[OWNED + r0 + 3u]);

  var dq: array<vec4f, ROWS_PER_LANE * MAX_CHANNEL_VECS>;  // [i, c]: row 4·ty + i, channel vec4 tx + 8c
  let keyEnd = min(first + OWNED, T);
  let steps = (keyEnd + STREAM - 1u) / STREAM;
  for (var step = 0u; step < steps; step++) {
    let k0 = step * STREAM;
    workgroupBarrier();  // the previous step is consumed (the first time: owned rows are stored)
    for (var e = local; e < STREAM * HEAD_VECS; e += WORKGROUP) {
      let r = e / HEAD_VECS;
      let v = e % HEAD_VECS;
      var kx = vec4f(0.0);
      var vx = vec4f(0.0);
      if (k0 + r < T) {
        let at = batch + (k0 + r) * C3 + head;
        kx = qkvVec(at + C, v);
        vx = qkvVec(at + 2u * C, v);
      }
      keys[r * STRIDE + v] = kx;
      values[r * STRIDE + v] = vx;
    }
    workgroupBarrier();

    // s[j][i] = q_{4ty+i} · k_{k0+tx+8j} (q pre-scaled), dp[j][i] = dout_{4ty+i} · v_{k0+tx+8j}.
    var s = array<vec4f, MAX_PER_LANE>();  // zeroed each step: an explicit initializer, not the declaration's implicit one
    var dp = array<vec4f, MAX_PER_LANE>();
    for (var v = 0u; v < HEAD_VECS; v++) {
      var q: array<vec4f, ROWS_PER_LANE>;
      var g: array<vec4f, ROWS_PER_LANE>;
      for (var i = 0u; i < ROWS_PER_LANE; i++) {
        q[i] = queries[(ROWS_PER_LANE * ty + i) * HEAD_VECS + v];
        g[i] = grads[(ROWS_PER_LANE * ty + i) * HEAD_VECS + v];
      }
      for (var j = 0u; j < MAX_PER_LANE; j++) {
        if (j < PER_LANE) {
          let k = keys[(tx + GRID * j) * STRIDE + v];
          let value = values[(tx + GRID * j) * STRIDE + v];
          s[j] += vec4f(dot(q[0], k), dot(q[1], k), dot(q[2], k), dot(q[3], k));
          dp[j] += vec4f(dot(g[0], value), dot(g[1], value), dot(g[2], value), dot(g[3], value));
        }
      }
    }
    let diagonal = k0 + STREAM > first + 1u;
    let rows = vec4u(first + ROWS_PER_LANE * ty) + vec4u(0u, 1u, 2u, 3u);
    for (var j = 0u; j < MAX_PER_LANE; j++) {
      if (j < PER_LANE) {
        let key = k0 + tx + GRID * j;
        let ds = exp(s[j] - rowLse) * (dp[j] - rowDelta);
        dscores[(tx + GRID * j) * GRID + ty] = select(ds, vec4f(0.0), vec4<bool>(diagonal) & (vec4u(key) > rows));
      }
    }
    workgroupBarrier();

    for (var u = 0u; u < STREAM; u += 4u) {
      for (var kk = 0u; kk < 4u; kk++) {
        let k = u + kk;
        let ds = dscores[k * GRID + ty];
        for (var c = 0u; c < MAX_CHANNEL_VECS; c++) {
          if (c < CHANNEL_VECS) {
            let key = keys[k * STRIDE + channelVec(tx, c)];
            for (var i = 0u; i < ROWS_PER_LANE; i++) {
              dq[i * MAX_CHANNEL_VECS + c] += ds[i] * key;
            }
          }
        }
      }
    }
  }

  for (var i = 0u; i < ROWS_PER_LANE; i++) {
    let t = first + ROWS_PER_LANE * ty + i;
    if (t < T) {
      let at = batch + t * C3 + head;
      for (var c = 0u; c < CHANNEL_VECS; c++) {
        let v = tx + GRID * c;
        for (var k = 0u; k < 4u; k++) {
          if (v < HEAD_VECS && 4u * v + k < HEAD_SIZE) {
            dqkv[at + 4u * v + k] += dq[i * MAX_CHANNEL_VECS + c][k] * params.scale;
          }
        }
      }
    }
  }
}
