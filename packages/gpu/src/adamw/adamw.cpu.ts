/**
 * AdamW on the CPU, as PyTorch's torch.optim.AdamW (decoupled weight decay) and llm.c's
 * adamw_update: the reference for the GPU kernel and the update the CPU backend runs.
 */
import type { FloatArray } from '../kernel.ts';

/** nanoGPT's GPT-2 settings: β2 0.95 (not PyTorch's 0.999) steadies small-batch training. */
export const ADAMW_DEFAULTS = { beta1: 0.9, beta2: 0.95, eps: 1e-8, weightDecay: 0.1 } as const;

/** Bias corrections 1 − β1ᵗ and 1 − β2ᵗ for step t ≥ 1, in float64. */
export function adamwBiasCorrections(beta1: number, beta2: number, t: number): [number, number] {
  if (!Number.isInteger(t) || t < 1) throw new RangeError(`AdamW step t must be an integer ≥ 1, got ${t}`);
  return [1 - beta1 ** t, 1 - beta2 ** t];
}

/**
 * One AdamW step over elements [0, n) (pass subarrays for a range). `t` counts from 1;
 * `gradScale` multiplies the gradient first (the global-norm clip factor, 1 for none).
 * Updates params, m and v in place.
 */
export function adamwUpdate(
  params: FloatArray,
  grads: FloatArray,
  m: FloatArray,
  v: FloatArray,
  n: number,
  lr: number,
  beta1: number,
  beta2: number,
  eps: number,
  weightDecay: number,
  t: number,
  gradScale = 1,
): void {
  const [bc1, bc2] = adamwBiasCorrections(beta1, beta2, t);
  const invBc1 = 1 / bc1;
  const invBc2 = 1 / bc2;
  for (let i = 0; i < n; i++) {
    const g = (grads[i] as number) * gradScale;
    const mi = beta1 * (m[i] as number) + (1 - beta1) * g;
    const vi = beta2 * (v[i] as number) + (1 - beta2) * g * g;
    m[i] = mi;
    v[i] = vi;
    const theta = params[i] as number;
    params[i] = theta - lr * ((mi * invBc1) / (Math.sqrt(vi * invBc2) + eps) + weightDecay * theta);
  }
}
