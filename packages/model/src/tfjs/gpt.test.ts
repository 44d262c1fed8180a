/**
 * The model-level golden test: TF.js (its own ops and autodiff, on its cpu and wasm backends)
 * against our float64 CpuGpt and against the WebGPU engine, for the loss and every gradient
 * tensor; then TfjsTrainer against
 * CpuTrainer for a few steps, which checks the clipping and AdamW semantics the engine benchmark
 * compares, and that TfjsTrainer leaks no tensors.
 */
import { clipScale, gradNorm, mulberry32 } from '@shoal/gpu';
import * as tf from '@tensorflow/tfjs-core';
import '@tensorflow/tfjs-backend-cpu';
import '@tensorflow/tfjs-backend-wasm';
// TF.js keeps its gradients out of tfjs-core's Node bundle; Vite loads this ESM file for us.
import '@tensorflow/tfjs-core/dist/register_all_gradients.js';
import { useGpu } from '@shoal/gpu/test-gpu';
import { beforeAll, describe, expect, it } from 'vitest';
import type { GptConfig } from '../config.ts';
import { CpuGpt } from '../cpu/gpt.ts';
import { CpuTrainer } from '../cpu/trainer.ts';
import { GpuGpt } from '../gpu/gpt.ts';
import { compareGradients } from '../gradient-check.ts';
import { initParameters } from '../init.ts';
import { buildLayout } from '../layout.ts';
import { defaultTrainConfig } from '../train-config.ts';
import { TfjsTrainer, tfjsLossAndGrads } from './gpt.ts';

const gpu = useGpu();

const config: GptConfig = { nLayer: 2, nHead: 2, nEmbd: 32, blockSize: 16, vocabSize: 256 };
const B = 2;
const layout = buildLayout(config);

function tokens(seed: number, n: number): Int32Array {
  const next = mulberry32(seed);
  return Int32Array.from({ length: n }, () => Math.floor(next() * config.vocabSize));
}

/**
 * GPT-2 init with every 1-D tensor (LayerNorm weights, all biases) moved off its trivial 1 or 0,
 * and the 2-D tensors scaled by `weightScale`: at GPT-2's 0.02 the activations are so small that
 * GELU's cubic term and the attention pattern barely show in the gradients.
 */
function testParams(seed: number, weightScale = 1): Float32Array {
  const params = initParameters(layout, seed);
  const next = mulberry32(seed + 1);
  for (const t of layout.tensors) {
    for (let i = t.offset; i < t.offset + t.size; i++) {
      params[i] =
        t.shape.length === 1 ? (params[i] as number) + 0.2 * (next() - 0.5) : (params[i] as number) * weightScale;
    }
  }
  return params;
}

function reference(params: Float32Array, inputs: Int32Array, targets: Int32Array, T: number) {
  const model = new CpuGpt<Float64Array>(config, B, T, Float64Array);
  const p64 = Float64Array.from(params);
  const loss = model.forward(p64, inputs, targets);
  const grads = new Float64Array(layout.size);
  model.backward(p64, grads);
  return { loss, grads };
}

async function useBackend(name: 'cpu' | 'wasm'): Promise<void> {
  // setBackend resolves false (with a console warning) when the backend cannot start: fail here.
  const ok = await tf.setBackend(name);
  expect(ok && tf.getBackend(), `TF.js backend '${name}' did not initialise`).toBe(name);
}

beforeAll(() => {
  tf.enableProdMode(); // no "install tfjs-node" advert in the test log
});

describe('compareGradients', () => {
  it('names the tensor that differs and reports max|diff| / max|ref|', () => {
    const ref = testParams(1);
    const got = ref.slice();
    const target = layout.byName.get('transformer.h.1.mlp.c_fc.bias');
    if (!target) throw new Error('layout lost mlp.c_fc.bias');
    const maxRef = Math.max(...Array.from(ref.subarray(target.offset, target.offset + target.size), Math.abs));
    got[target.offset + 3] = (got[target.offset + 3] as number) + 0.01 * maxRef;
    const result = compareGradients(layout, got, ref, 1e-3);
    expect(result.ok).toBe(false);
    expect(result.failures.map((e) => e.name)).toEqual(['transformer.h.1.mlp.c_fc.bias']);
    expect(result.worst.relative).toBeCloseTo(0.01, 6);
    expect(result.worst.index).toBe(3);
    expect(result.message).toContain('transformer.h.1.mlp.c_fc.bias');
    expect(compareGradients(layout, ref, ref, 0).ok).toBe(true);
  });
});

