// Shared by the attention kernels (concatenated in front of each). Flash-attention style: a
// workgroup owns ROWS rows of one (batch, head) — queries in the forward and dQ kernels, keys in
// the dK/dV kernel — and streams the other side through workgroup memory TILE rows at a time.
// Shapes and tiles come from the host (attention.tiling.ts) as overrides.
//
// Rows live in workgroup memory as HEAD_VECS vec4s (hs channels, zero-padded to a multiple of 4):
// a quarter of the loop iterations and 128-bit workgroup loads.
//
// Lane roles within an owned row (LANES invocations per row):
//   dot products: lane = part·TILE + j computes the partial dot product of the owned row with
//                 streamed row j over vec4s v ≡ part (mod PARTS); the PARTS partials are then
//                 summed in a fixed order, so results are deterministic.
//   accumulators: lane holds vec4s v = lane + i·LANES (i < VECS_PER_LANE) of its row's output
//                 (o, dq, dk, dv) in registers.

override HEAD_SIZE: u32;      // hs = C / NH channels per head
override HEAD_VECS: u32;      // ⌈hs / 4⌉
override LANES: u32;          // invocations per owned row
override ROWS: u32;           // owned rows per workgroup; LANES · ROWS = WORKGROUP_SIZE
override TILE: u32;           // streamed rows per step; divides LANES
override PARTS: u32;          // LANES / TILE invocations share one dot product
override VECS_PER_LANE: u32;  // ⌈HEAD_VECS / LANES⌉ ≤ MAX_VECS_PER_LANE
override TILE_STRIDE: u32;    // HEAD_VECS + 1: padded stride of streamed rows (lanes read different rows)
override ROW_VECS: u32;       // ROWS · HEAD_VECS
override TILE_VECS: u32;      // TILE · TILE_STRIDE
override WORKGROUP_SIZE: u32; // LANES · ROWS

const MAX_VECS_PER_LANE = 2u;
const LOWEST = -1.0e30;  // running max before any key: exp(LOWEST − m) is 0, with no infinities

struct Params {
  T: u32,      // sequence length
  C: u32,      // channels; qkv rows hold 3C
  NH: u32,     // heads
  scale: f32,  // 1/√hs
}

// vec4 i of this lane's accumulator, clamped so surplus lanes (HEAD_VECS not a multiple of
// LANES) read a valid address; their values are never written back.
fn laneVec(lane: u32, i: u32) -> u32 {
  return min(lane + i * LANES, HEAD_VECS - 1u);
}

// Which of channels 4v … 4v + 3 exist (hs need not be a multiple of 4).
fn channelMask(v: u32) -> vec4<bool> {
  let c = 4u * v;
  return vec4<bool>(c < HEAD_SIZE, c + 1u < HEAD_SIZE, c + 2u < HEAD_SIZE, c + 3u < HEAD_SIZE);
}

// vec4 v of the head row starting at element `base` of qkv (every kernel binds `qkv`), zero past hs.
fn qkvVec(base: u32, v: u32) -> vec4f {
  let c = base + 4u * v;
  return select(vec4f(0.0), vec4f(qkv[c], qkv[c + 1u], qkv[c + 2u], qkv[c + 3u]), channelMask(v));
}
