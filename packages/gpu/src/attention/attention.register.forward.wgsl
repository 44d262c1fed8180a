// Causal attention forward, register-tiled (after attention.register.common.wgsl and a reduce
// file that defines groupMax and groupSum across a row group's 8 invocations). Workgroup
// (x, h, b) owns queries x·32 … x·32 + 31 of head h in batch b and streams keys and values
// 0 … last query, STREAM at a time; keys past the block's last query are never loaded, and only
// steps that reach the diagonal apply the mask. Per step, each invocation
//   1. computes its scores s (4 rows × PER_LANE keys) in registers;
//   2. takes the row maxima of the step across its row group (groupMax: subgroup shuffles, or
//      workgroup memory), updates the running max m (the same in all 8 invocations), and
//      rescales its o and its partial row sum l by exp(m_old − m_new);
//   3. writes p = exp(s − m) transposed to workgroup memory and, after a barrier, accumulates
//      o += P · V for its 4 rows × CHANNEL_VECS channel vec4s.
// The partial sums l are added across the row group once, at the end. Writes out [B, T, C] and
// lse [B, NH, T] = m + log l of the scaled scores, as the other kernels.

@group(0) @binding(0) var<storage, read_write> qkv: array<f32>;  // [B, T, 3C]
@group(0) @binding(1) var<storage, read_write> out: array<f32>;  // [B, T, C]
@group(0) @binding(2) var<storage, read_write> lse: array<f32>;  // [B, NH, T]
@group(0) @binding(3) var<uniform> params: Params;

var<workgroup> queries: array<vec4f, OWNED_VECS>;  // [OWNED, HEAD_VECS], pre-scaled by 1/√hs
var<workgroup> keys: array<vec4f, STREAM_VECS>;    // [STREAM, STRIDE]
var<workgroup> values: array<vec4f, STREAM_VECS>;  // [STREAM, STRIDE]
var<workgroup> probs: array<vec4f, SCORE_VECS>;    // [STREAM, GRID]: key j's probabilities for rows 4·ty …

@compute @workgroup_size(WORKGROUP)
fn main(@builtin(workgroup_id) group: vec3u, @builtin(local_invocation_index) local: u32) {
  let T = params.T;
  let C = params.C;
  let C3 = 3u * C;
  let first = group.x * OWNED;  // first query of the block
  let h = group.y;
  let b = group.z;
  let tx = local % GRID;
  let ty = local / GRID;
  let batch = b * T * C3;
  let head = h * HEAD_SIZE;

  for (var e = local; e < OWNED_VECS; e += WORKGROUP) {
    let tq = first + e / HEAD_VECS;
    var q = vec4f(0.0);
    if (tq < T) {
      q = qkvVec(batch + tq * C3 + head, e % HEAD_VECS) * params.scale;
    }
    queries[e] = q;
  }

  // Rows 4·ty + i are component i of these vec4s.
  var m = vec4f(LOWEST);  // running max, the same in the row group's 8 invocations
  var l = vec4f(0.0);     // running sum over this invocation's keys
  var o: array<vec4f, ROWS_PER_LANE * MAX_CHANNEL_VECS>;  // [i, c]: row 4·ty + i, channel vec4 tx + 8c
  let keyEnd = min(first + OWNED, T);  // keys 0 … keyEnd − 1 are visible to some query of the block
  let steps = (keyEnd + STREAM - 1u) / STREAM;
  for (var step = 0u; step < steps; step++) {
    let k0 = step * STREAM;
    workgroupBarrier();  // the previous step is consumed (the first time: queries are stored)
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

    // 1. s[j][i] = q_{4ty+i} · k_{k0+tx+8j}.
    var s = array<vec4f, MAX_PER_LANE>();  // zeroed each step: an explicit initializer, not the declaration's implicit one
    for (var v = 0u; v < HEAD_VECS; v++) {
      var q: array<vec4f, ROWS_PER_LANE>;
      for (var i = 0u; i < ROWS_PER_LANE; i++) {
        q[i] = queries[(ROWS_PER_LANE * ty + i) * HEAD_VECS + v];
      }
      for (var j = 0u; j < MAX_PER_LANE; j++) {
        if (j < PER_LANE) {
          let k = keys[(tx + GRID * j) * STRIDE + v];
          s[j] += vec4f(dot(q[0], k), dot(q[1], k), dot(q[2], k), dot(q[3], k));
        }
      }
    }
    // 2. The step's row maxima over visible keys; rescale what was summed under the old max.
    let diagonal = k0 + STREAM > first + 1u;  // some key of the step is later than some query
    let rows = vec4u(first + ROWS_PER_LANE * ty) + vec4u(0u, 1u, 2u, 3u);
    var stepMax = vec4f(LOWEST);
    for (var j = 0u; j < MAX_PER_LANE; j++) {
      if (j < PER_LANE) {
        let key = k0 + tx + GRID * j;
        s[j] = select(s[j], vec4f(LOWEST), vec4<bool>(diagonal) & (vec4u(key) > rows));
        stepMax = max(stepMax, s[j]);
      }
    }
    let mNew = max(m, groupMax(stepMax, local));
    let alpha = exp(m - mNew);
    m = mNew;
    l *= alpha;
    for (var i = 0u; i < ROWS_PER_LANE; i++) {
      for (var c = 0u; c < MAX_CHANNEL_VECS; c++) {
        o[i * MAX_CHANNEL_VECS + c] *= alpha[i];
      }
    }
    // 3. Probabilities, transposed, then o += P · V.
    for (var j = 0u; j < MAX_PER_LANE; j++) {
      if (j < PER_LANE) {
        let p = exp(s[j] - m);
        l += p;
        probs[(tx + GRID * j) * GRID + ty] = p;
      }
    }
    workgroupBarrier();
    for (var u = 0u; u < STREAM; u += 4u) {
      for (var kk = 0u; kk < 4u; kk++) {
        let k = u + kk;
        let p = probs[k * GRID + ty];
        for (var c = 0u; c < MAX_CHANNEL_VECS; c++) {
          if (c < CHANNEL_VECS) {
            let value = values[k * STRIDE + channelVec(tx, c)];
            for (var i = 0u; i < ROWS_PER_LANE; i++) {
              o[i * MAX_CHANNEL_VECS + c] += p[i] * value;
            }
          }
        }
      }
    }
  }

  let total = groupSum(l, local);
  let inv = 1.0 / total;
  if (tx == 0u) {
    for (var i = 0u; i < ROWS_PER_LANE; i++) {
      let t = first + ROWS_PER_LANE * ty + i;
      if (t < T) {
        lse[(b * params.NH + h) * T + t] = m[i] + log(total[i]);
      }
    }
  }
  for (var i = 0u; i < ROWS_PER_LANE; i++) {
    let t = first + ROWS_PER_LANE * ty + i;
    if (t < T) {
      let at = b * T * C + t * C + head;
      for (var c = 0u; c < CHANNEL_VECS; c++) {
        let v = tx + GRID * c;
        for (var k = 0u; k < 4u; k++) {
          if (v < HEAD_VECS && 4u * v + k < HEAD_SIZE) {
            out[at + 4u * v + k] = o[i * MAX_CHANNEL_VECS + c][k] * inv[i];
          }
        }
      }
    }
  }
}
