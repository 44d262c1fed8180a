import { describe, expect, it } from 'vitest';
import { createFp4Codec } from '../codecs/blockwise.ts';
import { lowRankBytes, lowRankRelativeError, RANK_LADDER, rankFor } from './rank.ts';
import { randomMatrix, withSpectrum } from './test-matrices.ts';

/** ‖Δ − Δ̂_r‖/‖Δ‖ of the truncated SVD, from the known singular values. */
function exactError(sigma: readonly number[], r: number): number {
  const total = sigma.reduce((s, x) => s + x * x, 0);
  const tail = sigma.slice(r).reduce((s, x) => s + x * x, 0);
  return Math.sqrt(tail / total);
}

describe('rankFor', () => {
  for (const [n, k] of [
    [64, 64],
    [33, 64],
    [64, 33],
  ] as const) {
    const sigma = Array.from({ length: Math.min(n, k) }, (_, c) => 0.6 ** c);
    const delta = withSpectrum(n, k, sigma, n + k);

    it(`${n}×${k}: the measured error of each rung is the truncated SVD's to within 30%`, () => {
      // Rungs whose error is far above float32's rounding of Δ (0.6^32 ≈ 1e-7 is not).
      for (const r of RANK_LADDER.filter((x) => x <= Math.min(n, k) && exactError(sigma, x) > 1e-5)) {
        const measured = lowRankRelativeError(delta, n, k, r);
        expect(measured).toBeGreaterThanOrEqual(exactError(sigma, r) * (1 - 1e-4) - 1e-6); // never beats the SVD
        expect(measured).toBeLessThanOrEqual(exactError(sigma, r) * 1.3 + 1e-6);
      }
    });

    it(`${n}×${k}: picks the smallest rung whose error meets the target`, () => {
      const ladder = RANK_LADDER.filter((x) => x <= Math.min(n, k) && exactError(sigma, x) > 1e-5);
      for (const [index, expected] of ladder.entries()) {
        // A target just above this rung's error and below the rung before's.
        const target = exactError(sigma, expected) * 1.35;
        if (index > 0) expect(target).toBeLessThan(exactError(sigma, ladder[index - 1] as number));
        const choice = rankFor(delta, n, k, target);
        expect(choice.rank).toBe(expected);
        expect(choice.met).toBe(true);
        expect(choice.relativeError).toBeLessThanOrEqual(target);
      }
    });
  }

  it('returns the largest usable rung, not met, when no rung reaches the target', () => {
    const delta = randomMatrix(8 * 33, 4); // flat spectrum
    const choice = rankFor(delta, 8, 33, 1e-3);
    expect(choice).toMatchObject({ rank: 8, met: true }); // rank 8 of an 8×33 Δ is exact; 16 and 32 do not fit
    expect(choice.relativeError).toBeLessThan(1e-5);
    const capped = rankFor(delta, 8, 33, 1e-3, { ladder: [1, 2, 4] });
    expect(capped).toMatchObject({ rank: 4, met: false });
    expect(capped.relativeError).toBeGreaterThan(0.3);
    expect(rankFor(new Float32Array(64), 8, 8, 0)).toEqual({ rank: 1, relativeError: 0, met: true });
    expect(() => rankFor(delta, 8, 33, 0.1, { ladder: [16] })).toThrow(RangeError);
  });
});

describe('lowRankBytes', () => {
  it("sizes a right round's n×r factor and a left round's k×r factor with the codecs' own block scales", () => {
    expect(lowRankBytes(64, 33, 4, 32, 'right')).toBe(4 * 256);
    expect(lowRankBytes(64, 33, 4, 16, 'left')).toBe(2 * 132);
    expect(lowRankBytes(64, 33, 4, 8, 'right')).toBe(256 + 4 * 4); // a byte per value, a 4-byte scale per 64
    expect(lowRankBytes(64, 33, 4, 4, 'right')).toBe(128 + 4 * 4);
    expect(lowRankBytes(64, 33, 4, 4, 'left')).toBe(createFp4Codec().encodedSize(132));
    expect(lowRankBytes(64, 33, 4, 4, 'left', 32)).toBe(createFp4Codec(32).encodedSize(132));
  });
});