describe.each(['cpu', 'wasm'] as const)('tfjsLossAndGrads on TF.js %s vs CpuGpt<Float64Array>', (backend) => {
  beforeAll(() => useBackend(backend));

  // T = blockSize, and a T below it (wpe rows past T get no gradient; the mask is T×T).
  it.each([16, 11])('loss within 1e-5 and every gradient tensor within 1e-3 relative (T = %i)', async (T) => {
    const params = testParams(7, 5);
    const inputs = tokens(100 + T, B * T);
    const targets = tokens(200 + T, B * T);
    const want = reference(params, inputs, targets, T);
    const before = tf.memory().numTensors;
    const got = await tfjsLossAndGrads(tf, config, params, inputs, targets, B, T);
    expect(tf.memory().numTensors, 'tfjsLossAndGrads leaked tensors').toBe(before);

    expect(Math.abs(got.loss - want.loss) / want.loss, `loss ${got.loss} vs ${want.loss}`).toBeLessThan(1e-5);
    const result = compareGradients(layout, got.grads, want.grads, 1e-3);
    expect(result.ok, result.message).toBe(true);
  });

  it('rejects bad batches with the same messages as CpuGpt', async () => {
    const params = testParams(7);
    const inputs = tokens(1, B * 8);
    const bad = inputs.slice();
    bad[5] = config.vocabSize;
    await expect(tfjsLossAndGrads(tf, config, params, bad, inputs, B, 8)).rejects.toThrow(
      /token 256 at position 5 is outside \[0, 256\)/,
    );
    await expect(tfjsLossAndGrads(tf, config, params, inputs, inputs, 1, 17)).rejects.toThrow(
      /sequence length 17 exceeds block_size 16/,
    );
  });
});

describe('the WebGPU engine (GpuGpt) vs TF.js cpu, directly', () => {
  beforeAll(() => useBackend('cpu'));

  it.each([16, 11])('loss within 1e-5 and every gradient tensor within 1e-3 relative (T = %i)', async (T) => {
    const params = testParams(9, 5);
    const inputs = tokens(500 + T, B * T);
    const targets = tokens(600 + T, B * T);
    const want = await tfjsLossAndGrads(tf, config, params, inputs, targets, B, T);
    const model = await GpuGpt.create(gpu().device, config, B, T);
    try {
      model.writeParams(params);
      const loss = await model.forwardBackward(inputs, targets);
      expect(Math.abs(loss - want.loss) / want.loss, `loss ${loss} vs ${want.loss}`).toBeLessThan(1e-5);
      const result = compareGradients(layout, await model.readGrads(), want.grads, 1e-3);
      expect(result.ok, result.message).toBe(true);
    } finally {
      model.destroy();
    }
  });
});

describe('TfjsTrainer on TF.js cpu vs CpuTrainer', () => {
  beforeAll(() => useBackend('cpu'));

  it('takes the same AdamW steps with global-norm clipping, and leaks no tensors', async () => {
    const T = 16;
    // Clip below the starting gradient norm, so the steps compared are clipped ones.
    const train = defaultTrainConfig({ batchSize: B, seqLen: T, gradClip: 0.5 });
    const initial = testParams(21);
    const batches = Array.from({ length: 4 }, (_, i) => ({
      inputs: tokens(300 + i, B * T),
      targets: tokens(400 + i, B * T),
    }));
    const first = reference(initial, batches[0]?.inputs as Int32Array, batches[0]?.targets as Int32Array, T);
    expect(clipScale(gradNorm(first.grads), train.gradClip), 'the first step should be clipped').toBeLessThan(0.9);

    const cpu = new CpuTrainer(config, train, initial.slice());
    const tfjs = new TfjsTrainer(tf, config, initial.slice(), train);
    const lrs = [1e-3, 3e-3, 3e-3, 2e-3];
    let tensorsAfterFirstStep = 0;
    for (const [i, batch] of batches.entries()) {
      const lr = lrs[i] as number;
      const wantLoss = await cpu.step(batch, lr);
      const gotLoss = await tfjs.step(batch.inputs, batch.targets, lr);
      expect(Math.abs(gotLoss - wantLoss) / wantLoss, `step ${i + 1} loss ${gotLoss} vs ${wantLoss}`).toBeLessThan(
        1e-5,
      );
      if (i === 0) tensorsAfterFirstStep = tf.memory().numTensors;
    }
    expect(tf.memory().numTensors, 'TfjsTrainer.step leaked tensors').toBe(tensorsAfterFirstStep);

    const want = await cpu.getParams();
    const got = await tfjs.getParams();
    // The steps moved the parameters by far more than the tolerance, so this compares updates.
    expect(compareGradients(layout, want, initial, 1e-2).ok, 'parameters barely moved').toBe(false);
    const result = compareGradients(layout, got, want, 1e-4);
    expect(result.ok, result.message).toBe(true);

    const live = tf.memory().numTensors;
    tfjs.dispose();
    expect(tf.memory().numTensors).toBe(live - 3 * layout.tensors.length - 1);
  });
});
