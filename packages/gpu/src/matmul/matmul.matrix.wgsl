// Subgroup-matrix matmul core (tensor cores where WebGPU exposes them): the same products,
// layouts, parameters and bindings as matmul.wgsl (see the table there). Appended to the global
// access (matmul.vec4.wgsl or matmul.scalar.wgsl) after a prelude that matrix.ts writes for one
// subgroup-matrix configuration. The prelude declares:
//
//   SM_M, SM_N, SM_K          the configuration's matrix shape (left M×K, right K×N, result M×N)
//   SUB_TM, SUB_TN            result matrices per subgroup along M and N
//   SG_X, SG_Y                subgroups per workgroup along N and M
//   TILE_M, TILE_N, TILE_K    the workgroup's block (SG_Y·SUB_TM·SM_M × SG_X·SUB_TN·SM_N) and K slice
//   WG_SIZE                   invocations: a multiple of the adapter's largest subgroup
//   T, toT                    the staged type (f32, or f16 with shader-f16) and the conversion
//   Left, Right, Result       the matrix types; loadLeft, loadRight, mma, storeResult on them
//
// With the real feature the types are subgroup_matrix_left/right/result and the functions the
// subgroupMatrix* builtins. The emulated prelude (for tests on adapters without the feature)
// gives every invocation a private copy of each whole matrix, so this file, its tiling, staging,
// edges, bias and split-K run and are tested on any adapter.
//
// Tiling: the workgroup stages A[m0 … +TILE_M, k … +TILE_K] as [m][k] and B as [k][n] in
// workgroup memory (converted to T, zero past the matrix edges, so any shape works), and each
// of the SG_X·SG_Y planned subgroups multiplies its SUB_TM × SUB_TN result matrices with
// f32 accumulation. Subgroups past the planned ones (an adapter running subgroups smaller than
// its maximum) only help staging. The results leave through a per-subgroup scratch matrix in
// workgroup memory, which adds the bias, accumulates and checks the edges like the other cores.

override A_K_CONTIGUOUS: bool = true;
override B_K_CONTIGUOUS: bool = true;
// A is staged as toT(a·A_SCALE) and its products and sums divided by A_SCALE, a power of two:
// the backward products' loss scale (F16_GRADIENT_SCALE in matmul.ts; 1 for f32 operands).
override A_SCALE: f32 = 1.0;

const ACCUMULATE: u32 = 1u;          // result += instead of =
const ADD_BIAS: u32 = 2u;            // result[m,n] += bias[n] (forward)
const REDUCE_BIAS: u32 = 4u;         // bias[m] (+)= Σ_k A[k,m] (backward weight: dbias)
const SUB_M: u32 = SUB_TM * SM_M;    // rows of one subgroup's block
const SUB_N: u32 = SUB_TN * SM_N;    // columns of one subgroup's block
const PLANNED: u32 = SG_X * SG_Y;    // subgroups that own a block
const RESULT_SIZE: u32 = SM_M * SM_N;

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

var<workgroup> tileA: array<T, TILE_M * TILE_K>;          // [m][k]
var<workgroup> tileB: array<T, TILE_K * TILE_N>;          // [k][n]
var<workgroup> scratch: array<f32, PLANNED * RESULT_SIZE>; // one result matrix per subgroup

// Stages A[m0 … m0+TILE_M, k0 … k0+TILE_K] into tileA as [m][k]; zero outside the matrix.
fn stageA(lid: u32, m0: u32, k0: u32) {
  if (A_K_CONTIGUOUS) {
    // A is [M,K]: four consecutive k per load, stored as they are.
    let kVecs = TILE_K / 4u;
    for (var i = lid; i < TILE_M * kVecs; i += WG_SIZE) {
      let m = i / kVecs;
      let k = (i % kVecs) * 4u;
      let v = loadA4(m0 + m, k0 + k);
      let at = m * TILE_K + k;
      tileA[at] = toT(A_SCALE * v.x);
      tileA[at + 1u] = toT(A_SCALE * v.y);
      tileA[at + 2u] = toT(A_SCALE * v.z);
      tileA[at + 3u] = toT(A_SCALE * v.w);
    }
  } else {
    // A is [K,M]: four consecutive m per load, transposed into four rows of the tile.
    let mVecs = TILE_M / 4u;
    for (var i = lid; i < TILE_K * mVecs; i += WG_SIZE) {
      let k = i / mVecs;
      let m = (i % mVecs) * 4u;
      let v = loadA4(k0 + k, m0 + m);
      let at = m * TILE_K + k;
      tileA[at] = toT(A_SCALE * v.x);
      tileA[at + TILE_K] = toT(A_SCALE * v.y);
      tileA[at + 2u * TILE_K] = toT(A_SCALE * v.z);
      tileA[at + 3u * TILE_K] = toT(A_SCALE * v.w);
    }
  }
}

