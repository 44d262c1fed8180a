// Tiled matmul core: result[M,N] = op(A)·op(B) over K, shared by the three products of a linear
// layer (weights [OC,C] row-major, activations [rows, features] row-major):
//
//   product          M   N   K   A stored as             B stored as
//   forward          N   OC  C   inp  [M,K] (K-contig.)  W   [N,K] (K-contig.)
//   backward input   N   C   OC  dout [M,K] (K-contig.)  W   [K,N] (N-contig.)
//   backward weight  OC  C   N   dout [K,M] (M-contig.)  inp [K,N] (N-contig.)
//
// The overrides A_K_CONTIGUOUS / B_K_CONTIGUOUS pick the tile loads, so no transpose is ever
// materialised. This file is appended to matmul.vec4.wgsl or matmul.scalar.wgsl, which declare
// the bindings and define loadA4 / loadB4 / updateOut4 (vec4 loads when every row length is a
// multiple of 4, guarded scalar loads otherwise).
//
// Tiling: a workgroup of WG_X × WG_Y invocations computes a TILE_M × TILE_N block of the result
// (TILE_M = 8·WG_Y rows, TILE_N = 4·WG_X columns; 128 × 64 by default). Each invocation holds an
// 8 × 4 micro-tile in registers: rows 8·ly … 8·ly+7, columns 4·lx … 4·lx+3. The K loop stages
// TILE_K-deep slices of A and B in workgroup memory, both stored k-major ([k][m] and [k][n]) so
// the inner loop reads two vec4 of A and one vec4 of B for 32 FMAs.

override WG_X: u32 = 16;             // invocations along N; TILE_N = 4·WG_X; ≥ 8 (see dbias)
override WG_Y: u32 = 16;             // invocations along M; TILE_M = 8·WG_Y
override TILE_K: u32 = 16;           // K depth of one staged slice, a multiple of 4
override A_K_CONTIGUOUS: bool = true;
override B_K_CONTIGUOUS: bool = true;
// Round the staged operands to f16 (products still accumulate in f32): the numerics of the
// subgroup-matrix kernel with f16 operands, on any adapter (roundF16: matmul.round-f16.wgsl).
override ROUND_F16: bool = false;
// With ROUND_F16, A is staged as roundF16(a·A_SCALE)/A_SCALE: f16's range moved by a power of two
// (exact in f32). The backward products' A is dout, mostly below f16's normal range (6.1e-5)
// where its subnormals keep a few bits or none: mixed precision's loss scale.
override A_SCALE: f32 = 1.0;
// Derived (never set from the host): tile sizes and the vec4 per k row of each staged tile,
// padded by one vec4 so the transposing tile stores spread over banks.
override TILE_M: u32 = WG_Y * 8u;
override TILE_N: u32 = WG_X * 4u;
override A_STRIDE: u32 = WG_Y * 2u + 1u;
override B_STRIDE: u32 = WG_X + 1u;

const ACCUMULATE: u32 = 1u;          // result += instead of =
const ADD_BIAS: u32 = 2u;            // result[m,n] += bias[n] (forward)
const REDUCE_BIAS: u32 = 4u;         // bias[m] (+)= Σ_k A[k,m] (backward weight: dbias)

struct Params {
  M: u32,
  N: u32,
  K: u32,
  colTiles: u32,        // ⌈N / TILE_N⌉; workgroup x = split·colTiles + column tile
  kPerSplit: u32,       // K range of one split, a multiple of TILE_K (K itself without split)
  outSplitStride: u32,  // elements between the partial results of two splits (0 without split)
  biasSplitStride: u32, // the same for the bias partials
  flags: u32,
}

@group(0) @binding(3) var<storage, read_write> biasVector: array<f32>; // [N] bias, or [splits][M] dbias
@group(0) @binding(4) var<uniform> params: Params;

