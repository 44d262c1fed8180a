/**
 * The simulator passes each message to its recipients without a copy per recipient (its members
 * encode a message once and decode it into new arrays, so nothing writes to a sent buffer): the
 * results are the same bits as with a copy per send, as a wire makes.
 */
import { corpusFromBytes, validationBatches } from '@shoal/data';
import { CpuTrainer } from '@shoal/model';
import { describe, expect, it } from 'vitest';
import { type MethodName, type SimulateOptions, simulateMethod } from './simulate.ts';

const text = new TextEncoder().encode(
  'Call me Ishmael. Some years ago, never mind how long precisely, having little or no money in my purse, '.repeat(40),
);
const corpus = corpusFromBytes(text, { name: 'test', seqLen: 16 });

function run(method: MethodName, copyMessages: boolean) {
  const options: SimulateOptions = {
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
    copyMessages,
    createTrainer: async (model, train, params) => new CpuTrainer(model, train, params),
    trainTokens: corpus.train,
    evalBatches: validationBatches(corpus.validation, { batchSize: 2, seqLen: 16, count: 2 }),
  };
  return simulateMethod(method, options);
}

describe('shoal simulate without a copy of each message per recipient', () => {
  for (const method of ['streaming', 'dilocox'] as const) {
    it(`${method}: the same losses, bytes and time as with a copy per send`, async () => {
      const copied = await run(method, true);
      const shared = await run(method, false);
      expect(copied.committedRounds).toBeGreaterThanOrEqual(6);
      expect(shared.curve).toEqual(copied.curve);
      expect(Object.is(shared.evalLoss, copied.evalLoss)).toBe(true);
      expect(shared.bytesPerWorker).toBe(copied.bytesPerWorker);
      expect(shared.simSeconds).toBe(copied.simSeconds);
    });
  }
});
