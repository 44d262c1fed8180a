import { useGpu } from '@shoal/gpu/test-gpu';
import { describe, expect, it } from 'vitest';
import { PRESETS } from '../config.ts';
import { buildLayout } from '../layout.ts';
import { GpuGpt } from './gpt.ts';
import { assertGpuFits, gpuFitProblem, gpuTrainingMemory } from './memory.ts';

const gpu = useGpu();
const GIB = 2 ** 30;
const roomy = { maxBufferSize: 4 * GIB, maxStorageBufferBindingSize: 4 * GIB };

describe("the WebGPU engine's memory", () => {
  it('counts four parameter buffers and both activation arenas', () => {
    const nano = PRESETS.nano;
    const { nEmbd: C, nHead: NH, vocabSize: V, nLayer: L } = nano;
    const [B, T] = [16, 64];
    const BT = B * T;
    // per block: ln1, its mean and rstd, qkv, atty, residual2, ln2 (+ mean, rstd), fch, its GELU,
    // residual3, and the logsumexp per head and row; the embedding, two projections' scratch, the head
    const acts = 3 * BT * C + L * (BT * (16 * C + 4) + B * NH * T) + BT * C + 2 * BT + BT * V + BT;
    const dacts = BT * 16 * C;
    const need = gpuTrainingMemory(nano, B, T);
    expect(need.parameterBytes).toBe(16 * buildLayout(nano).paddedSize);
    expect(need.activationBytes).toBe(4 * (acts + dacts));
    expect(need.total).toBe(need.parameterBytes + need.activationBytes);
    expect(need.largestTensorBytes).toBe(4 * BT * 4 * C);
  });

  it('is what GpuGpt allocates, within the arenas’ alignment', async () => {
    const { device } = gpu();
    const [B, T] = [4, 32];
    const model = await GpuGpt.create(device, PRESETS.nano, B, T);
    try {
      const need = gpuTrainingMemory(PRESETS.nano, B, T);
      const allocated = model.acts.bytes + model.dacts.bytes;
      expect(allocated).toBeGreaterThanOrEqual(need.activationBytes);
      // each tensor is aligned to minStorageBufferOffsetAlignment (at most 256 bytes)
      const tensors = 3 + 13 * PRESETS.nano.nLayer + 5 + 8;
      expect(allocated - need.activationBytes).toBeLessThanOrEqual(256 * tensors + 64);
    } finally {
      model.destroy();
    }
  });

  it('GPT-2 small’s shape at batch 8 × 1,024 needs about 6.3 GiB', () => {
    const need = gpuTrainingMemory(PRESETS.gpt2, 8, 1024);
    expect(buildLayout(PRESETS.gpt2).size).toBe(86_039_040);
    expect(need.total / GIB).toBeCloseTo(6.26, 2);
    expect(gpuFitProblem(PRESETS.gpt2, 8, 1024, roomy)).toBeNull();
  });

  it('refuses, saying why, what an adapter cannot hold', () => {
    const small = { maxBufferSize: 256 * 2 ** 20, maxStorageBufferBindingSize: 128 * 2 ** 20 };
    expect(gpuFitProblem(PRESETS.gpt2, 8, 1024, small)).toMatch(
      /needs 6\.26 GiB for 86\.0M parameters at batch 8 × 1024; its parameters need one 328\.\d\d MiB buffer and this adapter allows 256\.00 MiB/,
    );
    const wide = { maxBufferSize: GIB, maxStorageBufferBindingSize: 128 * 2 ** 20 };
    expect(gpuFitProblem(PRESETS.gpt2, 16, 1024, wide)).toMatch(
      /its \d+\.fch activations need 192\.00 MiB in one binding and this adapter allows 128\.00 MiB \(use a smaller batch or sequence\)/,
    );
    expect(gpuFitProblem(PRESETS.gpt2, 8, 1024, roomy, 4 * GIB)).toMatch(/this volunteer lends 4\.00 GiB/);
    expect(() => assertGpuFits(PRESETS.gpt2, 8, 1024, small)).toThrow(/^This GPU cannot train the room's model: /);
    expect(() => assertGpuFits(PRESETS.nano, 16, 64, small)).not.toThrow();
  });
});