// Staged slices, k-major, in vec4: TILE_K·(TILE_M/4 + 1) of A and TILE_K·(TILE_N/4 + 1) of B
// (8.25 + 4.25 KiB at the defaults).
var<workgroup> tileA: array<vec4f, TILE_K * A_STRIDE>;
var<workgroup> tileB: array<vec4f, TILE_K * B_STRIDE>;

fn operand(v: vec4f) -> vec4f {
  if (ROUND_F16) {
    return vec4f(roundF16(v.x), roundF16(v.y), roundF16(v.z), roundF16(v.w));
  }
  return v;
}

fn operandA(v: vec4f) -> vec4f {
  if (ROUND_F16) {
    return operand(v * A_SCALE) / A_SCALE;
  }
  return v;
}

// Stages A[m0 … m0+TILE_M, k0 … k0+TILE_K] into tileA as [k][m]; zero outside the matrix.
fn stageA(lid: u32, m0: u32, k0: u32) {
  let stride = A_STRIDE;
  let rowVecs = TILE_M / 4u;
  if (A_K_CONTIGUOUS) {
    // A is [M,K]: read a 4×4 block (4 rows, 4 consecutive k) and transpose it in registers, so
    // every workgroup store is a whole vec4. Neighbouring invocations take neighbouring k.
    let kVecs = TILE_K / 4u;
    for (var i = lid; i < rowVecs * kVecs; i += WG_X * WG_Y) {
      let m = (i / kVecs) * 4u;
      let k = (i % kVecs) * 4u;
      let r0 = loadA4(m0 + m, k0 + k);
      let r1 = loadA4(m0 + m + 1u, k0 + k);
      let r2 = loadA4(m0 + m + 2u, k0 + k);
      let r3 = loadA4(m0 + m + 3u, k0 + k);
      let base = k * stride + m / 4u;
      tileA[base] = operandA(vec4f(r0.x, r1.x, r2.x, r3.x));
      tileA[base + stride] = operandA(vec4f(r0.y, r1.y, r2.y, r3.y));
      tileA[base + 2u * stride] = operandA(vec4f(r0.z, r1.z, r2.z, r3.z));
      tileA[base + 3u * stride] = operandA(vec4f(r0.w, r1.w, r2.w, r3.w));
    }
  } else {
    // A is [K,M]: rows of the tile are rows of memory; one vec4 per invocation and step.
    for (var i = lid; i < rowVecs * TILE_K; i += WG_X * WG_Y) {
      let k = i / rowVecs;
      let m = (i % rowVecs) * 4u;
      tileA[k * stride + m / 4u] = operandA(loadA4(k0 + k, m0 + m));
    }
  }
}

// Stages B[n0 … n0+TILE_N, k0 … k0+TILE_K] into tileB as [k][n]; zero outside the matrix.
fn stageB(lid: u32, n0: u32, k0: u32) {
  let stride = B_STRIDE;
  let colVecs = TILE_N / 4u;
  if (B_K_CONTIGUOUS) {
    let kVecs = TILE_K / 4u;
    for (var i = lid; i < colVecs * kVecs; i += WG_X * WG_Y) {
      let n = (i / kVecs) * 4u;
      let k = (i % kVecs) * 4u;
      let r0 = loadB4(n0 + n, k0 + k);
      let r1 = loadB4(n0 + n + 1u, k0 + k);
      let r2 = loadB4(n0 + n + 2u, k0 + k);
      let r3 = loadB4(n0 + n + 3u, k0 + k);
      let base = k * stride + n / 4u;
      tileB[base] = operand(vec4f(r0.x, r1.x, r2.x, r3.x));
      tileB[base + stride] = operand(vec4f(r0.y, r1.y, r2.y, r3.y));
      tileB[base + 2u * stride] = operand(vec4f(r0.z, r1.z, r2.z, r3.z));
      tileB[base + 3u * stride] = operand(vec4f(r0.w, r1.w, r2.w, r3.w));
    }
  } else {
    for (var i = lid; i < colVecs * TILE_K; i += WG_X * WG_Y) {
      let k = i / colVecs;
      let n = (i % colVecs) * 4u;
      tileB[k * stride + n / 4u] = operand(loadB4(k0 + k, n0 + n));
    }
  }
}

