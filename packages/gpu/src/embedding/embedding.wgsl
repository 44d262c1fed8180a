// GPT-2's input embedding (llm.c's encoder); see embedding.cpu.ts for the math.
// Shapes: tokens i32 [P = B·T] (0 ≤ token < V, not checked here); wte [V, C]; wpe [≥T, C];
// out, dout [P, C]; cursors [V]; buckets [V + 1 + P].
//
//   forward            one invocation per output float
//   bucketTokens       ONE workgroup: a stable counting sort of the positions by token, so
//                      buckets[v] … buckets[v+1] index, in increasing order, the positions
//                      buckets[V + 1 + i] that hold token v
//   backwardTokens     one invocation per (v, channel): dwte[v,c] += dout[p,c] over v's bucket
//                      (a token's channels are neighbouring invocations: dout reads coalesce)
//   backwardPositions  one invocation per (t, channel): dwpe[t,c] += dout[b,t,c] over b
//
// No float atomics (only u32 counters), and every gradient is a chain of adds in increasing
// position order starting from the old value, which is llm.c's order: the result is the same
// bit for bit on every run, and equal to an f32 CPU reference.
// Cost of the sort: P/WG chunks, each lane comparing its token with the chunk's WG tokens in
// workgroup memory, so ≈ P compares per lane (4096 for P = 4096) plus a scan of V counters in
// V/WG steps, all on one compute unit (not measured on a discrete GPU; ≈ 1 ms on lavapipe at
// P = 4096, V = 256). The gradient passes then read dout once (P·C floats, plus P indices) where
// a scan over all positions per vocabulary row would do V·P·C compares.
//
// Element kernels index a 2D grid of workgroups (group.y·groups.x + group.x) so they may exceed
// 65535 workgroups. Every float binding is read_write, inputs too: WebGPU tracks usage per
// buffer, not per range, so a read-only and a writable binding of the same buffer in one
// dispatch is a validation error, and the model packs many tensors into one buffer.

override WORKGROUP_SIZE: u32 = 256;  // a power of two (bucketTokens scans in workgroup memory)

struct Params {
  B: u32,
  T: u32,
  C: u32,
  V: u32,
}

@group(0) @binding(0) var<storage, read_write> tokens: array<i32>;
@group(0) @binding(1) var<storage, read_write> wte: array<f32>;
@group(0) @binding(2) var<storage, read_write> wpe: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
@group(0) @binding(4) var<storage, read_write> dout: array<f32>;
@group(0) @binding(5) var<storage, read_write> dwte: array<f32>;
@group(0) @binding(6) var<storage, read_write> dwpe: array<f32>;
@group(0) @binding(7) var<storage, read_write> cursors: array<atomic<u32>>;
@group(0) @binding(8) var<storage, read_write> buckets: array<u32>;
@group(0) @binding(9) var<uniform> params: Params;

var<workgroup> chunkTokens: array<i32, WORKGROUP_SIZE>;
var<workgroup> scanScratch: array<u32, WORKGROUP_SIZE>;

fn groupIndex(group: vec3u, groups: vec3u) -> u32 {
  return group.y * groups.x + group.x;
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn forward(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,
           @builtin(local_invocation_index) lane: u32) {
  let j = groupIndex(group, groups) * WORKGROUP_SIZE + lane;
  let C = params.C;
  if (j >= params.B * params.T * C) {
    return;
  }
  let position = j / C;
  let channel = j - position * C;
  let t = position % params.T;
  out[j] = wte[u32(tokens[position]) * C + channel] + wpe[t * C + channel];
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn bucketTokens(@builtin(local_invocation_index) lane: u32) {
  let V = params.V;
  let P = params.B * params.T;
  // 1. Count each token's positions.
  for (var v = lane; v < V; v += WORKGROUP_SIZE) {
    atomicStore(&cursors[v], 0u);
  }
  storageBarrier();
  for (var p = lane; p < P; p += WORKGROUP_SIZE) {
    atomicAdd(&cursors[u32(tokens[p])], 1u);
  }
  storageBarrier();

  // 2. Exclusive prefix sum of the counts, WORKGROUP_SIZE tokens at a time (Hillis–Steele in
  //    workgroup memory, plus the running total of earlier chunks): bucket starts, also the cursors.
  var carry = 0u;
  for (var base = 0u; base < V; base += WORKGROUP_SIZE) {
    let v = base + lane;
    var count = 0u;
    if (v < V) {
      count = atomicLoad(&cursors[v]);
    }
    scanScratch[lane] = count;
    workgroupBarrier();
    for (var offset = 1u; offset < WORKGROUP_SIZE; offset <<= 1u) {
      var add = 0u;
      if (lane >= offset) {
        add = scanScratch[lane - offset];
      }
      workgroupBarrier();
      scanScratch[lane] += add;
      workgroupBarrier();
    }
    let start = carry + scanScratch[lane] - count;
    if (v < V) {
      buckets[v] = start;
      atomicStore(&cursors[v], start);
    }
    carry += scanScratch[WORKGROUP_SIZE - 1u];
    workgroupBarrier();  // all lanes have read the total before the next chunk overwrites it
  }
  if (lane == 0u) {
    buckets[V] = carry;  // = P, the end of the last bucket
  }
  storageBarrier();

  // 3. Stable scatter, WORKGROUP_SIZE positions at a time in increasing order: a position's slot
  //    is its token's cursor plus the number of earlier positions in the chunk with that token;
  //    the token's last position in the chunk then advances the cursor past them all.
  for (var base = 0u; base < P; base += WORKGROUP_SIZE) {
    let p = base + lane;
    var token = -1;  // never equal to a real token
    if (p < P) {
      token = tokens[p];
    }
    chunkTokens[lane] = token;
    workgroupBarrier();
    var rank = 0u;
    var isLast = true;
    var cursor = 0u;
    if (p < P) {
      for (var j = 0u; j < WORKGROUP_SIZE; j++) {
        if (chunkTokens[j] == token) {
          if (j < lane) {
            rank++;
          } else if (j > lane) {
            isLast = false;
          }
        }
      }
      cursor = atomicLoad(&cursors[u32(token)]);
      buckets[V + 1u + cursor + rank] = p;
    }
    storageBarrier();  // every lane has read its cursor before one advances it
    if (p < P && isLast) {
      atomicStore(&cursors[u32(token)], cursor + rank + 1u);
    }
    storageBarrier();  // the advanced cursors are visible to the next chunk
    workgroupBarrier();  // and chunkTokens is free to overwrite
  }
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn backwardTokens(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,
                  @builtin(local_invocation_index) lane: u32) {
  let j = groupIndex(group, groups) * WORKGROUP_SIZE + lane;  // v·C + channel
  let C = params.C;
  let V = params.V;
  if (j >= V * C) {
    return;
  }
  let v = j / C;
  let channel = j - v * C;
  let start = buckets[v];
  let end = buckets[v + 1u];
  if (start == end) {
    return;  // token absent from the batch: leave dwte untouched
  }
  var total = dwte[j];
  for (var i = start; i < end; i++) {
    total += dout[buckets[V + 1u + i] * C + channel];
  }
  dwte[j] = total;
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn backwardPositions(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,
                     @builtin(local_invocation_index) lane: u32) {
  let j = groupIndex(group, groups) * WORKGROUP_SIZE + lane;  // t·C + channel
  let TC = params.T * params.C;
  if (j >= TC) {
    return;
  }
  var total = dwpe[j];
  for (var b = 0u; b < params.B; b++) {
    total += dout[b * TC + j];
  }
  dwpe[j] = total;
}
