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