@compute @workgroup_size(WG_X, WG_Y)
fn main(
  @builtin(workgroup_id) group: vec3u,
  @builtin(num_workgroups) groups: vec3u,
  @builtin(local_invocation_id) local: vec3u,
  @builtin(local_invocation_index) lid: u32,
) {
  // Grid: x = split·colTiles + column tile; row tiles over y, folded into z past 65535.
  let split = group.x / params.colTiles;
  let m0 = (group.y + group.z * groups.y) * TILE_M;
  let n0 = (group.x % params.colTiles) * TILE_N;
  if (m0 >= params.M) {
    return; // a fold's spare workgroups (uniform: depends on the workgroup id only)
  }
  let kBegin = split * params.kPerSplit;
  let kEnd = min(params.K, kBegin + params.kPerSplit);
  // The first column of tiles also reduces dbias over the A tiles it stages anyway, one tile
  // row per invocation (WG_X ≥ 8, so WG_X·WG_Y ≥ TILE_M).
  let reduceBias = (params.flags & REDUCE_BIAS) != 0u && n0 == 0u;

  var acc: array<vec4f, 8>;
  var biasSum = 0.0;
  for (var k0 = kBegin; k0 < kEnd; k0 += TILE_K) {
    stageA(lid, m0, k0);
    stageB(lid, n0, k0);
    workgroupBarrier();
    if (reduceBias && lid < TILE_M) {
      // Fixed order (k ascending within a tile, tiles ascending): deterministic, no atomics.
      for (var k = 0u; k < TILE_K; k++) {
        biasSum += tileA[k * A_STRIDE + lid / 4u][lid % 4u];
      }
    }
    for (var k = 0u; k < TILE_K; k++) {
      let b = tileB[k * B_STRIDE + local.x];
      let a0 = tileA[k * A_STRIDE + local.y * 2u];
      let a1 = tileA[k * A_STRIDE + local.y * 2u + 1u];
      acc[0] += a0.x * b;
      acc[1] += a0.y * b;
      acc[2] += a0.z * b;
      acc[3] += a0.w * b;
      acc[4] += a1.x * b;
      acc[5] += a1.y * b;
      acc[6] += a1.z * b;
      acc[7] += a1.w * b;
    }
    workgroupBarrier();
  }

  let accumulate = (params.flags & ACCUMULATE) != 0u;
  let col = n0 + local.x * 4u;
  var bias = vec4f(0.0);
  if ((params.flags & ADD_BIAS) != 0u) {
    for (var c = 0u; c < 4u; c++) {
      if (col + c < params.N) {
        bias[c] = biasVector[col + c];
      }
    }
  }
  let outBase = split * params.outSplitStride;
  // Spelled out rather than looped, so `acc` is only ever indexed by constants (registers).
  let row = m0 + local.y * 8u;
  updateOut4(outBase, row, col, acc[0] + bias, accumulate);
  updateOut4(outBase, row + 1u, col, acc[1] + bias, accumulate);
  updateOut4(outBase, row + 2u, col, acc[2] + bias, accumulate);
  updateOut4(outBase, row + 3u, col, acc[3] + bias, accumulate);
  updateOut4(outBase, row + 4u, col, acc[4] + bias, accumulate);
  updateOut4(outBase, row + 5u, col, acc[5] + bias, accumulate);
  updateOut4(outBase, row + 6u, col, acc[6] + bias, accumulate);
  updateOut4(outBase, row + 7u, col, acc[7] + bias, accumulate);
  if (reduceBias && lid < TILE_M && m0 + lid < params.M) {
    let index = split * params.biasSplitStride + m0 + lid;
    biasVector[index] = select(0.0, biasVector[index], accumulate) + biasSum;
  }
}
