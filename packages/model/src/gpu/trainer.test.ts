import { gradNorm, mulberry32 } from '@shoal/gpu';
import { useGpu } from '@shoal/gpu/test-gpu';
import { describe, expect, it } from 'vitest';
import type { GptConfig } from '../config.ts';
import { CpuGpt } from '../cpu/gpt.ts';
import { CpuTrainer } from '../cpu/trainer.ts';
import { initParameters } from '../init.ts';
import { buildLayout } from '../layout.ts';
import type { Batch } from '../train/trainer.ts';
import { defaultTrainConfig } from '../train-config.ts';
import { createGptKernels, type GptKernels } from './gpt.ts';
import { adamwRanges, GpuTrainer } from './trainer.ts';

const gpu = useGpu();

const config: GptConfig = { nLayer: 2, nHead: 2, nEmbd: 32, blockSize: 16, vocabSize: 64 };
// A clip threshold the first steps exceed, so the GPU's clip scale is exercised.
const train = defaultTrainConfig({ batchSize: 3, seqLen: 11, maxLr: 3e-3, gradClip: 0.5, seed: 1 });

function batches(count: number, seed: number): Batch[] {
  const next = mulberry32(seed);
  const tokens = () =>
    Int32Array.from({ length: train.batchSize * train.seqLen }, () => Math.floor(next() * config.vocabSize));
  return Array.from({ length: count }, () => ({ inputs: tokens(), targets: tokens() }));
}

let shared: GptKernels | undefined;
async function kernels(device: GPUDevice): Promise<GptKernels> {
  shared ??= await createGptKernels(device, config.nEmbd / config.nHead);
  return shared;
}

describe('GpuTrainer', () => {
  it('follows the CPU trainer step for step (loss, clipped norm, parameters)', async () => {
    const { device } = gpu();
    const layout = buildLayout(config);
    const params = initParameters(layout, 4);
    const cpu = new CpuTrainer(config, train, params.slice());
    const trainer = await GpuTrainer.create(device, config, train, params, await kernels(device));
    try {
      const probe = new CpuGpt<Float32Array>(config, train.batchSize, train.seqLen, Float32Array);
      const probeGrads = new Float32Array(layout.size);
      for (const [i, batch] of batches(6, 9).entries()) {
        const lr = (train.maxLr * (i + 1)) / 6;
        // The CPU gradient norm before this step, to check the GPU's clip input.
        probe.forward(await cpu.getParams(), batch.inputs, batch.targets);
        probe.backward(await cpu.getParams(), probeGrads);
        const wantNorm = gradNorm(probeGrads);
        const want = await cpu.step(batch, lr);
        const got = await trainer.step(batch, lr);
        expect(Math.abs(got - want) / want, `step ${i}: loss ${got} vs ${want}`).toBeLessThan(1e-4);
        expect(Math.abs((await trainer.lastGradNorm()) - wantNorm) / wantNorm).toBeLessThan(1e-3);
        if (i === 0) expect(wantNorm).toBeGreaterThan(train.gradClip);
      }
      // AdamW normalises updates, so f32 rounding differences in near-zero gradients could move a
      // parameter by up to lr per step; measured: max 1.4e-6, mean 2.9e-9 after 6 steps.
      const [gotParams, wantParams] = [await trainer.getParams(), await cpu.getParams()];
      let maxDiff = 0;
      let sumDiff = 0;
      for (let i = 0; i < gotParams.length; i++) {
        const diff = Math.abs((gotParams[i] as number) - (wantParams[i] as number));
        maxDiff = Math.max(maxDiff, diff);
        sumDiff += diff;
      }
      expect(maxDiff).toBeLessThan(1e-4);
      expect(sumDiff / gotParams.length).toBeLessThan(1e-7);
      const [gotState, wantState] = [await trainer.getOptimizerState(), await cpu.getOptimizerState()];
      expect(gotState.step).toBe(6);
      expect(wantState.step).toBe(6);
    } finally {
      trainer.destroy();
    }
  });

  it('resumes exactly from params + optimizer state, and queues steps without reading the loss', async () => {
    const { device } = gpu();
    const layout = buildLayout(config);
    const params = initParameters(layout, 8);
    const data = batches(4, 21);
    const lr = 2e-3;

    const straight = await GpuTrainer.create(device, config, train, params, await kernels(device));
    const first = await GpuTrainer.create(device, config, train, params, await kernels(device));
    try {
      for (const batch of data) expect(await straight.step(batch, lr, { readLoss: false })).toBeNaN();
      await straight.flush();
      for (const batch of data.slice(0, 2)) await first.step(batch, lr);
      const resumed = await GpuTrainer.create(device, config, train, await first.getParams(), await kernels(device));
      try {
        await resumed.setOptimizerState(await first.getOptimizerState());
        for (const batch of data.slice(2)) await resumed.step(batch, lr);
        const [a, b] = [await straight.getParams(), await resumed.getParams()];
        expect(Buffer.from(a.buffer).equals(Buffer.from(b.buffer))).toBe(true);
        const [sa, sb] = [await straight.getOptimizerState(), await resumed.getOptimizerState()];
        expect(sb.step).toBe(4);
        expect(Buffer.from(sa.m.buffer).equals(Buffer.from(sb.m.buffer))).toBe(true);
        expect(Buffer.from(sa.v.buffer).equals(Buffer.from(sb.v.buffer))).toBe(true);
        expect(await resumed.evaluate(data)).toBeCloseTo(await straight.evaluate(data), 6);
      } finally {
        resumed.destroy();
      }
      await expect(
        first.setOptimizerState({ m: new Float32Array(2), v: new Float32Array(2), step: 1 }),
      ).rejects.toThrow(/optimizer state has 2\/2 values/);
      await expect(first.step(data[0] as Batch, Number.NaN)).rejects.toThrow(/learning rate NaN/);
    } finally {
      straight.destroy();
      first.destroy();
    }
  });

  it('merges AdamW ranges across alignment padding when the decay flag agrees', () => {
    const layout = buildLayout(config);
    const ranges = adamwRanges(layout, 0.1);
    expect(ranges).toHaveLength(layout.tensors.length);
    for (const [i, range] of ranges.entries()) {
      const t = layout.tensors[i];
      expect(range.offset).toBe(t?.paddedOffset);
      expect(range.n).toBeGreaterThanOrEqual(t?.size ?? 0);
      expect(range.weightDecay).toBe(t?.decay ? 0.1 : 0);
    }
    const last = ranges.at(-1);
    expect((last?.offset ?? 0) + (last?.n ?? 0)).toBe(layout.paddedSize);
  });
});
