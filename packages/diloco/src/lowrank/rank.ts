/**
 * Adaptive rank and the wire size of the low-rank factors (docs/lowrank.md).
 *
 * rankFor: the smallest rank on a ladder whose relative reconstruction error ‖Δ − Δ̂_r‖/‖Δ‖ on
 * this worker's own (error-fed) Δ is at most a target, where Δ̂_r = P·Pᵀ·Δ and P is found by a
 * few steps of subspace iteration from a seeded basis (a randomized estimate of the best rank-r
 * approximation, never better than the truncated SVD). The rank must be agreed by the room (the
 * coordinator would put it in the round-open): this is one worker's proposal, not a decision.
 */
import { createFp4Codec, createInt8Codec, DEFAULT_BLOCK_SIZE } from '../codecs/blockwise.ts';
import { mixSeed, orthonormalize, seededOrthonormal } from './orthonormal.ts';
import { project } from './project.ts';

/** Ranks a room chooses from: powers of two keep factor sizes predictable. */
export const RANK_LADDER: readonly number[] = [1, 2, 4, 8, 16, 32];

export interface RankChoice {
  /** The smallest rung meeting the target, or the largest usable rung when none does. */
  rank: number;
  /** ‖Δ − Δ̂‖/‖Δ‖ measured at that rank (0 for an all-zero Δ). */
  relativeError: number;
  /** Whether `relativeError` ≤ the target. */
  met: boolean;
}

export interface RankOptions {
  ladder?: readonly number[];
  /** Subspace-iteration steps per rung. Default 3: enough where the spectrum has gaps. */
  iterations?: number;
  seed?: number;
}

/**
 * ‖Δ − P·Pᵀ·Δ‖/‖Δ‖ for the rank-r basis P (n×r) found by `iterations` steps of subspace
 * iteration on Δ (n×k, row-major) from a basis seeded by `seed`.
 */
export function lowRankRelativeError(
  delta: Float32Array,
  n: number,
  k: number,
  rank: number,
  iterations = 3,
  seed = 0,
): number {
  let total = 0;
  for (let i = 0; i < delta.length; i++) total += (delta[i] as number) * (delta[i] as number);
  if (total === 0) return 0;
  let q = seededOrthonormal(k, rank, seed);
  let p = orthonormalize(project(delta, n, k, q, 'right'), n, rank, mixSeed(seed, 0));
  for (let step = 1; step < iterations; step++) {
    q = orthonormalize(project(delta, n, k, p, 'left'), k, rank, mixSeed(seed, step, 1));
    p = orthonormalize(project(delta, n, k, q, 'right'), n, rank, mixSeed(seed, step, 2));
  }
  // Δ − P·(PᵀΔ) entry by entry in f64: the shortcut ‖Δ‖² − ‖PᵀΔ‖² cancels down to noise once
  // the error is below ~1e-3 (PᵀΔ is rounded to f32).
  const kept = project(delta, n, k, p, 'left'); // PᵀΔ as a k×r factor
  let missed = 0;
  for (let i = 0; i < n; i++) {
    for (let j = 0; j < k; j++) {
      let approx = 0;
      for (let c = 0; c < rank; c++) approx += (p[c * n + i] as number) * (kept[c * k + j] as number);
      const diff = (delta[i * k + j] as number) - approx;
      missed += diff * diff;
    }
  }
  return Math.sqrt(missed / total);
}

/**
 * The smallest rank on the ladder (rungs above min(n, k) are skipped) whose relative
 * reconstruction error on Δ is at most `relativeErrorTarget`.
 */
export function rankFor(
  delta: Float32Array,
  n: number,
  k: number,
  relativeErrorTarget: number,
  options: RankOptions = {},
): RankChoice {
  const ladder = (options.ladder ?? RANK_LADDER).filter((r) => r <= Math.min(n, k));
  if (ladder.length === 0) throw new RangeError(`rankFor: no rung of the ladder fits a ${n}×${k} tensor`);
  if (!(relativeErrorTarget >= 0)) throw new RangeError(`rankFor: target must be ≥ 0, got ${relativeErrorTarget}`);
  let choice: RankChoice | undefined;
  for (const rank of ladder) {
    const relativeError = lowRankRelativeError(delta, n, k, rank, options.iterations ?? 3, options.seed ?? 0);
    choice = { rank, relativeError, met: relativeError <= relativeErrorTarget };
    if (choice.met) break;
  }
  return choice as RankChoice;
}

/**
 * Bytes of one worker's factor for an n×k tensor at rank r: n·r values in a right round, k·r in
 * a left one, at 32 (fp32), 16 (bf16), 8 (int8 with block scales) or 4 (fp4 with block scales)
 * bits per value. The blockwise sizes are the codecs' own encodedSize.
 */
export function lowRankBytes(
  n: number,
  k: number,
  r: number,
  bitsPerValue: 32 | 16 | 8 | 4,
  side: 'right' | 'left',
  blockSize = DEFAULT_BLOCK_SIZE,
): number {
  const count = (side === 'right' ? n : k) * r;
  switch (bitsPerValue) {
    case 32:
      return 4 * count;
    case 16:
      return 2 * count;
    case 8:
      return createInt8Codec(blockSize).encodedSize(count);
    case 4:
      return createFp4Codec(blockSize).encodedSize(count);
  }
}
