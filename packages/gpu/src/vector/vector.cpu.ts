/**
 * CPU reference for the vector family: element-wise ops on flat parameter fragments, which the
 * DiLoCo outer step applies to ranges of the flat parameter vector (n up to tens of millions).
 * Plain loops over contiguous memory, no allocation; each value is computed in f64 (JS numbers)
 * and rounded once on store.
 */
import type { FloatArray } from '../kernel.ts';

/** out[i] = a[i] − b[i] (the pseudo-gradient: old parameters − new ones). */
export function vectorDifference(out: FloatArray, a: FloatArray, b: FloatArray, n: number): void {
  for (let i = 0; i < n; i++) out[i] = (a[i] as number) - (b[i] as number);
}

/** a[i] = α·a[i] + (1 − α)·b[i], in place (α = 1 keeps a, α = 0 takes b). */
export function vectorLerp(a: FloatArray, b: FloatArray, alpha: number, n: number): void {
  const beta = 1 - alpha;
  for (let i = 0; i < n; i++) a[i] = alpha * (a[i] as number) + beta * (b[i] as number);
}

/** dst[i] = src[i]. */
export function vectorCopy(dst: FloatArray, src: FloatArray, n: number): void {
  dst.set(src.subarray(0, n)); // a native copy, converting f64 ↔ f32 where the types differ
}

/** x[i] = s·x[i], in place. */
export function vectorScale(x: FloatArray, s: number, n: number): void {
  for (let i = 0; i < n; i++) x[i] = s * (x[i] as number);
}

/** x[i] = value. */
export function vectorFill(x: FloatArray, value: number, n: number): void {
  x.fill(value, 0, n);
}
