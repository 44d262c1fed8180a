/** Helpers for the low-rank tests (not exported from the package). */
import { expect } from 'vitest';
import { seededRandom } from '../test-values.ts';
import { seededOrthonormal } from './orthonormal.ts';

export const SIZES = [8, 33, 64];
export const RANKS = [1, 4];

/** Uniform [−1, 1) values. */
export function randomMatrix(length: number, seed: number): Float32Array {
  const random = seededRandom(seed);
  return Float32Array.from({ length }, () => 2 * random() - 1);
}

/** U·diag(σ)·Vᵀ (n×k, row-major) with seeded orthonormal U (n×m) and V (k×m), m = σ.length. */
export function withSpectrum(n: number, k: number, sigma: readonly number[], seed: number): Float32Array {
  const m = sigma.length;
  const u = seededOrthonormal(n, m, seed);
  const v = seededOrthonormal(k, m, seed + 1);
  const out = new Float32Array(n * k);
  for (let i = 0; i < n; i++) {
    for (let j = 0; j < k; j++) {
      let sum = 0;
      for (let c = 0; c < m; c++) sum += (u[c * n + i] as number) * (sigma[c] as number) * (v[c * k + j] as number);
      out[i * k + j] = sum;
    }
  }
  return out;
}

/** max |QᵀQ − I| over a rows×cols column-major matrix. */
export function orthonormalityError(q: Float32Array, rows: number, cols: number): number {
  let worst = 0;
  for (let a = 0; a < cols; a++) {
    for (let b = 0; b < cols; b++) {
      let dot = 0;
      for (let i = 0; i < rows; i++) dot += (q[a * rows + i] as number) * (q[b * rows + i] as number);
      worst = Math.max(worst, Math.abs(dot - (a === b ? 1 : 0)));
    }
  }
  return worst;
}

/** Expects |actual − expected| ≤ tol·(1 + |expected|) everywhere; names the worst element. */
export function expectClose(actual: Float32Array, expected: Float32Array, tol: number): void {
  expect(actual.length).toBe(expected.length);
  let worst = -1;
  let worstExcess = 0;
  for (let i = 0; i < actual.length; i++) {
    const e = expected[i] as number;
    const excess = Math.abs((actual[i] as number) - e) - tol * (1 + Math.abs(e));
    if (!(excess <= worstExcess)) {
      worst = i;
      worstExcess = Number.isNaN(excess) ? Number.POSITIVE_INFINITY : excess;
    }
  }
  if (worst >= 0) expect.fail(`worst mismatch at ${worst}: ${actual[worst]} vs ${expected[worst]} (tol ${tol})`);
}
