/**
 * Pipeline replicas in the simulator, small: under a per-volunteer memory cap below what nano needs whole, the
 * simulator trains it with replicas of S stage volunteers to within 1% of the uncapped run (S = 1),
 * and a cap below one block's need is refused with what the largest stage still needs.
 */
import { corpusFromBytes, validationBatches } from '@shoal/data';
import { CpuTrainer, modelMemoryBytes, presetConfig, splitStages, trainingStepFlops } from '@shoal/model';
import { describe, expect, it } from 'vitest';
import { DEFAULT_STAGE_LINK, pipelineTiming, planPipeline, stageStepFlops } from './index.ts';
import { type SimulateOptions, simulateMethod } from './simulate.ts';

const text = new TextEncoder().encode(
  'Call me Ishmael. Some years ago, never mind how long precisely, having little or no money in my purse, '.repeat(40),
);
const corpus = corpusFromBytes(text, { name: 'test', seqLen: 16 });
const nano = presetConfig('nano');

const base: SimulateOptions = {
  preset: 'nano',
  workers: 2,
  batch: 4,
  seqLen: 16,
  lr: 3e-3,
  innerSteps: 5,
  fragments: 2,
  overlap: 1,
  alpha: 0.5,
  codec: 'fp4',
  tokens: 2 * 4 * 16 * 30, // 30 inner steps per worker: 6 rounds per fragment
  seed: 1,
  stepMs: 20,
  gpuTflops: 10,
  linkMbps: 100,
  latencyMs: 10,
  dryRun: false,
  createTrainer: async (model, train, params) => new CpuTrainer(model, train, params),
  trainTokens: corpus.train,
  evalBatches: validationBatches(corpus.validation, { batchSize: 4, seqLen: 16, count: 2 }),
};

describe('shoal simulate under a memory cap', () => {
  it('trains nano with replicas of 2 stages to within 1% of the uncapped run', async () => {
    const whole = modelMemoryBytes(nano, 4, 16);
    const plan = planPipeline({ model: nano, batch: 4, seqLen: 16, schedule: '1f1b', maxMemoryBytes: whole - 1 });
    expect(plan.stages).toBe(2);
    expect(plan.micros).toBe(4); // fewer than 4S = 8 rows: one row per micro-batch
    expect(plan.maxStageBytes).toBeLessThan(whole);

    const uncapped = await simulateMethod('streaming-fp4', base);
    const capped = await simulateMethod('streaming-fp4', {
      ...base,
      pipeline: {
        stages: plan.stages,
        micros: plan.micros,
        schedule: '1f1b',
        activations: 'f32',
        ...DEFAULT_STAGE_LINK,
      },
    });
    expect(uncapped.pipeline).toBeNull();
    expect(uncapped.evalLoss).not.toBeNull();
    expect(capped.evalLoss).not.toBeNull();
    const relative =
      Math.abs((capped.evalLoss as number) - (uncapped.evalLoss as number)) / (uncapped.evalLoss as number);
    expect(relative).toBeLessThan(0.01);
    expect(uncapped.evalLoss).toBeLessThan(Math.log(256) - 0.5); // it learned something
    expect(capped.committedRounds).toBe(uncapped.committedRounds);
    // one hop × 4 micro-batches × 2 directions × 1·16·64 values × 4 bytes
    expect(capped.pipeline?.activationBytesPerStep).toBe(32_768);
    expect(capped.pipeline?.bubbleFraction).toBeGreaterThan(0);
    expect(capped.pipeline?.bubbleFraction).toBeLessThan(1);
  }, 120_000);

  it('refuses a cap below one block’s need, saying what the largest stage still needs', () => {
    const twoStages = planPipeline({ model: nano, batch: 4, seqLen: 16, stages: 2, schedule: '1f1b' });
    const cap = twoStages.maxStageBytes - 1000;
    expect(() => planPipeline({ model: nano, batch: 4, seqLen: 16, schedule: '1f1b', maxMemoryBytes: cap })).toThrow(
      /^no pipeline fits a cap of [\d.]+ MiB: with 2 stages \(one block each, M = 4, 1f1b\) stage 0 still needs [\d.]+ MiB, 1000 B over the cap$/,
    );
    expect(() =>
      planPipeline({ model: nano, batch: 4, seqLen: 16, stages: 2, schedule: '1f1b', maxMemoryBytes: cap }),
    ).toThrow(/^2 pipeline stages do not fit a memory cap of .*: stage 0 needs .*, 1000 B over$/);
    expect(() =>
      planPipeline({ model: nano, batch: 4, seqLen: 16, stages: 1, schedule: '1f1b', maxMemoryBytes: cap + 1000 }),
    ).toThrow(/^1 pipeline stage \(the whole model\) does not fit .*; 2 stages fit$/);
  });

  it('models the replica step from each stage’s FLOP share, and the dry run reports it', async () => {
    const [first, last] = splitStages(2, 2);
    if (!first || !last) throw new Error('two stages');
    const flops = stageStepFlops(nano, first, 4, 16) + stageStepFlops(nano, last, 4, 16);
    expect(flops).toBe(trainingStepFlops(nano, 4, 16));
    // free links: each stage's micro-batches add up to its share of the single-engine step
    const pipeline = { stages: 2, micros: 4, schedule: 'gpipe' as const, activations: 'bf16' as const };
    const timing = pipelineTiming({
      model: nano,
      pipeline: { ...pipeline, stageLinkMbps: Number.POSITIVE_INFINITY, stageLatencyMs: 0 },
      batch: 4,
      seqLen: 16,
      gpuTflops: 10,
      stepMs: 20,
    });
    const busy = timing.forwardMs.map((f, s) => 4 * (f + (timing.backwardMs[s] as number)));
    expect((busy[0] as number) + (busy[1] as number)).toBeCloseTo(20, 9);
    expect(timing.syncMs).toBe(0);
    expect(timing.activationBytesPerStep).toBe(16_384); // bf16: half of f32's
    expect(timing.stepMs).toBeLessThan(20); // two GPUs beat one
    const dry = await simulateMethod('streaming-fp4', {
      ...base,
      dryRun: true,
      pipeline: { ...pipeline, ...DEFAULT_STAGE_LINK },
    });
    expect(dry.evalLoss).toBeNull();
    expect(dry.pipeline?.stepMs).toBeGreaterThan(timing.stepMs); // the LAN's latency costs
  });
});
