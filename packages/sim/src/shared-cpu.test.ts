/**
 * Workers that share one CPU compute train exactly as workers with an engine each: the same
 * losses, bit for bit, through rounds, merges and the final evaluation; and each holds only its
 * parameters and AdamW moments.
 */
import { corpusFromBytes, validationBatches } from '@shoal/data';
import {
  buildLayout,
  CpuTrainer,
  defaultTrainConfig,
  initParameters,
  modelMemoryBytes,
  presetConfig,
} from '@shoal/model';
import { describe, expect, it } from 'vitest';
import { sharedCpuTrainers } from './shared-cpu.ts';
import { type MethodName, type SimulateOptions, simulateMethod } from './simulate.ts';

const text = new TextEncoder().encode(
  'Call me Ishmael. Some years ago, never mind how long precisely, having little or no money in my purse, '.repeat(40),
);
const corpus = corpusFromBytes(text, { name: 'test', seqLen: 16 });

function options(createTrainer: SimulateOptions['createTrainer']): SimulateOptions {
  return {
    preset: 'nano',
    workers: 3,
    batch: 2,
    seqLen: 16,
    lr: 3e-3,
    innerSteps: 5,
    fragments: 2,
    overlap: 1,
    alpha: 0.5,
    codec: 'fp4',
    tokens: 3 * 2 * 16 * 20, // 20 inner steps per worker: 4 rounds per fragment
    seed: 1,
    stepMs: 20,
    gpuTflops: 10,
    linkMbps: 100,
    latencyMs: 10,
    dryRun: false,
    createTrainer,
    trainTokens: corpus.train,
    evalBatches: validationBatches(corpus.validation, { batchSize: 2, seqLen: 16, count: 2 }),
  };
}

describe('simulated workers on one shared CPU compute', () => {
  for (const method of ['streaming', 'streaming-fp4'] as const satisfies MethodName[]) {
    it(`${method}: the same losses, bit for bit, as an engine per worker`, async () => {
      const own = await simulateMethod(
        method,
        options(async (model, train, params) => new CpuTrainer(model, train, params)),
      );
      const shared = sharedCpuTrainers();
      const made: CpuTrainer[] = [];
      const together = await simulateMethod(
        method,
        options(async (model, train, params) => {
          const trainer = (await shared.createTrainer(model, train, params)) as CpuTrainer;
          made.push(trainer);
          return trainer;
        }),
      ).finally(() => shared.destroy());
      // three workers and the evaluation (the same batch shape): one compute
      expect(made).toHaveLength(4);
      expect(shared.computes).toHaveLength(0); // destroyed
      expect(own.committedRounds).toBeGreaterThanOrEqual(6);
      expect(together.committedRounds).toBe(own.committedRounds);
      const losses = (r: typeof own) => r.curve.map((p) => p.trainLoss);
      expect(losses(together).every((l) => l !== null && Number.isFinite(l))).toBe(true);
      expect(losses(together)).toEqual(losses(own));
      expect(Object.is(together.evalLoss, own.evalLoss)).toBe(true);
      expect(together.bytesPerWorker).toBe(own.bytesPerWorker);
    });
  }

  it('keeps 12 bytes a parameter per worker, and one compute per model and batch shape', async () => {
    const model = presetConfig('nano');
    const layout = buildLayout(model);
    const train = defaultTrainConfig({ batchSize: 4, seqLen: 32 });
    const params = initParameters(layout, 1);
    const shared = sharedCpuTrainers();
    try {
      const trainers = await Promise.all(
        Array.from({ length: 5 }, () => shared.createTrainer(model, train, params) as Promise<CpuTrainer>),
      );
      expect(shared.computes).toHaveLength(1);
      const compute = shared.computes[0];
      // the planner's bytes for a volunteer (θ, gradient, m, v, θ_global and outer m: 24 bytes a
      // parameter; activations and their gradients) less what is not the compute's (θ_global and
      // outer m): 8 bytes a parameter. The compute holds the θ, m and v a step works on.
      expect(compute?.bytes).toBe(modelMemoryBytes(model, 4, 32) - 8 * layout.size);
      for (const trainer of trainers) {
        expect(trainer.compute).toBe(compute);
        expect(trainer.ownBytes).toBe(12 * layout.size); // θ_local, m, v
      }
      const alone = new CpuTrainer(model, train, params);
      expect(alone.ownBytes).toBe(compute?.bytes); // its θ, m and v are its compute's
      alone.destroy();
      // another batch shape gets its own compute
      await shared.createTrainer(model, { ...train, batchSize: 8 }, params);
      expect(shared.computes).toHaveLength(2);
    } finally {
      shared.destroy();
    }
  });

  it('refuses a compute of another batch shape', () => {
    const model = presetConfig('nano');
    const layout = buildLayout(model);
    const shared = sharedCpuTrainers();
    const params = initParameters(layout, 1);
    const train = defaultTrainConfig({ batchSize: 4, seqLen: 32 });
    return shared
      .createTrainer(model, train, params)
      .then((first) => {
        const compute = (first as CpuTrainer).compute;
        expect(() => new CpuTrainer(model, { ...train, seqLen: 16 }, params, { compute })).toThrow(/batch 4×32/);
      })
      .finally(() => shared.destroy());
  });
});
