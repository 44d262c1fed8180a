import { describe, expect, it } from 'vitest';
import { MAX_SIMD_ROWS } from './aggregate.simd.ts';
import { type Contribution, centeredClip } from './aggregate.ts';

function generator(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

/** K contributions of n values: honest ones around a common Δ, some far off, weights 1 … 4096. */
function room(K: number, n: number, seed: number): Contribution[] {
  const next = generator(seed);
  const common = Float32Array.from({ length: n }, () => (next() - 0.5) * 1e-2);
  return Array.from({ length: K }, (_, k) => {
    const far = k === K - 1 && K > 2 ? 100 : 1;
    const values = Float32Array.from(common, (c) => far * (c + (next() - 0.5) * 1e-3));
    return { values, weight: 1 + Math.floor(next() * 4096) };
  });
}

const bits = (x: Float32Array) => Array.from(new Uint32Array(x.buffer, x.byteOffset, x.length));

function expectSame(contributions: Contribution[], options: Parameters<typeof centeredClip>[1] = {}): void {
  const simd = centeredClip(contributions, options);
  const scalar = centeredClip(contributions, { ...options, simd: false });
  if (!simd.ok || !scalar.ok) {
    expect(simd).toEqual(scalar);
    return;
  }
  expect(bits(simd.values)).toEqual(bits(scalar.values));
  expect({ ...simd, values: null }).toEqual({ ...scalar, values: null });
}

describe('CenteredClip in WebAssembly SIMD', () => {
  it('gives the scalar loops bit for bit, over room sizes and shard lengths', () => {
    for (const K of [1, 2, 3, 4, 5, 8, MAX_SIMD_ROWS, MAX_SIMD_ROWS + 1]) {
      for (const n of [1, 2, 3, 4, 5, 6, 7, 64, 1001, 1003]) expectSame(room(K, n, K * 1000 + n));
    }
  });

  it('over its parameters', () => {
    const contributions = room(5, 257, 7);
    for (const iterations of [1, 2, 16]) {
      for (const radiusFactor of [0.1, 1, 1e6])
        expectSame(contributions, { iterations, radiusFactor, clipFactor: 1.5 });
    }
  });

  it('with hostile values: huge, subnormal, ±0, non-finite, wrong lengths and weights', () => {
    const base = room(6, 101, 3);
    const hostile: ((c: Contribution[]) => void)[] = [
      (c) => (c[1] as Contribution).values.fill(3.4e38),
      (c) => (c[2] as Contribution).values.fill(1e-45, 0, 50),
      (c) => (c[0] as Contribution).values.fill(-0, 10, 30), // −0 in a column: the scalar median runs
      (c) => (c[3] as Contribution).values.fill(-0), // a whole −0 row, even its odd last value
      (c) => (c[4] as Contribution).values.fill(Number.NaN, 100),
      (c) => (c[5] as Contribution).values.fill(Number.POSITIVE_INFINITY, 7, 8),
      (c) => c.push({ values: new Float32Array(100), weight: 5 }),
      (c) => c.push({ values: new Float32Array(101), weight: Number.NaN }),
      (c) => c.push({ values: new Float32Array(101), weight: 0 }),
      (c) => c.splice(1, 5, { values: new Float32Array(101).fill(Number.NaN), weight: 1 }),
    ];
    for (const corrupt of hostile) {
      const contributions = base.map(({ values, weight }) => ({ values: values.slice(), weight }));
      corrupt(contributions);
      expectSame(contributions);
    }
  });
});
