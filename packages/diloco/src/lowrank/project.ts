/**
 * The low-rank exchange of one 2-D tensor Δ (n×k, row-major, as the parameters are stored),
 * alternating sides across rounds so that one average per round suffices (docs/lowrank.md):
 *
 *   right round: every replica holds Q (k×r); a worker sends P_m = Δ_m·Q (n×r); the room
 *                averages them to P̄ = (mean Δ)·Q; Δ̂ = P̄·Qᵀ; the next basis is P̂ = orth(P̄).
 *   left round:  every replica holds P̂ (n×r); a worker sends Q_m = Δ_mᵀ·P̂ (k×r); Q̄ = (mean Δ)ᵀ·P̂;
 *                Δ̂ = P̂·Q̄ᵀ; the next basis is Q = orth(Q̄).
 *
 * Factors and bases are column-major (orthonormal.ts). Sums are accumulated in f64 in a fixed
 * order and rounded to f32 once, so reconstruction is the same on every replica.
 */
import { mixSeed, orthonormalize, seededOrthonormal } from './orthonormal.ts';

/** Which factor of Δ ≈ P·Qᵀ the workers send: 'right' sends P = Δ·Q, 'left' sends Q = Δᵀ·P. */
export type LowRankSide = 'right' | 'left';

/** Rows of the basis a side projects onto (the factor sent has the other dimension's rows). */
function basisRows(side: LowRankSide, n: number, k: number): number {
  return side === 'right' ? k : n;
}

function rankOf(what: string, length: number, rows: number): number {
  const r = length / rows;
  if (!Number.isInteger(r) || r < 1) throw new RangeError(`${what}: ${length} values are not ${rows}×r for an r ≥ 1`);
  return r;
}

function checkDelta(what: string, delta: Float32Array, n: number, k: number): void {
  if (!Number.isSafeInteger(n) || !Number.isSafeInteger(k) || n < 1 || k < 1 || delta.length !== n * k) {
    throw new RangeError(`${what}: Δ must be n×k = ${n}×${k} values, got ${delta.length}`);
  }
}

/**
 * The factor a worker sends for Δ (n×k): Δ·Q (n×r) on the right side with basis Q (k×r), or
 * Δᵀ·P (k×r) on the left side with basis P (n×r). Column-major.
 */
export function project(
  delta: Float32Array,
  n: number,
  k: number,
  basis: Float32Array,
  side: LowRankSide,
): Float32Array {
  checkDelta('project', delta, n, k);
  const r = rankOf('project basis', basis.length, basisRows(side, n, k));
  if (side === 'right') {
    const out = new Float32Array(n * r);
    for (let i = 0; i < n; i++) {
      const row = i * k;
      for (let c = 0; c < r; c++) {
        const col = c * k;
        let sum = 0;
        for (let j = 0; j < k; j++) sum += (delta[row + j] as number) * (basis[col + j] as number);
        out[c * n + i] = sum;
      }
    }
    return out;
  }
  const out = new Float32Array(k * r);
  const acc = new Float64Array(k);
  for (let c = 0; c < r; c++) {
    acc.fill(0);
    for (let i = 0; i < n; i++) {
      const p = basis[c * n + i] as number;
      const row = i * k;
      for (let j = 0; j < k; j++) acc[j] = (acc[j] as number) + (delta[row + j] as number) * p;
    }
    out.set(acc, c * k);
  }
  return out;
}

/**
 * Δ̂ (n×k, row-major) from a factor and the basis it was taken against: P̄·Qᵀ on the right side
 * (factor n×r, basis k×r), P̂·Q̄ᵀ on the left side (basis n×r, factor k×r).
 */
export function reconstruct(
  factor: Float32Array,
  basis: Float32Array,
  side: LowRankSide,
  n: number,
  k: number,
): Float32Array {
  const r = rankOf('reconstruct basis', basis.length, basisRows(side, n, k));
  if (factor.length !== (side === 'right' ? n : k) * r) {
    throw new RangeError(
      `reconstruct: a ${side} factor of rank ${r} has ${(side === 'right' ? n : k) * r} values, got ${factor.length}`,
    );
  }
  const left = side === 'right' ? factor : basis; // n×r
  const right = side === 'right' ? basis : factor; // k×r
  const acc = new Float64Array(n * k);
  for (let c = 0; c < r; c++) {
    for (let i = 0; i < n; i++) {
      const a = left[c * n + i] as number;
      const row = i * k;
      for (let j = 0; j < k; j++) acc[row + j] = (acc[row + j] as number) + a * (right[c * k + j] as number);
    }
  }
  return Float32Array.from(acc);
}

export interface LowRankStateOptions {
  /** Δ is n×k (row-major). */
  n: number;
  k: number;
  /** 1 ≤ rank ≤ min(n, k); agreed by the room. */
  rank: number;
  /** The room's seed for this tensor: the first Q and every collapse fallback derive from it. */
  seed: number;
  /** Keep what the projection did not send and add it to the next Δ. Default true. */
  errorFeedback?: boolean;
}

