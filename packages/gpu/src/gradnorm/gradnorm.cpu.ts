/** Global gradient norm and clip factor on the CPU (torch.nn.utils.clip_grad_norm_ semantics). */
import type { FloatArray } from '../kernel.ts';

/** ‖grads[0, n)‖₂, accumulated in float64. */
export function gradNorm(grads: FloatArray, n = grads.length): number {
  let sum = 0;
  for (let i = 0; i < n; i++) {
    const g = grads[i] as number;
    sum += g * g;
  }
  return Math.sqrt(sum);
}

/** The factor the gradient is multiplied by: min(1, maxNorm / (norm + 1e-6)); 1 when maxNorm ≤ 0 (no clipping). */
export function clipScale(norm: number, maxNorm: number): number {
  return maxNorm > 0 ? Math.min(1, maxNorm / (norm + 1e-6)) : 1;
}
