/**
 * Fused softmax + cross-entropy on the CPU (llm.c's softmax_forward + crossentropy_forward +
 * crossentropy_softmax_backward, without materialising probs): the reference for the GPU kernels
 * and what the CPU backend runs. Logits [N, V] row-major, targets [N] in [0, V).
 */
import type { FloatArray } from '../kernel.ts';

// The float32 WebAssembly SIMD version the CPU training backend runs.
export { SimdCrossEntropy } from './crossentropy.simd.cpu.ts';

/** losses[r] = −log softmax(logits[r])[targets[r]], stable with the row max. Returns the mean loss. */
export function crossEntropyForward(
  losses: FloatArray,
  logits: FloatArray,
  targets: Int32Array,
  N: number,
  V: number,
): number {
  let total = 0;
  for (let r = 0; r < N; r++) {
    const base = r * V;
    let max = Number.NEGATIVE_INFINITY;
    for (let i = 0; i < V; i++) {
      const x = logits[base + i] as number;
      if (x > max) max = x;
    }
    let sum = 0;
    for (let i = 0; i < V; i++) sum += Math.exp((logits[base + i] as number) - max);
    const loss = Math.log(sum) - ((logits[base + (targets[r] as number)] as number) - max);
    losses[r] = loss;
    total += loss;
  }
  return total / N;
}

/**
 * dlogits = (softmax(logits) − onehot(targets)) · scale, overwritten (scale 1/N: the gradient of
 * the mean loss). `dlogits` may be `logits` itself (in place, as llm.c).
 */
export function crossEntropyBackward(
  dlogits: FloatArray,
  logits: FloatArray,
  targets: Int32Array,
  N: number,
  V: number,
  scale = 1 / N,
): void {
  for (let r = 0; r < N; r++) {
    const base = r * V;
    const target = targets[r] as number;
    let max = Number.NEGATIVE_INFINITY;
    for (let i = 0; i < V; i++) {
      const x = logits[base + i] as number;
      if (x > max) max = x;
    }
    // exp(x − max) goes straight into dlogits (each index read before it is written), then one scaling pass.
    let sum = 0;
    for (let i = 0; i < V; i++) {
      const e = Math.exp((logits[base + i] as number) - max);
      dlogits[base + i] = e;
      sum += e;
    }
    const factor = scale / sum;
    for (let i = 0; i < V; i++) dlogits[base + i] = (dlogits[base + i] as number) * factor;
    dlogits[base + target] = (dlogits[base + target] as number) - scale;
  }
}
