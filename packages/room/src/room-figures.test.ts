import { splitStages } from '@shoal/model';
import { describe, expect, it } from 'vitest';
import { evalTrendOf, nextRoundOf, pipelineGroupsOf, placeOf, wireLabel } from './room-figures.ts';
import { createRunConfig } from './run-config.ts';

describe('the room figures', () => {
  it('counts each fragment’s next round down from the schedule, and says nothing of time before a speed', () => {
    expect(nextRoundOf({ fragment: 1, round: 3, open: false, atStep: 75 }, 60, 200)).toEqual({
      fragment: 1,
      round: 3,
      open: false,
      steps: 15,
      etaMs: 3_000,
    });
    expect(nextRoundOf({ fragment: 0, round: 1, open: false, atStep: 50 }, 0, null)).toMatchObject({
      steps: 50,
      etaMs: null,
    });
    expect(nextRoundOf({ fragment: 0, round: 2, open: true, atStep: 100 }, 60, 200)).toMatchObject({
      steps: 0,
      etaMs: 0,
    });
    // a point the median passed is due now, not negative
    expect(nextRoundOf({ fragment: 0, round: 2, open: false, atStep: 50 }, 60, 200).steps).toBe(0);
  });

  it('flags a rising validation loss: the last three evaluations each over 1% above the best', () => {
    const e = (loss: number, step: number) => ({ loss, step });
    expect(evalTrendOf(null, [])).toBeNull();
    const best = e(2.09, 400);
    expect(evalTrendOf(best, [e(2.12, 500), e(2.2, 600), e(2.35, 700)])).toEqual({
      best: 2.09,
      bestStep: 400,
      latest: 2.35,
      rising: true,
    });
    // one of the last three within 1% of the best: not yet
    expect(evalTrendOf(best, [e(2.11, 500), e(2.2, 600), e(2.35, 700)])?.rising).toBe(false);
    // fewer than three since the best
    expect(evalTrendOf(best, [e(2.2, 600), e(2.35, 700)])?.rising).toBe(false);
    // before the room has trained as many tokens as its text holds: an early evaluation's noise
    expect(evalTrendOf(best, [e(2.12, 500), e(2.2, 600), e(2.35, 700)], false)?.rising).toBe(false);
  });
});

describe('pipelineGroupsOf', () => {
  const slot = (group: number, stage: number, version: number) => ({ group, stage, version });

  it('lists the groups by id, a null for each stage without a member, and what each waits for', () => {
    const members = [
      { peer: 'c', pipeline: slot(2, 2, 9) },
      { peer: 'a', pipeline: slot(0, 0, 4) },
      { peer: 'host' },
      { peer: 'b', pipeline: slot(0, 1, 4) },
      { peer: 'd', pipeline: null },
      { peer: 'e', pipeline: slot(0, 2, 4) },
    ];
    expect(pipelineGroupsOf(members, 3)).toEqual([
      { id: 0, version: 4, members: ['a', 'b', 'e'], complete: true, waitingFor: [] },
      { id: 2, version: 9, members: [null, null, 'c'], complete: false, waitingFor: [0, 1] },
    ]);
    expect(pipelineGroupsOf([], 2)).toEqual([]);
  });

  it('leaves out a member whose place names an older version of its group', () => {
    const members = [
      { peer: 'a', pipeline: slot(0, 0, 3) }, // from before the group changed
      { peer: 'b', pipeline: slot(0, 1, 5) },
    ];
    expect(pipelineGroupsOf(members, 2)).toEqual([
      { id: 0, version: 5, members: [null, 'b'], complete: false, waitingFor: [0] },
    ]);
  });

  it('gives a place its stage’s blocks', () => {
    const split = splitStages(5, 2); // the last stage takes the odd block
    expect(placeOf(slot(1, 0, 2), split)).toEqual({ group: 1, stage: 0, version: 2, firstBlock: 0, endBlock: 2 });
    expect(placeOf(slot(1, 1, 2), split)).toEqual({ group: 1, stage: 1, version: 2, firstBlock: 2, endBlock: 5 });
    expect(() => placeOf(slot(0, 2, 1), split)).toThrow(RangeError);
  });
});

describe('wireLabel', () => {
  const dense = createRunConfig({ preset: 'nano' }).diloco;
  const lowRank = (rank: number, target: number) => ({ ...dense, lowRank: { rank, target } });

  it('says dense, or low-rank with each fragment’s rank (once when they agree) and the rule', () => {
    expect(wireLabel('fp4', [null, null], dense)).toBe('fp4 (dense)');
    expect(wireLabel('fp4', [null, null], { ...dense, lowRank: null })).toBe('fp4 (dense)');
    expect(wireLabel('fp4', [8, 8], lowRank(8, 0))).toBe('fp4, low-rank r 8');
    expect(wireLabel('fp4', [8, 4], lowRank(8, 0.1))).toBe('fp4, low-rank r 8 / 4 (adaptive, ≤ 8)');
    expect(wireLabel('int8', [4, 4, 4], lowRank(8, 0.1))).toBe('int8, low-rank r 4 (adaptive, ≤ 8)');
    // fragments without a round yet
    expect(wireLabel('fp4', [null, null], lowRank(8, 0.1))).toBe('fp4, low-rank (adaptive, ≤ 8)');
    expect(wireLabel('fp4', [8, null], lowRank(8, 0))).toBe('fp4, low-rank r 8 / –');
    expect(wireLabel('fp4', [0, 16], lowRank(16, 0))).toBe('fp4, low-rank r dense / 16');
  });

  it('adds the one-step delay', () => {
    expect(wireLabel('fp4', [null], { ...dense, overlapRounds: 1 })).toBe('fp4 (dense) · one-step delay');
    expect(wireLabel('fp4', [8], { ...lowRank(8, 0), overlapRounds: 1 })).toBe('fp4, low-rank r 8 · one-step delay');
    expect(wireLabel('fp4', [null], { ...dense, overlapRounds: 0 })).toBe('fp4 (dense)');
  });
});
