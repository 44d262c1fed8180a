/**
 * A simulated room does each round's work once, not once per replica (docs/simulator-speed.md):
 * with the host and 3 workers, each round's outer step is computed by one replica and taken by
 * the 3 others, each shard result is decoded and hashed once, and each checked shard's aggregate
 * is computed by its owner or its checker and taken by the other. simulate-bitwise.test.ts checks
 * that this changes no number.
 */
import { describe, expect, it } from 'vitest';
import { SharedRounds } from './shared-rounds.ts';
import { dryRunInputs, simulateMethod } from './simulate.ts';

describe('the replicas of a simulated room', () => {
  it('decode, step and aggregate once per round what they all need', async () => {
    const rounds = new SharedRounds();
    const workers = 3;
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
      rounds,
      ...dryRunInputs(16),
    });
    const tally = Object.fromEntries(rounds.tally);
    const applied = result.committedRounds; // the final sync's rounds commit too
    expect(applied).toBeGreaterThanOrEqual(8);
    // 4 replicas: one computes each round's step, the others take it
    expect(tally.step).toEqual({ misses: applied, hits: workers * applied });
    // a shard per participant, each decoded once for the 4 replicas
    expect(tally.decoded?.misses).toBe(workers * applied);
    expect(tally.decoded?.hits).toBe(workers * workers * applied);
    // each shard's owner and checker: one aggregates, the other takes it
    expect(tally.aggregate).toEqual({ misses: workers * applied, hits: workers * applied });
  });
});
