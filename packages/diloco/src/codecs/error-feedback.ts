/**
 * Error feedback: what a lossy codec dropped from one contribution is added to the next one of
 * the same fragment, so quantisation error does not accumulate as drift.
 *
 *     c_t = Δ_t + r_{t−1}      bytes_t = encode(c_t)      r_t = c_t − decode(bytes_t)
 *
 * Summed over rounds this telescopes: Σ decode(bytes_t) = Σ Δ_t − r_T, so the running sum of what
 * was sent stays within one quantisation error of the running sum of the inputs (float32
 * rounding aside), where without feedback a deterministic codec's bias would add up every round.
 *
 * The new residual is staged until the round's fate is known ("Apply, commit, abort"). On commit
 * it replaces the old one. On abort it is discarded: the aborted Δ was never applied, θ_global did
 * not move, so the next Δ (θ_global − θ_local) already contains it, and the residual to carry is
 * still the one from before. One instance per fragment; it is local state of one worker, not
 * replicated, so its arithmetic only needs to be consistent with itself.
 */
import type { Codec } from './codec.ts';

export class ErrorFeedback {
  private residualValues: Float32Array;
  private staged: Float32Array | null = null;
  /** The buffer the next encode stages into (the residual of two rounds ago): no fresh one each round. */
  private spare: Float32Array | null = null;

  constructor(
    readonly codec: Codec,
    readonly length: number,
  ) {
    if (!Number.isSafeInteger(length) || length < 0) {
      throw new RangeError(`Error feedback length must be an integer ≥ 0, got ${length}`);
    }
    this.residualValues = new Float32Array(length);
  }

  /** The residual that the next `encode` adds (a copy). */
  get residual(): Float32Array {
    return this.residualValues.slice();
  }

  /** Whether an encoded contribution awaits `commit` or `discard`. */
  get pending(): boolean {
    return this.staged !== null;
  }

  /**
   * Encodes values + residual and stages the new residual. Throws if the previous contribution
   * is still pending (at most one round in flight per fragment), or if values + residual holds a
   * non-finite value (the codec's error).
   */
  encode(values: Float32Array): Uint8Array {
    if (values.length !== this.length) {
      throw new RangeError(`Error feedback holds ${this.length} values, contribution has ${values.length}`);
    }
    if (this.staged) throw new Error('Error feedback: the previous contribution was neither committed nor discarded');
    const corrected = this.spare ?? new Float32Array(this.length);
    this.spare = null;
    const fused = this.codec.encodeWithFeedback?.(values, this.residualValues, corrected);
    if (fused) {
      this.staged = corrected;
      return fused;
    }
    for (let i = 0; i < this.length; i++) corrected[i] = (values[i] as number) + (this.residualValues[i] as number);
    const bytes = this.codec.encode(corrected);
    const decoded = this.codec.decode(bytes, this.length);
    for (let i = 0; i < this.length; i++) corrected[i] = (corrected[i] as number) - (decoded[i] as number);
    this.staged = corrected; // now the residual r_t
    return bytes;
  }

  /** The contribution was applied: carry its residual into the next one. */
  commit(): void {
    if (!this.staged) throw new Error('Error feedback: nothing to commit');
    this.spare = this.residualValues;
    this.residualValues = this.staged;
    this.staged = null;
  }

  /** The round aborted: keep the residual from before it. */
  discard(): void {
    this.spare = this.staged;
    this.staged = null;
  }

  /** Forget everything, e.g. after this replica re-fetched the fragment's state. */
  reset(): void {
    this.residualValues.fill(0);
    this.staged = null;
  }
}
