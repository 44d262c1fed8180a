// Register-tiled matmul core: the same products, layouts, parameters and bindings as matmul.wgsl
// (see the table there), with more work per invocation. Appended to matmul.vec4.wgsl or
// matmul.scalar.wgsl (global access) and then to one of the slice multipliers:
// matmul.register.shared.wgsl (every invocation reads its A fragment from workgroup memory) or
// matmul.register.subgroup.wgsl (four lanes of a subgroup share one read through quadBroadcast).
//
// Tiling: a workgroup of WG_X × WG_Y invocations computes a TILE_M × TILE_N block
// (TILE_M = 8·WG_Y, TILE_N = 8·WG_X; 64 × 64 at 8 × 8). Each invocation holds an 8 × 8
// micro-tile in 16 vec4 registers: rows 4·ly … 4·ly+3 and TILE_M/2 + 4·ly … +3, columns 4·lx … +3
// and TILE_N/2 + 4·lx … +3. Splitting the micro-tile into two halves makes neighbouring lanes
// read neighbouring vec4 of the staged tiles (no bank conflicts) and write neighbouring vec4 of
// the result (coalesced). Per k the inner loop reads 2 vec4 of A and 2 of B for 64 FMAs, twice
// the FMAs per workgroup-memory read of matmul.wgsl's 8 × 4 micro-tile.
//
// The staged slices are double-buffered: while the workgroup multiplies slice i from one half of
// tileA / tileB it already loads slice i+1 into the other half, so global loads overlap the FMAs
// and each slice costs one barrier instead of two.

override WG_X: u32 = 8;              // invocations along N; TILE_N = 8·WG_X; ≥ 8 (see dbias)
override WG_Y: u32 = 8;              // invocations along M; TILE_M = 8·WG_Y
override TILE_K: u32 = 16;           // K depth of one staged slice, a multiple of 4
override A_K_CONTIGUOUS: bool = true;
override B_K_CONTIGUOUS: bool = true;
// Derived (never set from the host): tile sizes, vec4 per k row of a staged slice (padded by one
// vec4 so the transposing stores spread over banks) and the size of one buffer half.
override TILE_M: u32 = WG_Y * 8u;
override TILE_N: u32 = WG_X * 8u;
override A_STRIDE: u32 = WG_Y * 2u + 1u;
override B_STRIDE: u32 = WG_X * 2u + 1u;
override A_SLICE: u32 = TILE_K * A_STRIDE;
override B_SLICE: u32 = TILE_K * B_STRIDE;

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

// Two staged slices each, k-major, in vec4: 2·TILE_K·(TILE_M/4 + 1) of A, 2·TILE_K·(TILE_N/4 + 1)
// of B (2 × 4.25 KiB each at 8 × 8 invocations and TILE_K 16).
var<workgroup> tileA: array<vec4f, 2u * A_SLICE>;
var<workgroup> tileB: array<vec4f, 2u * B_SLICE>;
// The micro-tile: acc[2·r + h] holds row slot r (0…7) and column half h. Indexed by constants only.
var<private> acc: array<vec4f, 16>;

// Stages A[m0 … m0+TILE_M, k0 … k0+TILE_K] into tileA[base …] as [k][m]; zero outside the matrix.
fn stageA(lid: u32, base: u32, m0: u32, k0: u32) {
  let rowVecs = TILE_M / 4u;
  if (A_K_CONTIGUOUS) {
    // A is [M,K]: read a 4×4 block (4 rows, 4 consecutive k), transpose it in registers.
    let kVecs = TILE_K / 4u;
    for (var i = lid; i < rowVecs * kVecs; i += WG_X * WG_Y) {
      let m = (i / kVecs) * 4u;
      let k = (i % kVecs) * 4u;
      let r0 = loadA4(m0 + m, k0 + k);
      let r1 = loadA4(m0 + m + 1u, k0 + k);
      let r2 = loadA4(m0 + m + 2u, k0 + k);
      let r3 = loadA4(m0 + m + 3u, k0 + k);
      let at = base + k * A_STRIDE + m / 4u;
      tileA[at] = vec4f(r0.x, r1.x, r2.x, r3.x);
      tileA[at + A_STRIDE] = vec4f(r0.y, r1.y, r2.y, r3.y);
      tileA[at + 2u * A_STRIDE] = vec4f(r0.z, r1.z, r2.z, r3.z);
      tileA[at + 3u * A_STRIDE] = vec4f(r0.w, r1.w, r2.w, r3.w);
    }
  } else {
    // A is [K,M]: rows of the slice are rows of memory.
    for (var i = lid; i < rowVecs * TILE_K; i += WG_X * WG_Y) {
      let k = i / rowVecs;
      let m = (i % rowVecs) * 4u;
      tileA[base + k * A_STRIDE + m / 4u] = loadA4(k0 + k, m0 + m);
    }
  }
}

// Stages B[n0 … n0+TILE_N, k0 … k0+TILE_K] into tileB[base …] as [k][n]; zero outside the matrix.
fn stageB(lid: u32, base: u32, n0: u32, k0: u32) {
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
      let at = base + k * B_STRIDE + n / 4u;
      tileB[at] = vec4f(r0.x, r1.x, r2.x, r3.x);
      tileB[at + B_STRIDE] = vec4f(r0.y, r1.y, r2.y, r3.y);
      tileB[at + 2u * B_STRIDE] = vec4f(r0.z, r1.z, r2.z, r3.z);
      tileB[at + 3u * B_STRIDE] = vec4f(r0.w, r1.w, r2.w, r3.w);
    }
  } else {
    for (var i = lid; i < colVecs * TILE_K; i += WG_X * WG_Y) {
      let k = i / colVecs;
      let n = (i % colVecs) * 4u;
      tileB[base + k * B_STRIDE + n / 4u] = loadB4(k0 + k, n0 + n);
    }
  }
}

