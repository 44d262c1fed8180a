// Shared by the register-tiled attention kernels (attention.register.*.wgsl), the variant for
// GPUs (FlashAttention-2's loop structure without tensor cores). A workgroup of 64 invocations,
// seen as an 8 × 8 grid (ty = local / 8, tx = local % 8), owns OWNED = 32 rows of one
// (batch, head) — queries in the forward and dQ kernels, keys in the dK/dV kernel — and streams
// the other side through workgroup memory STREAM = 8 · PER_LANE rows at a time. Each step is two
// products, and each invocation computes a register tile of both, always for the same 4 owned
// rows 4·ty … 4·ty + 3 (its "row group", shared with the 7 other invocations of that ty):
//
//   owned × streamed (scores q·k, and dout·v in the backward): the 4 rows against streamed rows
//     tx + 8j (j < PER_LANE). Per vec4 of the head: 4 + PER_LANE workgroup loads (the 8
//     invocations of a row group read the same owned vec4: a broadcast) for 16 · PER_LANE FMAs.
//     The resulting probabilities go to workgroup memory transposed, [streamed row, ty] as vec4s
//     over the 4 rows, so each invocation writes whole vec4s.
//   owned × channels (o, dq, dk, dv += probabilities · streamed rows): the 4 rows against channel
//     vec4s tx + 8c (c < CHANNEL_VECS), accumulated in registers over the whole stream. Per
//     streamed row: 1 load of the 4 rows' probabilities and CHANNEL_VECS loads of streamed vec4s,
//     for 16 · CHANNEL_VECS FMAs.
//
// Streamed rows are stored with a padded stride (HEAD_VECS + 1 vec4s), so the 8 invocations of
// a row group reading 8 different streamed rows hit different banks. Every sum runs in a fixed
// order, so results are the same from run to run. Head sizes up to 96 (24 vec4s, 3 channel
// vec4s an invocation): the private tiles below are sized for that; loops over them run to the
// constant maxima and skip what the head size leaves unused, so they unroll into registers.

override HEAD_SIZE: u32;     // hs = C / NH
override HEAD_VECS: u32;     // ⌈hs / 4⌉ ≤ 24
override PER_LANE: u32;      // streamed rows per invocation in the score tile, ≤ MAX_PER_LANE
override STREAM: u32;        // 8 · PER_LANE streamed rows per step
override CHANNEL_VECS: u32;  // ⌈HEAD_VECS / 8⌉ ≤ MAX_CHANNEL_VECS
override STRIDE: u32;        // HEAD_VECS + 1: padded stride of streamed rows, in vec4s
override OWNED_VECS: u32;    // OWNED · HEAD_VECS
override STREAM_VECS: u32;   // STREAM · STRIDE
override SCORE_VECS: u32;    // STREAM · OWNED / 4: [streamed row, ty] vec4s over a row group

const GRID = 8u;            // the workgroup is GRID × GRID invocations
const WORKGROUP = 64u;
const OWNED = 32u;          // owned rows per workgroup: 4·ty + i, i < ROWS_PER_LANE
const ROWS_PER_LANE = 4u;
const MAX_PER_LANE = 4u;
const MAX_CHANNEL_VECS = 3u;
const LOWEST = -1.0e30;     // a masked score: exp(LOWEST − m) is 0, with no infinities

struct Params {
  T: u32,      // sequence length
  C: u32,      // channels; qkv rows hold 3C
  NH: u32,     // heads
  scale: f32,  // 1/√hs
}

// Which of channels 4v … 4v + 3 exist (hs need not be a multiple of 4).
fn channelMask(v: u32) -> vec4<bool> {
  let c = 4u * v;
  return vec4<bool>(c < HEAD_SIZE, c + 1u < HEAD_SIZE, c + 2u < HEAD_SIZE, c + 3u < HEAD_SIZE);
}

// vec4 v of the head row starting at element `base` of qkv, zero past hs.
fn qkvVec(base: u32, v: u32) -> vec4f {
  let c = base + 4u * v;
  return select(vec4f(0.0), vec4f(qkv[c], qkv[c + 1u], qkv[c + 2u], qkv[c + 3u]), channelMask(v));
}

// The channel vec4 an invocation accumulates as its c-th, clamped so that surplus invocations
// (HEAD_VECS not a multiple of 8) read a valid address; their sums are never written.
fn channelVec(tx: u32, c: u32) -> u32 {
  return min(tx + GRID * c, HEAD_VECS - 1u);
}
