/** Deterministic inputs for the tests (not exported from the package). */
import { mulberry32 } from '@shoal/gpu/random';

/** mulberry32 (@shoal/gpu's), under the name these tests use. */
export const seededRandom = mulberry32;

/**
 * Pseudo-gradient-like values: normal-ish, magnitudes spread over a few decades from block to
 * block, with occasional outliers.
 */
export function gradientLike(length: number, seed = 1): Float32Array {
  const random = seededRandom(seed);
  const out = new Float32Array(length);
  for (let i = 0; i < length; i++) {
    const normal = random() + random() + random() - 1.5;
    const decade = 10 ** -Math.floor(random() * 4);
    out[i] = normal * decade * 1e-2 * (random() < 0.01 ? 50 : 1);
  }
  return out;
}

/** Index of the first element where a and b differ (bitwise for floats: −0 ≠ +0), or −1. */
export function firstDifference(a: ArrayLike<number>, b: ArrayLike<number>): number {
  if (a.length !== b.length) return Math.min(a.length, b.length);
  for (let i = 0; i < a.length; i++) if (!Object.is(a[i], b[i])) return i;
  return -1;
}
