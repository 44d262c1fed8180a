// Causal attention backward for dK and dV, one key row per invocation (after
// attention.rows.common.wgsl), reading the backward-query kernel's delta. For key j, over
// queries t = j … T − 1 in order:
//   dv_j += P[t, j]·dout_t,   dk_j += scale · P[t, j]·(dout_t·v_j − delta[t])·q_t.

@group(0) @binding(0) var<storage, read_write> qkv: array<f32>;    // [B, T, 3C]
@group(0) @binding(1) var<storage, read_write> dout: array<f32>;   // [B, T, C]
@group(0) @binding(2) var<storage, read_write> lse: array<f32>;    // [B, NH, T]
@group(0) @binding(3) var<storage, read_write> delta: array<f32>;  // [B, NH, T]
@group(0) @binding(4) var<storage, read_write> dqkv: array<f32>;   // [B, T, 3C], k and v parts accumulated
@group(0) @binding(5) var<uniform> params: Params;

fn doutVec(base: u32, v: u32) -> vec4f {
  let c = base + 4u * v;
  return select(vec4f(0.0), vec4f(dout[c], dout[c + 1u], dout[c + 2u], dout[c + 3u]), channelMask(v));
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) group: vec3u, @builtin(local_invocation_index) local: u32) {
  let T = params.T;
  let C = params.C;
  let C3 = 3u * C;
  let j = group.x * WORKGROUP_SIZE + local;
  let h = group.y;
  let b = group.z;
  if (j >= T) {
    return;
  }
  let batch = b * T * C3;
  let head = h * HEAD_SIZE;
  let stats = (b * params.NH + h) * T;
  var kx: array<vec4f, MAX_HEAD_VECS>;
  var vx: array<vec4f, MAX_HEAD_VECS>;
  var dk: array<vec4f, MAX_HEAD_VECS>;
  var dv: array<vec4f, MAX_HEAD_VECS>;
  for (var v = 0u; v < HEAD_VECS; v++) {
    kx[v] = qkvVec(batch + j * C3 + head + C, v) * params.scale;
    vx[v] = qkvVec(batch + j * C3 + head + 2u * C, v);
    dk[v] = vec4f(0.0);
    dv[v] = vec4f(0.0);
  }
  for (var t = j; t < T; t++) {
    let at = batch + t * C3 + head;
    let row = b * T * C + t * C + head;
    var s = 0.0;
    var dp = 0.0;
    for (var v = 0u; v < HEAD_VECS; v++) {
      s += dot(qkvVec(at, v), kx[v]);
      dp += dot(doutVec(row, v), vx[v]);
    }
    let p = exp(s - lse[stats + t]);
    let ds = p * (dp - delta[stats + t]);
    for (var v = 0u; v < HEAD_VECS; v++) {
      dv[v] += p * doutVec(row, v);
      dk[v] += ds * qkvVec(at, v);
    }
  }
  let at = batch + j * C3 + head;
  for (var v = 0u; v < HEAD_VECS; v++) {
    for (var k = 0u; k < 4u; k++) {
      if (storeMasked(v, k)) {
        dqkv[at + C + 4u * v + k] += params.scale * dk[v][k];
        dqkv[at + 2u * C + 4u * v + k] += dv[v][k];
      }
    }
  }
}
