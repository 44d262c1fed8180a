import { describe, expect, it } from 'vitest';
import { AdaptiveRank } from './low-rank-rule.ts';

describe('AdaptiveRank', () => {
  it('starts at the configured rank and alternates sides by round', () => {
    const ranks = new AdaptiveRank(2, { rank: 8, target: 0.5 });
    expect(ranks.spec(0, 1)).toEqual({ rank: 8, side: 'right' });
    expect(ranks.spec(1, 2)).toEqual({ rank: 8, side: 'left' });
  });
  it('takes the smallest rank whose median error is under the target', () => {
    const ranks = new AdaptiveRank(1, { rank: 8, target: 0.5 });
    // errors at ranks 1, 2, 4, 8
    ranks.observe(0, [
      [0.9, 0.6, 0.4, 0.3],
      [0.8, 0.7, 0.42, 0.2],
      [0.9, 0.5, 0.3, 0.1],
    ]);
    expect(ranks.rank(0)).toBe(4);
  });
  it('goes one rung up where the rank in use misses the target, to at most the configured rank', () => {
    const ranks = new AdaptiveRank(1, { rank: 8, target: 0.5 });
    ranks.observe(0, [[0.1, 0.1, 0.1, 0.1]]);
    expect(ranks.rank(0)).toBe(1);
    ranks.observe(0, [[0.7], [0.8]]);
    expect(ranks.rank(0)).toBe(2);
    ranks.observe(0, [[0.9, 0.8]]);
    expect(ranks.rank(0)).toBe(4);
    ranks.observe(0, [[0.9, 0.8, 0.7]]);
    ranks.observe(0, [[0.9, 0.8, 0.7, 0.6]]);
    expect(ranks.rank(0)).toBe(8);
  });
  it('steps down only below 90% of the target, so it does not flap', () => {
    const ranks = new AdaptiveRank(1, { rank: 4, target: 0.5 });
    ranks.observe(0, [[0.9, 0.48, 0.3]]);
    expect(ranks.rank(0)).toBe(4);
    ranks.observe(0, [[0.9, 0.44, 0.3]]);
    expect(ranks.rank(0)).toBe(2);
    // at the rank in use the target itself holds
    ranks.observe(0, [[0.9, 0.48]]);
    expect(ranks.rank(0)).toBe(2);
  });
  it('is not moved by a minority of liars, nor by empty reports, nor at target 0', () => {
    const ranks = new AdaptiveRank(1, { rank: 8, target: 0.5 });
    ranks.observe(0, [
      [0, 0, 0, 0],
      [0.9, 0.8, 0.7, 0.6],
      [0.9, 0.8, 0.7, 0.6],
    ]);
    expect(ranks.rank(0)).toBe(8);
    ranks.observe(0, [[], []]);
    expect(ranks.rank(0)).toBe(8);
    const fixed = new AdaptiveRank(1, { rank: 8, target: 0 });
    fixed.observe(0, [[0, 0, 0, 0]]);
    expect(fixed.rank(0)).toBe(8);
  });
  it('uses the configured rank as the top rung when it is off the ladder', () => {
    const ranks = new AdaptiveRank(1, { rank: 6, target: 0.5 });
    ranks.observe(0, [[0.9, 0.8, 0.7, 0.4]]);
    expect(ranks.rank(0)).toBe(6);
    ranks.observe(0, [[0.9, 0.8, 0.3, 0.2]]);
    expect(ranks.rank(0)).toBe(4);
  });
});