// One k of the micro-tile: rows a0 (slots 0…3) and a1 (slots 4…7) times columns b0 and b1.
fn multiplyStep(a0: vec4f, a1: vec4f, b0: vec4f, b1: vec4f) {
  acc[0] += a0.x * b0;
  acc[1] += a0.x * b1;
  acc[2] += a0.y * b0;
  acc[3] += a0.y * b1;
  acc[4] += a0.z * b0;
  acc[5] += a0.z * b1;
  acc[6] += a0.w * b0;
  acc[7] += a0.w * b1;
  acc[8] += a1.x * b0;
  acc[9] += a1.x * b1;
  acc[10] += a1.y * b0;
  acc[11] += a1.y * b1;
  acc[12] += a1.z * b0;
  acc[13] += a1.z * b1;
  acc[14] += a1.w * b0;
  acc[15] += a1.w * b1;
}

// B's two column halves of this lane at row k of the staged slice at `base`.
fn fragmentB(base: u32, k: u32, lx: u32) -> array<vec4f, 2> {
  let at = base + k * B_STRIDE + lx;
  return array<vec4f, 2>(tileB[at], tileB[at + WG_X]);
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
  // The first column of tiles also reduces dbias over the A slices it stages anyway, one tile
  // row per invocation (WG_X ≥ 8, so WG_X·WG_Y ≥ TILE_M).
  let reduceBias = (params.flags & REDUCE_BIAS) != 0u && n0 == 0u;

  var biasSum = 0.0;
  var half = 0u;
  if (kBegin < kEnd) {
    stageA(lid, 0u, m0, kBegin);
    stageB(lid, 0u, n0, kBegin);
  }
  workgroupBarrier();
  for (var k0 = kBegin; k0 < kEnd; k0 += TILE_K) {
    // Load the next slice into the other half while this one is multiplied. The half being
    // written was last read before the previous barrier.
    if (k0 + TILE_K < kEnd) {
      stageA(lid, (1u - half) * A_SLICE, m0, k0 + TILE_K);
      stageB(lid, (1u - half) * B_SLICE, n0, k0 + TILE_K);
    }
    let aBase = half * A_SLICE;
    if (reduceBias && lid < TILE_M) {
      // Fixed order (k ascending within a slice, slices ascending): deterministic, no atomics.
      for (var k = 0u; k < TILE_K; k++) {
        biasSum += tileA[aBase + k * A_STRIDE + lid / 4u][lid % 4u];
      }
    }
    multiplySlice(aBase, half * B_SLICE, local.x, local.y, lid);
    workgroupBarrier();
    half = 1u - half;
  }

  let accumulate = (params.flags & ACCUMULATE) != 0u;
  let col0 = n0 + local.x * 4u;
  let col1 = col0 + TILE_N / 2u;
  var bias0 = vec4f(0.0);
  var bias1 = vec4f(0.0);
  if ((params.flags & ADD_BIAS) != 0u) {
    for (var c = 0u; c < 4u; c++) {
      if (col0 + c < params.N) {
        bias0[c] = biasVector[col0 + c];
      }
      if (col1 + c < params.N) {
        bias1[c] = biasVector[col1 + c];
      }
    }
  }
  let outBase = split * params.outSplitStride;
  let row0 = m0 + local.y * 4u;
  let row1 = row0 + TILE_M / 2u;
  updateOut4(outBase, row0 + 0u, col0, acc[0] + bias0, accumulate);
  updateOut4(outBase, row0 + 0u, col1, acc[1] + bias1, accumulate);
  updateOut4(outBase, row0 + 1u, col0, acc[2] + bias0, accumulate);
  updateOut4(outBase, row0 + 1u, col1, acc[3] + bias1, accumulate);
  updateOut4(outBase, row0 + 2u, col0, acc[4] + bias0, accumulate);
  updateOut4(outBase, row0 + 2u, col1, acc[5] + bias1, accumulate);
  updateOut4(outBase, row0 + 3u, col0, acc[6] + bias0, accumulate);
  updateOut4(outBase, row0 + 3u, col1, acc[7] + bias1, accumulate);
  updateOut4(outBase, row1 + 0u, col0, acc[8] + bias0, accumulate);
  updateOut4(outBase, row1 + 0u, col1, acc[9] + bias1, accumulate);
  updateOut4(outBase, row1 + 1u, col0, acc[10] + bias0, accumulate);
  updateOut4(outBase, row1 + 1u, col1, acc[11] + bias1, accumulate);
  updateOut4(outBase, row1 + 2u, col0, acc[12] + bias0, accumulate);
  updateOut4(outBase, row1 + 2u, col1, acc[13] + bias1, accumulate);
  updateOut4(outBase, row1 + 3u, col0, acc[14] + bias0, accumulate);
  updateOut4(outBase, row1 + 3u, col1, acc[15] + bias1, accumulate);
  if (reduceBias && lid < TILE_M && m0 + lid < params.M) {
    let index = split * params.biasSplitStride + m0 + lid;
    biasVector[index] = select(0.0, biasVector[index], accumulate) + biasSum;
  }
}
