// Causal attention backward for dQ, one query row per invocation (after
// attention.rows.common.wgsl). Writes delta[t] = Σ_c dout[t, c]·out[t, c] for the dK/dV kernel,
// recomputes P[t, j] = exp(scale·q_t·k_j − lse[t]) and accumulates
//   dq_t += scale · Σ_j P[t, j]·(dout_t·v_j − delta[t])·k_j   (j = 0 … t, in order).

@group(0) @binding(0) var<storage, read_write> qkv: array<f32>;    // [B, T, 3C]
@group(0) @binding(1) var<storage, read_write> out: array<f32>;    // [B, T, C]
@group(0) @binding(2) var<storage, read_write> dout: array<f32>;   // [B, T, C]
@group(0) @binding(3) var<storage, read_write> lse: array<f32>;    // [B, NH, T]
@group(0) @binding(4) var<storage, read_write> delta: array<f32>;  // [B, NH, T], written
@group(0) @binding(5) var<storage, read_write> dqkv: array<f32>;   // [B, T, 3C], q part accumulated
@group(0) @binding(6) var<uniform> params: Params;

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
  let t = group.x * WORKGROUP_SIZE + local;
  let h = group.y;
  let b = group.z;
  if (t >= T) {
    return;
  }
  let batch = b * T * C3;
  let head = h * HEAD_SIZE;
  let row = b * T * C + t * C + head;
  let stat = (b * params.NH + h) * T + t;
  var q: array<vec4f, MAX_HEAD_VECS>;
  var g: array<vec4f, MAX_HEAD_VECS>;
  var dq: array<vec4f, MAX_HEAD_VECS>;
  var rowDelta = 0.0;
  for (var v = 0u; v < HEAD_VECS; v++) {
    q[v] = qkvVec(batch + t * C3 + head, v) * params.scale;
    g[v] = doutVec(row, v);
    dq[v] = vec4f(0.0);
    rowDelta += dot(g[v], outVec(row, v));
  }
  delta[stat] = rowDelta;
  let rowLse = lse[stat];
  for (var j = 0u; j <= t; j++) {
    let at = batch + j * C3 + head;
    var s = 0.0;
    var dp = 0.0;
    for (var v = 0u; v < HEAD_VECS; v++) {
      s += dot(q[v], qkvVec(at + C, v));
      dp += dot(g[v], qkvVec(at + 2u * C, v));
    }
    let ds = exp(s - rowLse) * (dp - rowDelta);
    for (var v = 0u; v < HEAD_VECS; v++) {
      dq[v] += ds * qkvVec(at + C, v);
    }
  }
  let at = batch + t * C3 + head;
  for (var v = 0u; v < HEAD_VECS; v++) {
    for (var k = 0u; k < 4u; k++) {
      if (storeMasked(v, k)) {
        dqkv[at + 4u * v + k] += params.scale * dq[v][k];
      }
    }
  }
}
