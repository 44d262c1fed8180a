// Shared by the row-per-invocation attention kernels (attention.rows.*.wgsl), the variant for
// CPU implementations of WebGPU (lavapipe, SwiftShader). There, workgroup memory and barriers
// cost more than they save: an invocation is a SIMD lane of a CPU core, and the rows it streams
// stay in the core's cache anyway. So each invocation owns one row (a query, or a key for dK/dV)
// and loops over the other side straight from the storage buffers, keeping its accumulators in
// private vec4 arrays. Same bindings, same results and the same fixed summation orders per row
// as the tiled kernels; only the grid differs (WORKGROUP_SIZE rows per workgroup).

override HEAD_SIZE: u32;       // hs = C / NH
override HEAD_VECS: u32;       // ⌈hs / 4⌉ ≤ MAX_HEAD_VECS
override WORKGROUP_SIZE: u32;  // rows per workgroup

// hs ≤ 32. Larger private arrays make llvmpipe spill every accumulator access to memory: at
// hs 64 these kernels ran over 100× slower than the tiled ones, so larger heads use those.
const MAX_HEAD_VECS = 8u;
const LOWEST = -1.0e30;

struct Params {
  T: u32,
  C: u32,
  NH: u32,
  scale: f32,
}

fn channelMask(v: u32) -> vec4<bool> {
  let c = 4u * v;
  return vec4<bool>(c < HEAD_SIZE, c + 1u < HEAD_SIZE, c + 2u < HEAD_SIZE, c + 3u < HEAD_SIZE);
}

fn qkvVec(base: u32, v: u32) -> vec4f {
  let c = base + 4u * v;
  return select(vec4f(0.0), vec4f(qkv[c], qkv[c + 1u], qkv[c + 2u], qkv[c + 3u]), channelMask(v));
}

// Whether channel k of vec4 v (channel 4v + k) is one of the head's hs channels.
fn storeMasked(v: u32, k: u32) -> bool {
  return 4u * v + k < HEAD_SIZE;
}
