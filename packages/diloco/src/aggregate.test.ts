import { describe, expect, it } from 'vitest';
import {
  type AggregateFailure,
  type AggregateSuccess,
  aggregate,
  type Contribution,
  clippedMean,
  trimmedMean,
  trimPerSide,
  weightedMean,
} from './aggregate.ts';

const c = (values: number[], weight = 1): Contribution => ({ values: Float32Array.from(values), weight });

function ok<T extends AggregateSuccess>(result: T | AggregateFailure): T {
  if (!result.ok) throw new Error(`expected a result, got: ${result.message}`);
  return result;
}

// Three honest contributions of norm 5 and one with a 1e30 coordinate.
const honest = [c([3, 4, 0]), c([0, 3, 4]), c([4, 0, 3])];
const huge = c([1e30, 0, 0]);

describe('weightedMean', () => {
  it('weights by tokens', () => {
    const result = ok(weightedMean([c([1, 2, 3], 1), c([3, 2, 1], 3)]));
    expect([...result.values]).toEqual([2.5, 2, 1.5]); // (1 + 9)/4, (2 + 6)/4, (3 + 3)/4
    expect(result.accepted).toEqual([0, 1]);
    expect(result.rejected).toEqual([]);
  });

  it('sums in float64 in index order and rounds once to float32', () => {
    const result = ok(weightedMean([c([0.1], 1), c([0.2], 2)]));
    expect(result.values[0]).toBe(Math.fround((1 / 3) * Math.fround(0.1) + (2 / 3) * Math.fround(0.2)));
  });

  it('is dominated by a huge (finite) contribution: use a robust rule against those', () => {
    const result = ok(weightedMean([...honest, huge]));
    expect(result.values[0]).toBe(Math.fround(0.25 * 3 + 0.25 * 0 + 0.25 * 4 + 0.25 * 1e30));
  });
});

describe('screening (every rule)', () => {
  const inputs = [
    c([1, 1]),
    c([Number.NaN, 1]),
    c([1, Number.POSITIVE_INFINITY]),
    c([1, 1], 0),
    c([1, 1], -2),
    c([1, 1], Number.NaN),
    c([1, 1], Number.POSITIVE_INFINITY),
    c([1, 1, 1]),
    c([2, 2], 3),
  ];
  const expected = [
    { index: 1, reason: 'non-finite', message: 'value NaN at index 0' },
    { index: 2, reason: 'non-finite', message: 'value Infinity at index 1' },
    { index: 3, reason: 'weight', message: 'weight 0 is not a finite number > 0' },
    { index: 4, reason: 'weight', message: 'weight -2 is not a finite number > 0' },
    { index: 5, reason: 'weight', message: 'weight NaN is not a finite number > 0' },
    { index: 6, reason: 'weight', message: 'weight Infinity is not a finite number > 0' },
    { index: 7, reason: 'length', message: '3 values, the shard has 2' },
  ];

  for (const rule of [{ kind: 'mean' }, { kind: 'clipped-mean' }, { kind: 'trimmed-mean' }] as const) {
    it(`${rule.kind}: sets aside NaN, Inf, bad weights and wrong lengths, and aggregates the rest`, () => {
      const result = ok(aggregate(inputs, rule));
      expect(result.rejected).toEqual(expected);
      expect(result.accepted).toEqual([0, 8]);
      // two left: nothing to trim, nothing to clip (norm 2√2 ≤ 2 × √2): all give (1 + 3·2)/4
      expect([...result.values]).toEqual([1.75, 1.75]);
    });

    it(`${rule.kind}: says so when nothing is left`, () => {
      expect(aggregate([], rule)).toEqual({
        ok: false,
        reason: 'no-valid-contributions',
        message: 'no contributions',
        rejected: [],
      });
      const none = aggregate(inputs.slice(1, 7), rule, { length: 2 });
      expect(none).toMatchObject({ ok: false, message: 'all 6 contributions were rejected' });
      expect((none as AggregateFailure).rejected.map((r) => r.index)).toEqual([0, 1, 2, 3, 4, 5]);
    });
  }

  it('takes the shard length from options, so a wrong first contribution is the one rejected', () => {
    const result = ok(weightedMean([c([1, 2, 3]), c([5, 5]), c([7, 7])], { length: 2 }));
    expect(result.rejected).toEqual([{ index: 0, reason: 'length', message: '3 values, the shard has 2' }]);
    expect([...result.values]).toEqual([6, 6]);
  });
});

