import { describe, expect, it } from 'vitest';
import { outerNesterovStep } from './outer.ts';
import { checkedOuterStep, deltaInPlace, firstOutOfBounds, mergeInPlace } from './round-passes.ts';

function generator(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

/** Values over many magnitudes with ±0 and subnormals, and `hostile` ones spread in. */
function values(n: number, seed: number, scale: number, hostile: number[] = []): Float32Array {
  const next = generator(seed);
  const out = Float32Array.from({ length: n }, () => {
    const pick = next();
    if (pick < 0.02) return pick < 0.01 ? 0 : -0;
    if (pick < 0.03) return (next() - 0.5) * 1e-44;
    return (next() - 0.5) * scale * 2 ** Math.floor(next() * 8 - 4);
  });
  for (const [j, value] of hostile.entries()) if (n > 0) out[(j * 7919 + 13) % n] = value;
  return out;
}

const bits = (x: Float32Array) => Array.from(new Uint32Array(x.buffer, x.byteOffset, x.length));
const LENGTHS = [0, 1, 2, 3, 8, 1001];
const HOSTILE = [[], [3.4e38, -3.4e38], [Number.NaN], [Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY]];

describe('the outer step in SIMD', () => {
  it('gives the scalar step bit for bit, and fails where it does, at the same index', () => {
    for (const n of LENGTHS) {
      for (const hostile of HOSTILE) {
        const theta = values(n, n + 1, 1);
        const momentum = values(n, n + 2, 1e-2);
        const delta = values(n, n + 3, 1e-2, hostile);
        const simd = checkedOuterStep(theta, momentum, delta, { lr: 0.7, momentum: 0.9 });
        const scalar = checkedOuterStep(theta, momentum, delta, { lr: 0.7, momentum: 0.9, simd: false });
        if ('index' in scalar) {
          expect(simd).toEqual(scalar);
          continue;
        }
        if ('index' in simd) throw new Error(`SIMD failed at ${simd.index}, the scalar step did not`);
        expect(bits(simd.theta)).toEqual(bits(scalar.theta));
        expect(bits(simd.momentum)).toEqual(bits(scalar.momentum));
        // and the scalar step is outer.ts's
        const [t, m] = [theta.slice(), momentum.slice()];
        outerNesterovStep(t, m, delta, { lr: 0.7, momentum: 0.9 });
        expect(bits(scalar.theta)).toEqual(bits(t));
        expect(bits(scalar.momentum)).toEqual(bits(m));
      }
    }
  });
});

describe('the merge in SIMD', () => {
  it('gives the scalar merge bit for bit, with and without a base', () => {
    for (const n of LENGTHS) {
      for (const hostile of HOSTILE) {
        const local = values(n, n + 4, 1, hostile);
        const global = values(n, n + 5, 1);
        const base = values(n, n + 6, 1);
        for (const withBase of [null, base]) {
          for (const alpha of [0.5, 0.3, 1]) {
            const [a, b] = [local.slice(), local.slice()];
            mergeInPlace(a, global, alpha, withBase);
            mergeInPlace(b, global, alpha, withBase, { simd: false });
            expect(bits(a)).toEqual(bits(b));
          }
        }
      }
    }
  });
});

describe('Δ and its bound', () => {
  it('gives the scalar Δ bit for bit, with its outcome', () => {
    for (const n of LENGTHS) {
      for (const hostile of HOSTILE) {
        const global = values(n, n + 7, 1);
        const local = values(n, n + 8, 1, hostile);
        for (const limit of [1e-3, 10, 1e39]) {
          const [a, b] = [local.slice(), local.slice()];
          expect(deltaInPlace(global, a, limit)).toBe(deltaInPlace(global, b, limit, { simd: false }));
          expect(bits(a)).toEqual(bits(b));
        }
      }
    }
  });

  it('computes Δ = global − local, scales it into the limit, and finds a non-finite one', () => {
    const global = Float32Array.of(1, 2, 3, 4);
    const local = Float32Array.of(0.5, 2, 5, 4);
    expect(deltaInPlace(global, local, 10)).toBe('ok');
    expect([...local]).toEqual([0.5, 0, -2, 0]);
    const far = Float32Array.of(0, 0, -4, 0);
    expect(deltaInPlace(Float32Array.of(0, 0, 0, 0), far, 1)).toBe('clamped');
    expect([...far]).toEqual([0, 0, 1, 0]);
    // a NaN anywhere, even before larger values, is found
    expect(deltaInPlace(Float32Array.of(0, 0, 0), Float32Array.of(Number.NaN, -5, 1), 10)).toBe('non-finite');
    expect(deltaInPlace(Float32Array.of(0, 0), Float32Array.of(1, Number.POSITIVE_INFINITY), 10)).toBe('non-finite');
  });

  it('names the first value out of bounds', () => {
    expect(firstOutOfBounds(Float32Array.of(1, -3, Number.NaN), 2)).toEqual({
      reason: 'magnitude',
      index: 1,
      value: -3,
    });
    expect(firstOutOfBounds(Float32Array.of(1, Number.NaN, -3), 2)).toEqual({
      reason: 'non-finite',
      index: 1,
      value: Number.NaN,
    });
    expect(firstOutOfBounds(Float32Array.of(1, -2), 2)).toBeNull();
  });
});