export interface LowRankRound {
  /** Δ̂ (n×k, row-major): what the room applies for this tensor this round. */
  reconstruction: Float32Array;
  /** The shared basis for the next round (on the other side). */
  nextBasis: Float32Array;
}

/**
 * One tensor's low-rank state on one replica: the side and the shared basis (replicated: every
 * replica's are bitwise equal), and this worker's error-feedback residual (local). Call
 * `factorFor` with the worker's Δ, send the factor, and `adopt` the room's average when the round
 * commits (or `discard` when it aborts: the residual staged by `factorFor` is dropped, as in
 * codecs/error-feedback.ts).
 */
export class LowRankState {
  readonly n: number;
  readonly k: number;
  readonly seed: number;
  readonly errorFeedback: boolean;
  private currentSide: LowRankSide = 'right';
  private currentRank: number;
  private currentBasis: Float32Array;
  private residualValues: Float32Array;
  private staged: Float32Array | null = null;
  private rounds = 0;

  constructor(options: LowRankStateOptions) {
    const { n, k, rank, seed } = options;
    if (!Number.isSafeInteger(n) || !Number.isSafeInteger(k) || n < 1 || k < 1) {
      throw new RangeError(`LowRankState: n and k must be integers ≥ 1, got ${n}×${k}`);
    }
    if (!Number.isSafeInteger(rank) || rank < 1 || rank > Math.min(n, k)) {
      throw new RangeError(`LowRankState: rank must be an integer in 1 … min(n, k) = ${Math.min(n, k)}, got ${rank}`);
    }
    this.n = n;
    this.k = k;
    this.seed = seed >>> 0;
    this.errorFeedback = options.errorFeedback ?? true;
    this.currentRank = rank;
    this.currentBasis = seededOrthonormal(k, rank, this.seed);
    this.residualValues = new Float32Array(n * k);
  }

  get side(): LowRankSide {
    return this.currentSide;
  }

  get rank(): number {
    return this.currentRank;
  }

  /** The shared basis (a copy): k×r before a right round, n×r before a left round. */
  get basis(): Float32Array {
    return this.currentBasis.slice();
  }

  /** The error-feedback residual (a copy). */
  get residual(): Float32Array {
    return this.residualValues.slice();
  }

  /**
   * The factor to send for this worker's Δ (plus the residual, with error feedback). `roundTrip`,
   * when given, maps the factor to what the room will decode (the codec's encode then decode), so
   * the residual also keeps the quantisation error; the factor returned is the unquantised one.
   */
  factorFor(delta: Float32Array, roundTrip?: (factor: Float32Array) => Float32Array): Float32Array {
    checkDelta('factorFor', delta, this.n, this.k);
    const fed = new Float32Array(delta);
    if (this.errorFeedback)
      for (let i = 0; i < fed.length; i++) fed[i] = (fed[i] as number) + (this.residualValues[i] as number);
    const factor = project(fed, this.n, this.k, this.currentBasis, this.currentSide);
    if (this.errorFeedback) {
      const sent = reconstruct(
        roundTrip ? roundTrip(factor) : factor,
        this.currentBasis,
        this.currentSide,
        this.n,
        this.k,
      );
      for (let i = 0; i < fed.length; i++) fed[i] = (fed[i] as number) - (sent[i] as number);
      this.staged = fed;
    }
    return factor;
  }

  /**
   * The round committed with the room's averaged factor: returns Δ̂ and moves to the other side
   * with basis orth(averaged factor). Commits the residual staged by `factorFor`, if any.
   */
  adopt(averagedFactor: Float32Array): LowRankRound {
    const { n, k } = this;
    const reconstruction = reconstruct(averagedFactor, this.currentBasis, this.currentSide, n, k);
    const rows = this.currentSide === 'right' ? n : k;
    const nextBasis = orthonormalize(averagedFactor, rows, this.currentRank, mixSeed(this.seed, this.rounds));
    this.currentSide = this.currentSide === 'right' ? 'left' : 'right';
    this.currentBasis = nextBasis;
    this.rounds++;
    if (this.staged) this.residualValues = this.staged;
    this.staged = null;
    return { reconstruction, nextBasis: nextBasis.slice() };
  }

  /** The round aborted: drop the staged residual; side and basis stay as they were. */
  discard(): void {
    this.staged = null;
  }

  /**
   * Changes the rank for the next round (the room agrees on it): the basis keeps its first
   * min(old, new) columns and, when growing, gains seeded random columns orthogonal to them.
   */
  setRank(rank: number): void {
    const rows = this.currentBasis.length / this.currentRank;
    if (!Number.isSafeInteger(rank) || rank < 1 || rank > Math.min(this.n, this.k)) {
      throw new RangeError(`setRank: rank must be an integer in 1 … ${Math.min(this.n, this.k)}, got ${rank}`);
    }
    const grown = new Float32Array(rows * rank); // zero columns collapse into seeded random ones
    grown.set(this.currentBasis.subarray(0, rows * Math.min(rank, this.currentRank)));
    this.currentBasis = orthonormalize(grown, rows, rank, mixSeed(this.seed, this.rounds, rank));
    this.currentRank = rank;
  }
}
