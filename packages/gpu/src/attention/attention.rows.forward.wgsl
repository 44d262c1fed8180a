// Causal attention forward, one query row per invocation (after attention.rows.common.wgsl):
// an online softmax over keys 0 … t in order; writes out [B, T, C] and lse [B, NH, T] = m + log l
// of the scaled scores, as the tiled kernel does.

@group(0) @binding(0) var<storage, read_write> qkv: array<f32>;  // [B, T, 3C]
@group(0) @binding(1) var<storage, read_write> out: array<f32>;  // [B, T, C]
@group(0) @binding(2) var<storage, read_write> lse: array<f32>;  // [B, NH, T]
@group(0) @binding(3) var<uniform> params: Params;

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
  var q: array<vec4f, MAX_HEAD_VECS>;
  var o: array<vec4f, MAX_HEAD_VECS>;
  for (var v = 0u; v < HEAD_VECS; v++) {
    q[v] = qkvVec(batch + t * C3 + head, v) * params.scale;
    o[v] = vec4f(0.0);
  }
  var m = LOWEST;
  var l = 0.0;
  for (var j = 0u; j <= t; j++) {
    let at = batch + j * C3 + head;
    var s = 0.0;
    for (var v = 0u; v < HEAD_VECS; v++) {
      s += dot(q[v], qkvVec(at + C, v));
    }
    let mNew = max(m, s);
    let alpha = exp(m - mNew);
    let p = exp(s - mNew);
    l = l * alpha + p;
    for (var v = 0u; v < HEAD_VECS; v++) {
      o[v] = o[v] * alpha + p * qkvVec(at + 2u * C, v);
    }
    m = mNew;
  }
  let inv = 1.0 / l;
  let at = b * T * C + t * C + head;
  for (var v = 0u; v < HEAD_VECS; v++) {
    for (var k = 0u; k < 4u; k++) {
      if (storeMasked(v, k)) {
        out[at + 4u * v + k] = o[v][k] * inv;
      }
    }
  }
  lse[(b * params.NH + h) * T + t] = m + log(l);
}
