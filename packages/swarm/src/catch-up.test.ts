/**
 * A room whose workers run far ahead of the network (fast steps, a slow link) must not open the
 * rounds it fell behind on back to back once the network catches up: each would carry no new
 * training, and its outer step would apply momentum alone (`shoal simulate`'s diloco
 * ended worse than the initial model at 10 Mbit/s, after three such rounds).
 */
import { presetConfig } from '@shoal/model';
import { dryRunInputs, simulateMethod } from '@shoal/sim';
import { describe, expect, it } from 'vitest';

describe('a room that falls behind its schedule', () => {
  it('opens one round for the steps it missed, not one per missed grid point', async () => {
    const model = presetConfig('nano');
    const result = await simulateMethod('diloco', {
      preset: 'nano',
      workers: 4,
      batch: 16,
      seqLen: 64,
      lr: 3e-3,
      innerSteps: 50,
      fragments: 1,
      overlap: 0,
      alpha: 0,
      codec: 'fp32',
      tokens: 1_000_000,
      seed: 1,
      gpuTflops: 10,
      linkMbps: 10,
      latencyMs: 50,
      ...dryRunInputs(model.blockSize),
    });
    // rounds committed with no tokens trained since the commit before (their Δ is θ_global − θ_global)
    const idle = result.curve.filter((point, i) => i > 0 && point.tokens === result.curve[i - 1]?.tokens);
    expect(result.committedRounds).toBeGreaterThanOrEqual(2);
    expect(idle.length).toBeLessThanOrEqual(1);
  });
});
