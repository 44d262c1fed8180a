import { mulberry32 } from '@shoal/gpu';
import { useGpu } from '@shoal/gpu/test-gpu';
import { describe, expect, it } from 'vitest';
import type { GptConfig } from '../config.ts';
import { CpuGpt } from '../cpu/gpt.ts';
import { compareGradients } from '../gradient-check.ts';
import { initParameters } from '../init.ts';
import { createGptKernels, GpuGpt } from './gpt.ts';

const gpu = useGpu();

interface Case {
  name: string;
  config: GptConfig;
  B: number;
  T: number;
}

// nano's head size and vocabulary at a shorter T that is no multiple of anything; and an odd
// everything: 3 heads of 8, a 37-token vocabulary, T = 7, one layer.
const cases: Case[] = [
  {
    name: 'L2 H2 C32 V256, B2 T13',
    config: { nLayer: 2, nHead: 2, nEmbd: 32, blockSize: 16, vocabSize: 256 },
    B: 2,
    T: 13,
  },
  { name: 'L1 H3 C24 V37, B3 T7', config: { nLayer: 1, nHead: 3, nEmbd: 24, blockSize: 8, vocabSize: 37 }, B: 3, T: 7 },
  // GPT-2 small's width and heads (768, 12 of 64: the register attention, the matmuls' vec4
  // paths at C, 3C and 4C) in two layers, a small batch.
  {
    name: 'GPT-2-small-like L2 H12 C768 V256, B1 T48',
    config: { nLayer: 2, nHead: 12, nEmbd: 768, blockSize: 64, vocabSize: 256 },
    B: 1,
    T: 48,
  },
];

function batch(config: GptConfig, count: number, seed: number) {
  const next = mulberry32(seed);
  const tokens = () => Int32Array.from({ length: count }, () => Math.floor(next() * config.vocabSize));
  return { inputs: tokens(), targets: tokens() };
}

/** GPT-2 init, scaled up and shifted so every tensor (LayerNorm biases included) has a real gradient. */
function perturbedParams(model: { layout: CpuGpt<Float64Array>['layout'] }, seed: number): Float32Array {
  const params = initParameters(model.layout, seed);
  const next = mulberry32(seed + 1);
  for (let i = 0; i < params.length; i++) params[i] = (params[i] as number) * 4 + 0.05 * (next() - 0.5);
  return params;
}

describe('GpuGpt', () => {
  for (const { name, config, B, T } of cases) {
    it(`matches the float64 CPU model's loss (1e-5) and every gradient (1e-3): ${name}`, {
      timeout: 300_000,
    }, async () => {
      const { device } = gpu();
      const reference = new CpuGpt<Float64Array>(config, B, T, Float64Array);
      const params = perturbedParams(reference, 7);
      const { inputs, targets } = batch(config, B * T, 11);

      const wantLoss = reference.forward(Float64Array.from(params), inputs, targets);
      const wantGrads = new Float64Array(reference.layout.size);
      reference.backward(Float64Array.from(params), wantGrads);

      const model = await GpuGpt.create(device, config, B, T);
      try {
        model.writeParams(params);
        const loss = await model.forwardBackward(inputs, targets);
        expect(Math.abs(loss - wantLoss) / Math.abs(wantLoss), `loss ${loss} vs ${wantLoss}`).toBeLessThan(1e-5);
        const comparison = compareGradients(model.layout, await model.readGrads(), wantGrads, 1e-3);
        expect(comparison.ok, comparison.message).toBe(true);

        // The same batch again: bit-identical (no atomics, fixed reduction orders), and the
        // gradient was cleared rather than accumulated.
        const first = await model.readGrads();
        const again = await model.forwardBackward(inputs, targets);
        expect(again).toBe(loss);
        expect(Buffer.from((await model.readGrads()).buffer).equals(Buffer.from(first.buffer))).toBe(true);
      } finally {
        model.destroy();
      }
    });
  }

  it('evaluates the same loss forward-only, and rejects bad batches before touching the GPU', async () => {
    const { device } = gpu();
    const { config, B, T } = cases[0] as Case;
    const kernels = await createGptKernels(device, config.nEmbd / config.nHead);
    const model = await GpuGpt.create(device, config, B, T, kernels);
    try {
      model.writeParams(perturbedParams(model, 3));
      const { inputs, targets } = batch(config, B * T, 5);
      const withBackward = await model.forwardBackward(inputs, targets);
      expect(await model.forwardLoss(inputs, targets)).toBe(withBackward);
      const outside = inputs.slice();
      outside[4] = config.vocabSize;
      expect(() => model.writeBatch(outside, targets)).toThrow(/inputs: token 256 at position 4 is outside \[0, 256\)/);
      expect(() => model.writeBatch(inputs.subarray(1), targets)).toThrow(/expected 26 inputs, got 25/);
      expect(() => model.writeParams(new Float32Array(3))).toThrow(/params have 3 values/);
    } finally {
      model.destroy();
    }
    await expect(GpuGpt.create(device, config, B, config.blockSize + 1, kernels)).rejects.toThrow(/exceeds block_size/);
    await expect(GpuGpt.create(device, { ...config, nHead: 4 }, B, T, kernels)).rejects.toThrow(/head size 16/);
  });
});
