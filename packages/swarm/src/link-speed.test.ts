/**
 * A method's loss follows its algorithm (H, τ, α), not the link (at 10 Mbit/s and fast
 * modelled steps, workers outran the network, so rounds carried many rounds' worth of steps and
 * merges landed long after τ: `shoal simulate`'s diloco ended at 6.13 where a slow-step run gave
 * 2.44). In a room of equal workers every round carries H steps and every merge lands τ steps
 * after its contribution (H with the one-step delay), so the training is the same step for step
 * on any link; the low-rank codec's bases come from replicated state, so it keeps that too.
 */
import { corpusFromBytes, validationBatches } from '@shoal/data';
import { CpuTrainer } from '@shoal/model';
import { type MethodName, type SimulateOptions, simulateMethod } from '@shoal/sim';
import { describe, expect, it } from 'vitest';

const text = new TextEncoder().encode(
  'Call me Ishmael. Some years ago, never mind how long precisely, having little or no money in my purse, '.repeat(40),
);
const corpus = corpusFromBytes(text, { name: 'test', seqLen: 16 });

async function run(method: MethodName, linkMbps: number) {
  const options: SimulateOptions = {
    preset: 'nano',
    workers: 3,
    batch: 2,
    seqLen: 16,
    lr: 3e-3,
    innerSteps: 6,
    fragments: 2,
    overlap: 1,
    alpha: 0.5,
    codec: 'fp4',
    tokens: 3 * 2 * 16 * 30,
    seed: 1,
    // a step of 0.01 ms: the network, not the compute, sets the pace
    stepMs: 0.01,
    gpuTflops: 10,
    linkMbps,
    latencyMs: 20,
    dryRun: false,
    createTrainer: async (model, train, params) => new CpuTrainer(model, train, params),
    trainTokens: corpus.train,
    evalBatches: validationBatches(corpus.validation, { batchSize: 2, seqLen: 16, count: 2 }),
  };
  return simulateMethod(method, options);
}

describe('a room whose steps are fast next to its links', () => {
  for (const method of ['diloco', 'streaming-fp4', 'dilocox'] as const) {
    it(`${method}: trains the same on a 1 Mbit/s link as on a 1 Gbit/s one`, async () => {
      const slow = await run(method, 1);
      const fast = await run(method, 1000);
      expect(slow.committedRounds).toBe(fast.committedRounds);
      expect(slow.committedRounds).toBeGreaterThanOrEqual(method === 'diloco' ? 4 : 8);
      expect(slow.evalLoss).not.toBeNull();
      expect(slow.evalLoss).toBe(fast.evalLoss);
      // the slow link costs time, not loss
      expect(slow.simSeconds).toBeGreaterThan(fast.simSeconds);
    }, 120_000);
  }
});
