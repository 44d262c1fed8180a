/**
 * GPT-2 initialisation as nanoGPT: weights and embeddings N(0, 0.02), the two residual
 * projections per block N(0, 0.02/√(2·n_layer)), biases 0, LayerNorm weight 1 and bias 0.
 * Seeded, so every replica and every machine builds the same model.
 */
import { mulberry32 } from '@shoal/gpu';
import type { ParamLayout } from './layout.ts';

/** Seeded standard normals: mulberry32 uniforms through Box–Muller. */
export function normalSampler(seed: number): () => number {
  const next = mulberry32(seed);
  // Shifted by half a step into (0, 1), so log() below never sees 0.
  const uniform = () => next() + 2 ** -33;
  let spare: number | null = null;
  return () => {
    if (spare !== null) {
      const value = spare;
      spare = null;
      return value;
    }
    const radius = Math.sqrt(-2 * Math.log(uniform()));
    const angle = 2 * Math.PI * uniform();
    spare = radius * Math.sin(angle);
    return radius * Math.cos(angle);
  };
}

export function initParameters(layout: ParamLayout, seed: number): Float32Array {
  const params = new Float32Array(layout.size);
  const normal = normalSampler(seed);
  const residualStd = 0.02 / Math.sqrt(2 * layout.config.nLayer);
  for (const t of layout.tensors) {
    const view = params.subarray(t.offset, t.offset + t.size);
    if (t.name.endsWith('ln_1.weight') || t.name.endsWith('ln_2.weight') || t.name.endsWith('ln_f.weight')) {
      view.fill(1);
    } else if (t.shape.length >= 2) {
      const std = t.name.endsWith('c_proj.weight') ? residualStd : 0.02;
      for (let i = 0; i < view.length; i++) view[i] = std * normal();
    }
    // Biases and LayerNorm biases stay 0.
  }
  return params;
}
