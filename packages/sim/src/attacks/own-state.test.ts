/**
 * A worker that scales its own Δ ×100 before encoding (every copy, hash and
 * signature consistent, each value within the owners' bound) passes every check; only the
 * aggregation rule stands between it and θ_global. In `shoal attacks`' room (nano, 5 workers,
 * 1 hostile) the plain mean shows what it does, and that `shoal attacks` sees it by the loss.
 */
import { loadMobyDick, splitCorpus, validationBatches } from '@shoal/data';
import { DEFAULT_DILOCO } from '@shoal/room/run-config';
import { afterEach, describe, expect, it } from 'vitest';
import { runAttacks } from './runner.ts';

const corpus = splitCorpus(loadMobyDick());
const ROOM = {
  preset: 'nano',
  workers: 5,
  hostile: 1,
  tokens: 140_000,
  seed: 1,
  only: ['contribution-100x-own-state'],
  trainTokens: corpus.train,
  evalBatches: validationBatches(corpus.validation, { batchSize: 8, seqLen: 64, count: 4 }),
};
const defaultRule = DEFAULT_DILOCO.aggregation;

afterEach(() => {
  DEFAULT_DILOCO.aggregation = defaultRule;
});

describe('a worker that scales its own Δ ×100 (1 of 5)', () => {
  it('moves the plain mean far off, and shoal attacks says it was not stopped', { timeout: 300_000 }, async () => {
    // the room's rule comes from the run options' defaults (DEFAULT_DILOCO): the mean, for contrast
    // (under the default rule it is stopped, detected as norm-clipped and within 2%: stopped.test.ts)
    DEFAULT_DILOCO.aggregation = { kind: 'mean' };
    const mean = await runAttacks(ROOM);
    const [underMean] = mean.attacks;
    expect(underMean?.attackErrors).toEqual([]);
    expect(underMean?.evalLoss).toBeGreaterThan(1.1 * (underMean?.cleanEvalLoss as number));
    // the referee sees honest contributions; the loss is what says it got through
    expect(underMean?.stopped).toBe(false);
    expect(underMean?.why.join(' ')).toMatch(/eval loss [\d.]+% above the clean run's/);
  });
});
