/**
 * Tile shapes for the attention kernels, chosen per head size so that every kernel fits in
 * 256 invocations and 16 KiB of workgroup memory (SwiftShader's limits, and WebGPU's defaults),
 * for hs up to 128 (and somewhat beyond).
 */

/** Per-lane accumulators are private arrays of this many vec4s (attention.common.wgsl): 8 channels. */
export const MAX_VECS_PER_LANE = 2;

export interface AttentionTiling {
  headSize: number;
  /** Invocations per owned row. */
  lanes: number;
  /** Owned rows per workgroup. */
  rows: number;
  /** Streamed rows per step; divides `lanes`. */
  tile: number;
  /** lanes / tile: invocations that share one dot product. */
  parts: number;
  /** ⌈hs / 4⌉: rows are stored as vec4s, zero-padded. */
  headVecs: number;
  vecsPerLane: number;
  workgroupSize: number;
  /** Workgroup memory used, in floats. */
  workgroupFloats: number;
}

/** What a kernel keeps in workgroup memory, in units the chooser scales by rows and tile. */
export interface WorkgroupArrays {
  /** [rows, ⌈hs/4⌉] vec4 arrays: the owned rows (queries, dout, keys, values). */
  rowArrays: number;
  /** [tile, ⌈hs/4⌉ + 1] vec4 arrays: the streamed rows. */
  tileArrays: number;
  /** [workgroupSize] arrays: partial dot products. */
  partialArrays: number;
  /** [tile] arrays: per-streamed-row scalars (lse, delta). */
  scalarArrays: number;
}

export const FORWARD_ARRAYS: WorkgroupArrays = { rowArrays: 1, tileArrays: 2, partialArrays: 1, scalarArrays: 0 };
export const BACKWARD_QUERY_ARRAYS: WorkgroupArrays = {
  rowArrays: 2,
  tileArrays: 2,
  partialArrays: 2,
  scalarArrays: 0,
};
export const BACKWARD_KEY_ARRAYS: WorkgroupArrays = { rowArrays: 2, tileArrays: 2, partialArrays: 2, scalarArrays: 2 };

/**
 * The tiling with the most owned × streamed rows per step (work between barriers), fewest lanes
 * per row on a tie, that fits `budgetFloats` and keeps ≤ MAX_VECS_PER_LANE vec4s per lane.
 */
export function chooseTiling(
  headSize: number,
  arrays: WorkgroupArrays,
  budgetFloats = 4096,
  workgroupSize = 256,
): AttentionTiling {
  if (!Number.isInteger(headSize) || headSize < 1)
    throw new RangeError(`attention: head size ${headSize} must be a positive integer`);
  const headVecs = Math.ceil(headSize / 4);
  let best: AttentionTiling | null = null;
  for (let lanes = 16; lanes <= workgroupSize; lanes *= 2) {
    const vecsPerLane = Math.ceil(headVecs / lanes);
    if (vecsPerLane > MAX_VECS_PER_LANE) continue;
    const rows = workgroupSize / lanes;
    for (let tile = lanes; tile >= 1; tile /= 2) {
      const workgroupFloats =
        arrays.rowArrays * rows * headVecs * 4 +
        arrays.tileArrays * tile * (headVecs + 1) * 4 +
        arrays.partialArrays * workgroupSize +
        arrays.scalarArrays * tile;
      if (workgroupFloats > budgetFloats) continue;
      if (!best || rows * tile > best.rows * best.tile) {
        best = {
          headSize,
          lanes,
          rows,
          tile,
          parts: lanes / tile,
          headVecs,
          vecsPerLane,
          workgroupSize,
          workgroupFloats,
        };
      }
      break;
    }
  }
  if (!best) {
    throw new RangeError(
      `attention: no tiling for head size ${headSize} within ${budgetFloats * 4} bytes of workgroup memory`,
    );
  }
  return best;
}