describe('clippedMean', () => {
  it('scales a huge contribution down to k × the median norm', () => {
    const result = ok(clippedMean([...honest, huge]));
    // norms 5, 5, 5, 1e30: median 5, threshold 10, huge becomes [10, 0, 0]
    expect(result.medianNorm).toBe(5);
    expect(result.threshold).toBe(10);
    expect(result.clipped).toEqual([{ index: 3, norm: Math.fround(1e30), factor: 10 / Math.fround(1e30) }]);
    expect([...result.values]).toEqual([Math.fround((3 + 0 + 4 + 10) / 4), 1.75, 1.75]);
  });

  it('uses the lower middle norm for even counts, so with K = 2 the huge one is clipped', () => {
    const result = ok(clippedMean([c([3, 4]), c([300, 400])]));
    expect(result.medianNorm).toBe(5);
    expect(result.clipped).toEqual([{ index: 1, norm: 500, factor: 0.02 }]);
    expect([...result.values]).toEqual([4.5, 6]); // ([3, 4] + [6, 8]) / 2
  });

  it('leaves contributions within the threshold alone, honours clipFactor, checks it', () => {
    const three = [c([1, 0]), c([0, 2]), c([3, 0])];
    expect(ok(clippedMean(three)).clipped).toEqual([]); // 3 ≤ 2 × 2
    const tight = ok(clippedMean(three, { clipFactor: 1 }));
    expect(tight.clipped).toEqual([{ index: 2, norm: 3, factor: 2 / 3 }]);
    expect([...tight.values]).toEqual([1, Math.fround(2 / 3)]); // ([1,0] + [0,2] + [2,0]) / 3
    expect(() => clippedMean(three, { clipFactor: 0 })).toThrow(/clipFactor must be/);
  });
});

describe('trimmedMean', () => {
  it('drops a huge value per coordinate (K = 4 trims 1 per side, ties by index)', () => {
    const result = ok(trimmedMean([...honest, huge]));
    expect(result.trimPerSide).toBe(1);
    // x: [3, 0, 4, 1e30] → keep 3, 4 ; y: [4, 3, 0, 0] → drop 0 (index 2) and 4 → keep 3, 0 ;
    // z: [0, 4, 3, 0] → drop 0 (index 0) and 4 → keep 3, 0
    expect([...result.values]).toEqual([3.5, 1.5, 1.5]);
  });

  it('is the coordinate-wise median for K = 3, whatever the weights', () => {
    const result = ok(trimmedMean([c([1, 9], 5), c([2, -1e30], 1), c([3, 8], 1)]));
    expect([...result.values]).toEqual([2, 8]);
  });

  it('renormalises the kept weights per coordinate', () => {
    const inputs = [c([0], 1), c([10], 2), c([20], 3), c([30], 4), c([40], 5)];
    // K = 5, t = 1: keep 10, 20, 30 with weights 2, 3, 4
    expect(ok(trimmedMean(inputs)).values[0]).toBe(Math.fround((2 * 10 + 3 * 20 + 4 * 30) / 9));
  });

  it('cannot trim K ≤ 2: the weighted mean, reported as trimPerSide 0', () => {
    const result = ok(trimmedMean([c([1], 1), c([1e30], 1)]));
    expect(result.trimPerSide).toBe(0);
    expect(result.values[0]).toBe(Math.fround(0.5 + 0.5 * Math.fround(1e30)));
  });

  it('trims at least one per side from K = 3 and leaves at least one value', () => {
    const table = [1, 2, 3, 4, 5, 9, 10, 19, 20, 100].map((K) => [K, trimPerSide(K, 0.1)]);
    expect(table).toEqual([
      [1, 0],
      [2, 0],
      [3, 1],
      [4, 1],
      [5, 1],
      [9, 1],
      [10, 1],
      [19, 1],
      [20, 2],
      [100, 10],
    ]);
    expect(trimPerSide(5, 0.45)).toBe(2);
    expect(trimPerSide(4, 0.45)).toBe(1);
    expect(trimPerSide(10, 0)).toBe(0);
    expect(() => trimmedMean([c([1])], { trimFraction: 0.5 })).toThrow(/trimFraction must be in \[0, 0.5\)/);
  });
});
