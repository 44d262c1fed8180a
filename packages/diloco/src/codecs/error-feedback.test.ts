import { describe, expect, it } from 'vitest';
import { gradientLike } from '../test-values.ts';
import { createFp4Codec, createInt4Codec, createInt8Codec } from './blockwise.ts';
import type { Codec } from './codec.ts';
import { ErrorFeedback } from './error-feedback.ts';

/** Runs `rounds` contributions; returns max_i |Σ_t decoded − Σ_t input| with and without feedback. */
function drift(codec: Codec, inputs: (round: number) => Float32Array, rounds: number) {
  const length = inputs(0).length;
  const feedback = new ErrorFeedback(codec, length);
  const sumInputs = new Float64Array(length);
  const sumWith = new Float64Array(length);
  const sumWithout = new Float64Array(length);
  for (let t = 0; t < rounds; t++) {
    const values = inputs(t);
    const withFeedback = codec.decode(feedback.encode(values), length);
    feedback.commit();
    const without = codec.decode(codec.encode(values), length);
    for (let i = 0; i < length; i++) {
      sumInputs[i] = (sumInputs[i] as number) + (values[i] as number);
      sumWith[i] = (sumWith[i] as number) + (withFeedback[i] as number);
      sumWithout[i] = (sumWithout[i] as number) + (without[i] as number);
    }
  }
  const maxGap = (sums: Float64Array) => Math.max(...sums.map((s, i) => Math.abs(s - (sumInputs[i] as number))));
  return { with: maxGap(sumWith), without: maxGap(sumWithout), residual: feedback.residual };
}

describe('ErrorFeedback', () => {
  it('cancels a codec bias that would otherwise add up every round', () => {
    // fp4 sends 0.3 (block absmax 1) as 0.25: 0.05 lost per round, 5 after 100 rounds.
    const codec = createFp4Codec(8);
    const values = Float32Array.of(1, 0.3, 0.3, 0.3, -0.3, 0.3, 0.3, 0.3);
    const result = drift(codec, () => values, 100);
    expect(result.without).toBeCloseTo(5, 4);
    // with feedback the gap is the last residual: at most one quantisation error (≤ scale/4)
    expect(result.with).toBeLessThan(0.3);
    expect(result.with).toBeCloseTo(Math.max(...result.residual.map(Math.abs)), 5);
  });

  for (const codec of [createInt8Codec(), createInt4Codec(), createFp4Codec()]) {
    it(`keeps the running sum of ${codec.name}-decoded contributions within one step's error of the inputs'`, () => {
      const rounds = 200;
      const samples = Array.from({ length: rounds }, (_, t) => gradientLike(640, 100 + t));
      const result = drift(codec, (t) => samples[t] as Float32Array, rounds);
      const largest = Math.max(...samples.map((s) => Math.max(...s.map(Math.abs))));
      // one step's error bound at the largest absmax seen (fp4's is scale/4), doubled for the
      // residual's own contribution to the block's scale
      expect(result.with).toBeLessThan(largest / 2);
      expect(result.with).toBeLessThan(result.without);
    });
  }

  it('adopts the staged residual on commit and keeps the old one on discard', () => {
    const codec = createInt4Codec(4);
    const feedback = new ErrorFeedback(codec, 4);
    const values = Float32Array.of(1, 0.3, 0, 0);
    const decoded = codec.decode(feedback.encode(values), 4);
    expect(feedback.pending).toBe(true);
    expect(() => feedback.encode(values)).toThrow(/neither committed nor discarded/);
    feedback.commit();
    const expected = values.map((x, i) => x - (decoded[i] as number));
    expect(feedback.residual).toEqual(expected);

    feedback.encode(values); // an aborted round
    feedback.discard();
    expect(feedback.pending).toBe(false);
    expect(feedback.residual).toEqual(expected);

    // the next contribution carries the residual: 0.3 + (0.3 − 2/7) is sent
    const corrected = Float32Array.from(values, (x, i) => x + (expected[i] as number));
    expect(feedback.encode(values)).toEqual(codec.encode(corrected));

    feedback.reset();
    expect(feedback.pending).toBe(false);
    expect(feedback.residual).toEqual(new Float32Array(4));
  });

  it('checks lengths and misuse', () => {
    const feedback = new ErrorFeedback(createInt8Codec(), 3);
    expect(() => feedback.encode(new Float32Array(4))).toThrow(/holds 3 values, contribution has 4/);
    expect(() => feedback.commit()).toThrow(/nothing to commit/);
    expect(() => new ErrorFeedback(createInt8Codec(), -1)).toThrow(RangeError);
    expect(() => feedback.encode(Float32Array.of(1, Number.NaN, 0))).toThrow(/non-finite/);
    expect(feedback.pending).toBe(false);
  });
});