/** The WGSL overrides for a tiling (attention.common.wgsl). */
export function tilingConstants(tiling: AttentionTiling): Record<string, number> {
  const { headSize, headVecs, lanes, rows, tile, parts, vecsPerLane, workgroupSize } = tiling;
  return {
    HEAD_SIZE: headSize,
    HEAD_VECS: headVecs,
    LANES: lanes,
    ROWS: rows,
    TILE: tile,
    PARTS: parts,
    VECS_PER_LANE: vecsPerLane,
    TILE_STRIDE: headVecs + 1,
    ROW_VECS: rows * headVecs,
    TILE_VECS: tile * (headVecs + 1),
    WORKGROUP_SIZE: workgroupSize,
  };
}

/**
 * Head sizes the register-tiled kernels take: their private tiles hold 3 channel vec4s a lane.
 * Within 32 KiB of workgroup memory the dK/dV kernel fits up to hs 92.
 */
export const REGISTER_MAX_HEAD_SIZE = 96;
/** Owned rows per workgroup of the register-tiled kernels (attention.register.common.wgsl). */
export const REGISTER_OWNED = 32;
const REGISTER_GRID = 8;
const REGISTER_MAX_PER_LANE = 4;

export type RegisterKernel = 'forward' | 'backwardQuery' | 'backwardKey';

export interface RegisterTiling {
  headSize: number;
  /** ⌈hs / 4⌉. */
  headVecs: number;
  /** Streamed rows per invocation in the score tile: 4, 2 or 1. */
  perLane: number;
  /** 8 · perLane streamed rows per step. */
  stream: number;
  /** ⌈headVecs / 8⌉ channel vec4s per invocation. */
  channelVecs: number;
  /** Workgroup memory used, in floats. */
  workgroupFloats: number;
}

/**
 * Workgroup floats of a register-tiled kernel: owned rows [32, hs] (one array in the forward,
 * two in the backward), two streamed arrays [stream, hs + 4] (padded), score tiles [32, stream]
 * (one, or two for P and dS in the dK/dV kernel) and per-row scalars; the forward's reductions
 * without subgroups take [64] vec4s more (counted either way).
 */
function registerFloats(kernel: RegisterKernel, headVecs: number, stream: number): number {
  const owned = REGISTER_OWNED * headVecs * 4;
  const streamed = 2 * stream * (headVecs + 1) * 4;
  const scores = REGISTER_OWNED * stream;
  switch (kernel) {
    case 'forward':
      return owned + streamed + scores + 4 * 64;
    case 'backwardQuery':
      return 2 * owned + streamed + scores + 2 * REGISTER_OWNED;
    case 'backwardKey':
      return 2 * owned + streamed + 2 * scores + 2 * stream;
  }
}

/**
 * The widest stream step (most streamed rows per invocation: more FMAs per workgroup load and
 * fewer barriers) that fits `budgetFloats`; null when the head size is too large or even one
 * streamed row per invocation does not fit (then the `tiled` kernels serve).
 */
export function chooseRegisterTiling(
  headSize: number,
  kernel: RegisterKernel,
  budgetFloats: number,
): RegisterTiling | null {
  if (!Number.isInteger(headSize) || headSize < 1 || headSize > REGISTER_MAX_HEAD_SIZE) return null;
  const headVecs = Math.ceil(headSize / 4);
  for (let perLane = REGISTER_MAX_PER_LANE; perLane >= 1; perLane /= 2) {
    const stream = REGISTER_GRID * perLane;
    const workgroupFloats = registerFloats(kernel, headVecs, stream);
    if (workgroupFloats <= budgetFloats) {
      return {
        headSize,
        headVecs,
        perLane,
        stream,
        channelVecs: Math.ceil(headVecs / REGISTER_GRID),
        workgroupFloats,
      };
    }
  }
  return null;
}

/** The WGSL overrides for a register tiling (attention.register.common.wgsl). */
export function registerConstants(tiling: RegisterTiling): Record<string, number> {
  const { headSize, headVecs, perLane, stream, channelVecs } = tiling;
  return {
    HEAD_SIZE: headSize,
    HEAD_VECS: headVecs,
    PER_LANE: perLane,
    STREAM: stream,
    CHANNEL_VECS: channelVecs,
    STRIDE: headVecs + 1,
    OWNED_VECS: REGISTER_OWNED * headVecs,
    STREAM_VECS: stream * (headVecs + 1),
    SCORE_VECS: (REGISTER_OWNED * stream) / 4,
  };
}
