import { describe, expect, it } from 'vitest';
import { initParameters } from '../init.ts';
import { buildLayout } from '../layout.ts';
import { defaultTrainConfig } from '../train-config.ts';
import { defaultCpuThreads } from './kernels.ts';
import { CpuTrainer } from './trainer.ts';

// Heads of 8 channels, T 16 and B·T 64: the SIMD attention and the packed, split matmuls both run.
const config = { nLayer: 2, nHead: 4, nEmbd: 32, blockSize: 16, vocabSize: 64 };
const [B, T] = [4, 16];

/** Losses and final parameters after `steps` steps on `threads` threads (started first). */
async function trainOn(threads: number, steps: number) {
  const train = defaultTrainConfig({ batchSize: B, seqLen: T, seed: 3 });
  const trainer = new CpuTrainer(config, train, initParameters(buildLayout(config), 3), { threads });
  try {
    await trainer.ready();
    expect(trainer.threads).toEqual({ count: threads });
    const losses: number[] = [];
    for (let step = 0; step < steps; step++) {
      const inputs = Int32Array.from({ length: B * T }, (_, i) => (i * 7 + step * 13) % 64);
      const targets = Int32Array.from({ length: B * T }, (_, i) => (i * 5 + step * 3 + 1) % 64);
      losses.push(await trainer.step({ inputs, targets }, 3e-3));
    }
    const evalLoss = await trainer.evaluate([
      {
        inputs: Int32Array.from({ length: B * T }, (_, i) => i % 64),
        targets: Int32Array.from({ length: B * T }, (_, i) => (i + 1) % 64),
      },
    ]);
    return { losses, evalLoss, params: await trainer.getParams() };
  } finally {
    trainer.destroy();
  }
}

describe('the CPU engine on threads', () => {
  it('trains bitwise the same on 1, 2 and 3 threads', async () => {
    const one = await trainOn(1, 4);
    expect(one.losses[3]).toBeLessThan(one.losses[0] as number); // it does train
    for (const threads of [2, 3]) {
      const many = await trainOn(threads, 4);
      expect(many.losses).toEqual(one.losses);
      expect(many.evalLoss).toBe(one.evalLoss);
      const bits = (x: Float32Array) => new Uint32Array(x.buffer, x.byteOffset, x.length);
      const [a, b] = [bits(many.params), bits(one.params)];
      let differing = 0;
      for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) differing++;
      expect(differing, `${threads} threads: parameters that differ`).toBe(0);
    }
  });

  it('says why it runs on fewer threads than asked, and refuses nonsense', () => {
    const train = defaultTrainConfig({ batchSize: B, seqLen: T, seed: 3 });
    const params = initParameters(buildLayout(config), 3);
    const js = new CpuTrainer(config, train, params, { threads: 2, simd: false });
    expect(js.threads).toEqual({ count: 1, note: 'the JS kernels run on one thread' });
    expect(() => new CpuTrainer(config, train, params, { threads: 0 })).toThrow(/threads must be/);
    expect(() => new CpuTrainer(config, train, params, { threads: 1.5 })).toThrow(/threads must be/);
  });

  it('defaults to every core, at most 8', () => {
    expect(defaultCpuThreads(undefined)).toBe(1);
    expect(defaultCpuThreads(2)).toBe(2);
    expect(defaultCpuThreads(64)).toBe(8);
    expect(defaultCpuThreads(0)).toBe(1);
  });
});
