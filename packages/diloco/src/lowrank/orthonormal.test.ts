import { describe, expect, it } from 'vitest';
import { firstDifference } from '../test-values.ts';
import { orthonormalize, seededOrthonormal } from './orthonormal.ts';
import { orthonormalityError, RANKS, randomMatrix, SIZES } from './test-matrices.ts';

describe('seededOrthonormal', () => {
  for (const rows of SIZES) {
    for (const cols of RANKS) {
      it(`${rows}×${cols}: orthonormal columns, bitwise the same for the same seed`, () => {
        const q = seededOrthonormal(rows, cols, 7);
        expect(orthonormalityError(q, rows, cols)).toBeLessThan(1e-5);
        expect(firstDifference(q, seededOrthonormal(rows, cols, 7))).toBe(-1);
        expect(firstDifference(q, seededOrthonormal(rows, cols, 8))).not.toBe(-1);
      });
    }
  }

  it('a square basis is orthonormal too', () => {
    expect(orthonormalityError(seededOrthonormal(33, 33, 1), 33, 33)).toBeLessThan(1e-5);
  });
});

describe('orthonormalize', () => {
  for (const rows of SIZES) {
    for (const cols of RANKS) {
      it(`${rows}×${cols}: orthonormal, deterministic, spans the input's columns`, () => {
        const m = randomMatrix(rows * cols, rows + cols);
        const before = m.slice();
        const q = orthonormalize(m, rows, cols, 3);
        expect(firstDifference(m, before)).toBe(-1); // input untouched
        expect(orthonormalityError(q, rows, cols)).toBeLessThan(1e-5);
        expect(firstDifference(q, orthonormalize(m, rows, cols, 3))).toBe(-1);
        // Gram–Schmidt keeps the span: each input column equals its projection on Q.
        for (let c = 0; c < cols; c++) {
          const column = m.subarray(c * rows, (c + 1) * rows);
          const projected = new Float64Array(rows);
          for (let b = 0; b < cols; b++) {
            let dot = 0;
            for (let i = 0; i < rows; i++) dot += (q[b * rows + i] as number) * (column[i] as number);
            for (let i = 0; i < rows; i++) projected[i] = (projected[i] as number) + dot * (q[b * rows + i] as number);
          }
          for (let i = 0; i < rows; i++)
            expect(Math.abs((projected[i] as number) - (column[i] as number))).toBeLessThan(1e-5);
        }
        // The first column keeps its direction.
        const first = m.subarray(0, rows);
        let length = 0;
        for (const x of first) length += x * x;
        for (let i = 0; i < rows; i++) expect(q[i]).toBeCloseTo((first[i] as number) / Math.sqrt(length), 6);
      });
    }
  }

  it('replaces zero, repeated and dependent columns by seeded ones, still orthonormal and deterministic', () => {
    const rows = 33;
    const cols = 4;
    const m = new Float32Array(rows * cols);
    const a = randomMatrix(rows, 1);
    m.set(a, 0); // column 0
    m.set(a, rows); // column 1 repeats column 0
    // column 2 stays zero
    for (let i = 0; i < rows; i++) m[3 * rows + i] = 2 * (a[i] as number); // column 3 is 2 × column 0
    const q = orthonormalize(m, rows, cols, 11);
    expect(orthonormalityError(q, rows, cols)).toBeLessThan(1e-5);
    expect(firstDifference(q, orthonormalize(m, rows, cols, 11))).toBe(-1);
    expect(firstDifference(q, orthonormalize(m, rows, cols, 12))).not.toBe(-1); // the fallback follows the seed
    const zero = orthonormalize(new Float32Array(rows * cols), rows, cols, 5);
    expect(orthonormalityError(zero, rows, cols)).toBeLessThan(1e-5);
  });

  it('rejects more columns than rows, a wrong length and non-finite values', () => {
    expect(() => orthonormalize(new Float32Array(8), 2, 4, 0)).toThrow(RangeError);
    expect(() => orthonormalize(new Float32Array(7), 8, 1, 0)).toThrow(RangeError);
    expect(() => orthonormalize(Float32Array.of(1, Number.NaN), 2, 1, 0)).toThrow(/non-finite/);
  });
});
