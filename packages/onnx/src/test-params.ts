/**
 * Parameters for export tests, spread wider than GPT-2's initialisation (std 0.02 gives logits of
 * about ±0.5, where a tolerance of 1e-4 would forgive a lot): every pre-activation is of order
 * one, so attention is far from uniform, GELU works in its curved part, and logits reach ±10.
 */
import { normalSampler, type ParamLayout } from '@shoal/model';

export function spreadParameters(layout: ParamLayout, seed: number): Float32Array {
  const params = new Float32Array(layout.size);
  const normal = normalSampler(seed);
  for (const t of layout.tensors) {
    const view = params.subarray(t.offset, t.offset + t.size);
    let value: () => number;
    if (/ln_[12f]\.weight$/.test(t.name)) value = () => 1 + 0.2 * normal();
    else if (t.name === 'transformer.wte.weight' || t.name === 'transformer.wpe.weight') value = normal;
    else if (t.shape.length === 2) {
      // [out, in]: unit-variance outputs for unit-variance inputs, a little more for sharper attention.
      const std = 1.5 / Math.sqrt(t.shape[1] as number);
      value = () => std * normal();
    } else value = () => 0.1 * normal(); // biases, LayerNorm biases
    for (let i = 0; i < view.length; i++) view[i] = value();
  }
  return params;
}
