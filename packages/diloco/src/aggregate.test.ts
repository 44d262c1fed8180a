import { describe, expect, it } from 'vitest';
import {
  type AggregateFailure,
  type AggregateSuccess,
  aggregate,
  type Contribution,
  centeredClip,
  clippedMean,
  DEFAULT_CLIP_ITERATIONS,
  trimmedMean,
  trimPerSide,
  weightedMean,
} from './aggregate.ts';
import { firstDifference, gradientLike, seededRandom } from './test-values.ts';

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

  const rules = [
    { kind: 'mean' },
    { kind: 'clipped-mean' },
    { kind: 'trimmed-mean' },
    { kind: 'centered-clip' },
  ] as const;
  for (const rule of rules) {
    it(`${rule.kind}: sets aside NaN, Inf, bad weights and wrong lengths, and aggregates the rest`, () => {
      const result = ok(aggregate(inputs, rule));
      expect(result.rejected).toEqual(expected);
      expect(result.accepted).toEqual([0, 8]);
      // two left: nothing to trim, nothing to clip (norm 2√2 ≤ 2 × √2): all give (1 + 3·2)/4, but
      // CenteredClip, whose later iterations go on toward the heavier one (the lighter is beyond τ)
      const two = [inputs[0] as Contribution, inputs[8] as Contribution];
      const values = rule.kind === 'centered-clip' ? [...centeredClipReference(two, 2, 1, 3)] : [1.75, 1.75];
      expect([...result.values]).toEqual(values);
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

/**
 * CenteredClip as the file comment states it, written plainly (arrays of numbers, Array.sort),
 * in the same order of operations: what the implementation must equal bit for bit.
 */
function centeredClipReference(
  contributions: Contribution[],
  clipFactor: number,
  radiusFactor: number,
  iterations: number,
): Float32Array {
  const K = contributions.length;
  const n = (contributions[0] as Contribution).values.length;
  const lowerMiddle = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor((K - 1) / 2)] as number;
  const norms = contributions.map(({ values }) => {
    let sum = 0;
    for (const v of values) sum += v * v;
    return Math.sqrt(sum);
  });
  const threshold = clipFactor * lowerMiddle(norms);
  const scale = norms.map((norm) => (norm <= threshold ? 1 : threshold / norm));
  const x = (k: number, i: number) => (scale[k] as number) * ((contributions[k] as Contribution).values[i] as number);
  const v: number[] = [];
  for (let i = 0; i < n; i++) {
    const column = contributions.map((_, k) => x(k, i)).sort((a, b) => a - b);
    const mid = K >> 1;
    v.push(K % 2 ? (column[mid] as number) : ((column[mid - 1] as number) + (column[mid] as number)) / 2);
  }
  const distance = (k: number) => {
    let sum = 0;
    for (let i = 0; i < n; i++) sum += (x(k, i) - (v[i] as number)) ** 2;
    return Math.sqrt(sum);
  };
  const tau = radiusFactor * lowerMiddle(contributions.map((_, k) => distance(k)));
  const total = contributions.reduce((a, { weight }) => a + weight, 0);
  for (let l = 0; l < iterations; l++) {
    const pulls = contributions.map(({ weight }, k) => {
      const d = distance(k);
      return d <= tau ? weight / total : (weight / total) * (tau / d);
    });
    const step = new Array<number>(n).fill(0);
    for (let k = 0; k < K; k++) {
      for (let i = 0; i < n; i++) step[i] = (step[i] as number) + (pulls[k] as number) * (x(k, i) - (v[i] as number));
    }
    for (let i = 0; i < n; i++) v[i] = (v[i] as number) + (step[i] as number);
  }
  return Float32Array.from(v);
}

describe('centeredClip', () => {
  it('equals the plain statement of the rule bit for bit: K 1 … 9, odd lengths, hostile values, ties', () => {
    const random = seededRandom(27);
    let cases = 0;
    for (let K = 1; K <= 9; K++) {
      for (const length of [1, 3, 37, 257]) {
        const contributions = Array.from({ length: K }, (_, k) => {
          const values = gradientLike(length, 100 * K + k);
          const weight = 1 + Math.floor(random() * 1000);
          return { values, weight };
        });
        // a hostile one (huge and finite, or ×100 of another), a duplicate (ties), a column of equal values
        if (K >= 3)
          contributions[K - 1] = { values: contributions[0]?.values.map((v) => 100 * v) as Float32Array, weight: 7 };
        if (K >= 4) contributions[1] = { values: (contributions[2] as Contribution).values.slice(), weight: 7 };
        if (K >= 5) contributions[3] = { values: new Float32Array(length).fill(1e30), weight: 1 };
        for (const k of contributions.keys()) (contributions[k] as Contribution).values[0] = 0.5; // a tied column
        for (const [clipFactor, radiusFactor, iterations] of [
          [2, 1, DEFAULT_CLIP_ITERATIONS],
          [1, 0.5, 1],
          [3, 2, 5],
        ] as const) {
          const result = ok(centeredClip(contributions, { clipFactor, radiusFactor, iterations }));
          const reference = centeredClipReference(contributions, clipFactor, radiusFactor, iterations);
          expect(firstDifference(result.values, reference), `K ${K}, length ${length}`).toBe(-1);
          expect(result.values.every(Number.isFinite)).toBe(true);
          cases++;
        }
      }
    }
    expect(cases).toBe(9 * 4 * 3);
  });

  it('is the same bits on every call (what two owners of one shard compute)', () => {
    const contributions = [1, 2, 3, 4, 5].map((seed) => ({ values: gradientLike(1001, seed), weight: seed }));
    const a = ok(centeredClip(contributions));
    const b = ok(centeredClip(contributions.map((x) => ({ values: x.values.slice(), weight: x.weight }))));
    expect(firstDifference(a.values, b.values)).toBe(-1);
  });

  it('holds a worker that scales its own Δ ×100 near the honest mean; the mean and the clipped mean do not', () => {
    const length = 4099;
    // honest Δs share a direction and each has its own noise, as workers on different batches
    const common = gradientLike(length, 1);
    const honest = [2, 3, 4, 5].map((seed) => {
      const noise = gradientLike(length, seed);
      return { values: common.map((v, i) => v + (noise[i] as number)), weight: 100 };
    });
    const hostile = { values: honest[0]?.values.map((v) => 100 * v) as Float32Array, weight: 100 };
    const honestMean = ok(weightedMean(honest)).values;
    const off = (values: Float32Array) => {
      let sum = 0;
      for (let i = 0; i < length; i++) sum += ((values[i] as number) - (honestMean[i] as number)) ** 2;
      return Math.sqrt(sum);
    };
    const spread = off((honest[1] as Contribution).values); // one honest Δ's distance from the mean
    const robust = ok(centeredClip([...honest, hostile]));
    expect(robust.clipped.map((x) => x.index)).toEqual([4]); // the norm clip caught it
    expect(robust.pulledIn[0]).toContain(4);
    // (measured: 0.31 of one honest Δ's spread; the clipped mean 0.51, the mean 20)
    expect(off(robust.values)).toBeLessThan(0.4 * spread);
    expect(off(ok(clippedMean([...honest, hostile])).values)).toBeGreaterThan(off(robust.values));
    expect(off(ok(weightedMean([...honest, hostile])).values)).toBeGreaterThan(10 * spread);
  });

  it('is the weighted mean when every contribution lies within τ, Δ₁ alone, and the clipped mean for K = 2', () => {
    const contributions = [1, 2, 3, 4].map((seed) => ({ values: gradientLike(333, seed), weight: seed * 10 }));
    const wide = ok(centeredClip(contributions, { radiusFactor: 1e6, clipFactor: 1e6 }));
    const mean = ok(weightedMean(contributions));
    expect(wide.pulledIn).toEqual([[], [], []]);
    for (let i = 0; i < 333; i++) expect(wide.values[i]).toBeCloseTo(mean.values[i] as number, 6);

    const one = ok(centeredClip([contributions[0] as Contribution]));
    expect(firstDifference(one.values, (contributions[0] as Contribution).values)).toBe(-1);

    const pair = [contributions[0] as Contribution, { values: gradientLike(333, 9).map((v) => 50 * v), weight: 10 }];
    const clippedPair = ok(clippedMean(pair)).values;
    const centred = ok(centeredClip(pair)).values;
    for (let i = 0; i < 333; i++) expect(centred[i]).toBeCloseTo(clippedPair[i] as number, 6);
  });

  it('checks its parameters', () => {
    const one = [c([1, 2])];
    expect(() => centeredClip(one, { radiusFactor: 0 })).toThrow(/radiusFactor must be a finite number > 0/);
    expect(() => centeredClip(one, { clipFactor: Number.NaN })).toThrow(/clipFactor/);
    expect(() => centeredClip(one, { iterations: 0 })).toThrow(/iterations must be an integer in 1 … 16/);
    expect(() => centeredClip(one, { iterations: 1.5 })).toThrow(/iterations/);
    expect(() => aggregate(one, { kind: 'centered-clip', iterations: 17 })).toThrow(/iterations/);
  });
});
