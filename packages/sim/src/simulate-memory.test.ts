/**
 * What the simulator shares to save memory changes no result, bit for bit:
 * - each message goes to its recipients without a copy per recipient (its members encode a message
 *   once and decode it into new arrays, so nothing writes to a sent buffer), as against a copy per
 *   send, as a wire makes;
 * - the replicas hold one copy of each vector they agree on (sim/shared-vectors.ts), as against
 *   copies of their own.
 */
import { corpusFromBytes, validationBatches } from '@shoal/data';
import { buildLayout, CpuTrainer, presetConfig } from '@shoal/model';
import { describe, expect, it } from 'vitest';
import { SharedVectors } from './shared-vectors.ts';
import { dryRunInputs, type MethodName, type SimulateOptions, simulateMethod } from './simulate.ts';

const text = new TextEncoder().encode(
  'Call me Ishmael. Some years ago, never mind how long precisely, having little or no money in my purse, '.repeat(40),
);
const corpus = corpusFromBytes(text, { name: 'test', seqLen: 16 });

function run(method: MethodName, sharing: Pick<SimulateOptions, 'copyMessages' | 'vectors'>) {
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
    ...sharing,
    createTrainer: async (model, train, params) => new CpuTrainer(model, train, params),
    trainTokens: corpus.train,
    evalBatches: validationBatches(corpus.validation, { batchSize: 2, seqLen: 16, count: 2 }),
  };
  return simulateMethod(method, options);
}

describe('shoal simulate without a copy of each message per recipient', () => {
  for (const method of ['streaming', 'dilocox'] as const) {
    it(`${method}: the same losses, bytes and time as with a copy per send`, async () => {
      const copied = await run(method, { copyMessages: true });
      const shared = await run(method, { copyMessages: false });
      expect(copied.committedRounds).toBeGreaterThanOrEqual(6);
      expect(shared.curve).toEqual(copied.curve);
      expect(Object.is(shared.evalLoss, copied.evalLoss)).toBe(true);
      expect(shared.bytesPerWorker).toBe(copied.bytesPerWorker);
      expect(shared.simSeconds).toBe(copied.simSeconds);
    });
  }
});

describe('shoal simulate with replicas that share the vectors they agree on', () => {
  for (const method of ['streaming', 'dilocox'] as const) {
    it(`${method}: the same losses, bytes and time as replicas with copies of their own`, async () => {
      const own = await run(method, { vectors: null });
      const shared = await run(method, {});
      expect(own.committedRounds).toBeGreaterThanOrEqual(6);
      expect(shared.curve).toEqual(own.curve);
      expect(Object.is(shared.evalLoss, own.evalLoss)).toBe(true);
      expect(shared.bytesPerWorker).toBe(own.bytesPerWorker);
      expect(shared.simSeconds).toBe(own.simSeconds);
    });
  }
});

describe('the replicas of a simulated room', () => {
  it('hold θ_global and m once, not once a replica', async () => {
    const size = buildLayout(presetConfig('nano')).size;
    const vectors = new SharedVectors();
    const workers = 6;
    const result = await simulateMethod('streaming-fp4', {
      preset: 'nano',
      workers,
      batch: 2,
      seqLen: 16,
      lr: 3e-3,
      innerSteps: 5,
      fragments: 2,
      overlap: 1,
      alpha: 0.5,
      codec: 'fp4',
      tokens: workers * 2 * 16 * 20,
      seed: 1,
      stepMs: 20,
      gpuTflops: 10,
      linkMbps: 100,
      latencyMs: 10,
      vectors,
      ...dryRunInputs(16),
    });
    expect(result.committedRounds).toBeGreaterThanOrEqual(6);
    // 7 replicas (the host and 6 workers): θ_global and m of every fragment, 8 bytes a parameter,
    // held once (and a fragment's last results); copies of their own would be 7 × 8 bytes a parameter
    expect(vectors.bytes).toBeLessThanOrEqual(2 * 8 * size);
    expect(vectors.savedBytes).toBeGreaterThanOrEqual((workers + 1 - 1) * 8 * size);
  });
});
