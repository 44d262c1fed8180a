import { loadMobyDick, splitCorpus, validationBatches } from '@shoal/data';
import { describe, expect, it } from 'vitest';
import { ATTACKS, ATTACKS_ELSEWHERE, selectAttacks } from './catalogue.ts';
import { type AttackResult, runAttacks } from './runner.ts';

const corpus = splitCorpus(loadMobyDick());
// 4 workers × 46 inner steps of 4×64 tokens: about 4 rounds of each fragment, two of them after
// the attacks begin (2.5 s, 25 steps in), at a few seconds of CPU per run.
const TINY = { preset: 'nano', workers: 4, hostile: 1, tokens: 4 * 46 * 256, seed: 1 };

/** What every result must say, whatever the defences: its fields, consistent with each other. */
function expectWellFormed(result: AttackResult, cleanEvalLoss: number | null) {
  expect(result.stopped).toBe(result.why.length === 0);
  expect(result.detected).toBe(result.signals.length > 0);
  expect(result.cleanEvalLoss).toBe(cleanEvalLoss);
  expect(result.attackErrors).toEqual([]); // the attack itself was carried out
  for (const field of ['evalLoss', 'roundsCommitted', 'roundsAborted', 'peakBytesHeld'] as const) {
    expect(result[field] === null || Number.isFinite(result[field])).toBe(true);
  }
}

describe('the attack catalogue', () => {
  it('names every attack once, and says where the ones it cannot run are tested', () => {
    const names = ATTACKS.map((a) => a.name);
    expect(new Set(names).size).toBe(names.length);
    for (const attack of ATTACKS) expect(Boolean(attack.install) !== Boolean(attack.probe)).toBe(true);
    for (const e of ATTACKS_ELSEWHERE) expect(e.where).toMatch(/\.test\.ts/);
    expect(selectAttacks([]).length).toBe(ATTACKS.length);
    expect(() => selectAttacks(['no-such-attack'])).toThrow(
      /unknown attack no-such-attack: choose from owner-scales-result/,
    );
  });
});

describe('runAttacks', () => {
  it('runs attacks beside a clean run whose every commit the referee confirms, and judges each', {
    timeout: 180_000,
  }, async () => {
    const report = await runAttacks({
      ...TINY,
      only: ['forged-commit', 'contribution-100x', 'oversized-chunk-announcements'],
      trainTokens: corpus.train,
      evalBatches: validationBatches(corpus.validation, { batchSize: 8, seqLen: 64, count: 4 }),
    });
    // The clean run trains and commits both fragments' rounds, and the referee agrees with every
    // shard it committed: nothing made up, no influence beyond rounding.
    const [clean] = report.clean;
    expect(report.clean).toHaveLength(1);
    expect(clean).toMatchObject({ workers: 4, roundsAborted: 0 });
    expect(clean?.roundsCommitted).toBeGreaterThanOrEqual(6);
    expect(clean?.evalLoss).toBeLessThan(Math.log(256)); // learned something
    expect(clean?.checkedShards).toBe(4 * (clean?.roundsCommitted ?? 0)); // every shard of every commit
    expect(clean?.madeUpShards).toBe(0);
    expect(clean?.maxInfluence).toBeLessThan(1e-4);
    expect(report.budgetBytes).toBeGreaterThan(8 * 70_464); // a state part of nano's larger fragment

    // in the catalogue's order, whatever the order asked
    expect(report.attacks.map((a) => a.name)).toEqual([
      'contribution-100x',
      'forged-commit',
      'oversized-chunk-announcements',
    ]);
    for (const result of report.attacks) expectWellFormed(result, clean?.evalLoss ?? null);
    const [scaled, commit, chunks] = report.attacks as [AttackResult, AttackResult, AttackResult];
    for (const room of [commit, scaled]) {
      expect(room).toMatchObject({ scope: 'room', workers: 4, hostile: ['w3'] });
      expect(room.roundsCommitted).toBeGreaterThan(0); // the rounds before the attack began, at least
    }
    // A forged commit is refused (and so counted) by a room that stops it; one that does not
    // stop it shows why. Either way the room noticed the attacker here (today: the aborted
    // round or the refused hash report; after the fix: the refused commits).
    expect(commit.detected).toBe(true);
    expect(commit.stopped || commit.why.length > 0).toBe(true);
    // 100·Δ: if it got into a commit, the referee measured its pull on the step.
    if (!scaled.stopped) expect(scaled.why.join(' ')).toMatch(/wrong aggregate|non-finite|crash|stalled|not done/);
    // The reassembler probe runs outside the room: no training figures, but the bytes it held.
    expect(chunks).toMatchObject({ evalLoss: null, roundsCommitted: null, roundsAborted: null, workers: 0 });
    expect(chunks.peakBytesHeld).toBeGreaterThan(0);
    expect(chunks.stopped).toBe((chunks.peakBytesHeld ?? 0) <= report.budgetBytes);
  });
});
