import { describe, expect, it } from 'vitest';
import { AdaptiveRank, DENSE } from './low-rank-rule.ts';

describe('AdaptiveRank', () => {
  it("makes a fragment's first round dense (its momentum is zero) and alternates sides by round", () => {
    const ranks = new AdaptiveRank(2, { rank: 8, target: 0 });
    expect(ranks.spec(0, 1)).toBeUndefined();
    ranks.observe(0, []);
    ranks.observe(1, []);
    expect(ranks.spec(0, 3)).toEqual({ rank: 8, side: 'right' });
    expect(ranks.spec(1, 2)).toEqual({ rank: 8, side: 'left' });
  });
  it('stays dense while no rank meets the target, then takes the smallest that does', () => {
    const ranks = new AdaptiveRank(1, { rank: 8, target: 0.5 });
    expect(ranks.rank(0)).toBe(DENSE);
    ranks.observe(0, [[0.99, 0.98, 0.95, 0.9]]);
    expect(ranks.rank(0)).toBe(DENSE);
    expect(ranks.spec(0, 2)).toBeUndefined();
    // errors at ranks 1, 2, 4, 8
    ranks.observe(0, [
      [0.9, 0.6, 0.4, 0.3],
      [0.8, 0.7, 0.42, 0.2],
      [0.9, 0.5, 0.3, 0.1],
    ]);
    expect(ranks.rank(0)).toBe(4);
  });
  it('goes one rung up where the rank in use misses the target, and dense past the configured rank', () => {
    const ranks = new AdaptiveRank(1, { rank: 8, target: 0.5 });
    ranks.observe(0, [[0.1, 0.1, 0.1, 0.1]]);
    expect(ranks.rank(0)).toBe(1);
    ranks.observe(0, [[0.7], [0.8]]);
    expect(ranks.rank(0)).toBe(2);
    ranks.observe(0, [[0.9, 0.8]]);
    expect(ranks.rank(0)).toBe(4);
    ranks.observe(0, [[0.9, 0.8, 0.7]]);
    expect(ranks.rank(0)).toBe(8);
    ranks.observe(0, [[0.9, 0.8, 0.7, 0.6]]);
    expect(ranks.rank(0)).toBe(DENSE);
  });
  it('goes up only on reports that measured the rank in use', () => {
    const ranks = new AdaptiveRank(1, { rank: 8, target: 0.5 });
    ranks.observe(0, [[0.1, 0.1, 0.1, 0.1]]);
    ranks.observe(0, [[0.7]]);
    expect(ranks.rank(0)).toBe(2);
    // the same reports again (not renewed before the next open): no second step up
    ranks.observe(0, [[0.7]]);
    expect(ranks.rank(0)).toBe(2);
  });
  it('steps down only below 90% of the target, so it does not flap', () => {
    const ranks = new AdaptiveRank(1, { rank: 4, target: 0.5 });
    ranks.observe(0, [[0.9, 0.8, 0.3]]);
    expect(ranks.rank(0)).toBe(4);
    ranks.observe(0, [[0.9, 0.48, 0.3]]);
    expect(ranks.rank(0)).toBe(4);
    ranks.observe(0, [[0.9, 0.44, 0.3]]);
    expect(ranks.rank(0)).toBe(2);
    // at the rank in use the target itself holds
    ranks.observe(0, [[0.9, 0.48]]);
    expect(ranks.rank(0)).toBe(2);
  });
  it('is not moved by a minority of liars, nor by empty reports', () => {
    const ranks = new AdaptiveRank(1, { rank: 8, target: 0.5 });
    ranks.observe(0, [[0.9, 0.8, 0.7, 0.4]]);
    expect(ranks.rank(0)).toBe(8);
    ranks.observe(0, [
      [0, 0, 0, 0],
      [0.9, 0.8, 0.7, 0.4],
      [0.9, 0.8, 0.7, 0.4],
    ]);
    expect(ranks.rank(0)).toBe(8);
    ranks.observe(0, [[], []]);
    expect(ranks.rank(0)).toBe(8);
  });
  it('uses the configured rank as the top rung when it is off the ladder', () => {
    const ranks = new AdaptiveRank(1, { rank: 6, target: 0.5 });
    ranks.observe(0, [[0.9, 0.8, 0.7, 0.4]]);
    expect(ranks.rank(0)).toBe(6);
    ranks.observe(0, [[0.9, 0.8, 0.3, 0.2]]);
    expect(ranks.rank(0)).toBe(4);
  });
});
