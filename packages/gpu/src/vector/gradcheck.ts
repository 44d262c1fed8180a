/**
 * For the CPU backward tests: central finite differences in float64. A backward pass fed
 * dout = g must equal ∂L/∂x for the scalar loss L = Σ g·forward(x), which these estimate.
 */
import type { FloatArray } from '../kernel.ts';

/** ∂loss/∂x[i] for every i by central differences (x is perturbed in place and restored). */
export function numericGradient(loss: () => number, x: Float64Array, h = 1e-6): Float64Array {
  const grad = new Float64Array(x.length);
  for (let i = 0; i < x.length; i++) {
    const saved = x[i] as number;
    x[i] = saved + h;
    const up = loss();
    x[i] = saved - h;
    const down = loss();
    x[i] = saved;
    grad[i] = (up - down) / (2 * h);
  }
  return grad;
}

/** Σ a[i]·b[i] in float64. */
export function dot(a: FloatArray, b: FloatArray): number {
  let sum = 0;
  for (let i = 0; i < a.length; i++) sum += (a[i] as number) * (b[i] as number);
  return sum;
}

/** `values` as float64 (the reference precision). */
export const f64 = (values: ArrayLike<number>) => Float64Array.from(values);