// Stages B[n0 … n0+TILE_N, k0 … k0+TILE_K] into tileB as [k][n]; zero outside the matrix.
fn stageB(lid: u32, n0: u32, k0: u32) {
  if (B_K_CONTIGUOUS) {
    // B is [N,K]: four consecutive k per load, transposed into four rows of the tile.
    let kVecs = TILE_K / 4u;
    for (var i = lid; i < TILE_N * kVecs; i += WG_SIZE) {
      let n = i / kVecs;
      let k = (i % kVecs) * 4u;
      let v = loadB4(n0 + n, k0 + k);
      let at = k * TILE_N + n;
      tileB[at] = toT(v.x);
      tileB[at + TILE_N] = toT(v.y);
      tileB[at + 2u * TILE_N] = toT(v.z);
      tileB[at + 3u * TILE_N] = toT(v.w);
    }
  } else {
    // B is [K,N]: rows of the tile are rows of memory.
    let nVecs = TILE_N / 4u;
    for (var i = lid; i < TILE_K * nVecs; i += WG_SIZE) {
      let k = i / nVecs;
      let n = (i % nVecs) * 4u;
      let v = loadB4(k0 + k, n0 + n);
      let at = k * TILE_N + n;
      tileB[at] = toT(v.x);
      tileB[at + 1u] = toT(v.y);
      tileB[at + 2u] = toT(v.z);
      tileB[at + 3u] = toT(v.w);
    }
  }
}

@compute @workgroup_size(WG_SIZE)
fn main(
  @builtin(workgroup_id) group: vec3u,
  @builtin(num_workgroups) groups: vec3u,
  @builtin(local_invocation_index) lid: u32,
  /*SUBGROUP_SIZE_PARAM*/
) {
  /*SUBGROUP_SIZE_LET*/
  // Grid: x = split·colTiles + column tile; row tiles over y, folded into z past 65535.
  let split = group.x / params.colTiles;
  let m0 = (group.y + group.z * groups.y) * TILE_M;
  let n0 = (group.x % params.colTiles) * TILE_N;
  if (m0 >= params.M) {
    return; // a fold's spare workgroups (uniform: depends on the workgroup id only)
  }
  let kBegin = split * params.kPerSplit;
  let kEnd = min(params.K, kBegin + params.kPerSplit);
  // The first column of tiles also reduces dbias over the staged A, one tile row per invocation
  // (WG_SIZE ≥ TILE_M), from the staged values (in T).
  let reduceBias = (params.flags & REDUCE_BIAS) != 0u && n0 == 0u;

  // Subgroups are consecutive local invocation indices (the start-up gate refuses the kernel
  // where that does not hold). Only the planned subgroups own a block.
  let sg = lid / sgSize;
  let lane = lid % sgSize;
  let owner = sg < PLANNED;
  let subM = (min(sg, PLANNED - 1u) / SG_X) * SUB_M;
  let subN = (min(sg, PLANNED - 1u) % SG_X) * SUB_N;

  var acc: array<Result, SUB_TM * SUB_TN>;
  for (var t = 0u; t < SUB_TM * SUB_TN; t++) {
    acc[t] = Result();
  }
  var biasSum = 0.0;
  for (var k0 = kBegin; k0 < kEnd; k0 += TILE_K) {
    stageA(lid, m0, k0);
    stageB(lid, n0, k0);
    workgroupBarrier();
    if (reduceBias && lid < TILE_M) {
      // Fixed order (k ascending within a slice, slices ascending): deterministic, no atomics.
      for (var k = 0u; k < TILE_K; k++) {
        biasSum += f32(tileA[lid * TILE_K + k]);
      }
    }
    if (owner) {
      for (var kk = 0u; kk < TILE_K; kk += SM_K) {
        var right: array<Right, SUB_TN>;
        for (var j = 0u; j < SUB_TN; j++) {
          right[j] = loadRight(kk * TILE_N + subN + j * SM_N);
        }
        for (var i = 0u; i < SUB_TM; i++) {
          let left = loadLeft((subM + i * SM_M) * TILE_K + kk);
          for (var j = 0u; j < SUB_TN; j++) {
            acc[i * SUB_TN + j] = mma(left, right[j], acc[i * SUB_TN + j]);
          }
        }
      }
    }
    workgroupBarrier();
  }

  let accumulate = (params.flags & ACCUMULATE) != 0u;
  let addBias = (params.flags & ADD_BIAS) != 0u;
  let outBase = split * params.outSplitStride;
  let mine = sg * RESULT_SIZE;
  for (var t = 0u; t < SUB_TM * SUB_TN; t++) {
    if (owner) {
      storeResult(mine, lane, acc[t]);
    }
    workgroupBarrier();
    if (owner) {
      let row0 = m0 + subM + (t / SUB_TN) * SM_M;
      let col0 = n0 + subN + (t % SUB_TN) * SM_N;
      for (var e = lane; e < RESULT_SIZE / 4u; e += sgSize) {
        let r = e / (SM_N / 4u);
        let c = (e % (SM_N / 4u)) * 4u;
        let at = mine + r * SM_N + c;
        var value = vec4f(scratch[at], scratch[at + 1u], scratch[at + 2u], scratch[at + 3u]) / A_SCALE;
        if (addBias) {
          for (var j = 0u; j < 4u; j++) {
            if (col0 + c + j < params.N) {
              value[j] += biasVector[col0 + c + j];
            }
          }
        }
        updateOut4(outBase, row0 + r, col0 + c, value, accumulate);
      }
    }
    workgroupBarrier();
  }
  if (reduceBias && lid < TILE_M && m0 + lid < params.M) {
    let index = split * params.biasSplitStride + m0 + lid;
    biasVector[index] = select(0.0, biasVector[index], accumulate) + biasSum / A_SCALE;
  }
}
