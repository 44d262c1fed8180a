import { describe, expect, it } from 'vitest';
import { SharedVectors } from './shared-vectors.ts';

const vector = (n: number, f: (i: number) => number) => Float32Array.from({ length: n }, (_, i) => f(i));

describe('SharedVectors', () => {
  it('returns the copy it holds for a vector of the same bits, and keeps a new one otherwise', () => {
    const store = new SharedVectors();
    const a = vector(1000, (i) => Math.sin(i));
    expect(store.intern(a)).toBe(a);
    expect(store.intern(a)).toBe(a);
    const same = a.slice();
    expect(store.intern(same)).toBe(a);
    expect(store.hits).toBe(1);
    expect(store.savedBytes).toBe(4000);
    // a value the fingerprint does not sample: a full compare tells them apart
    const other = a.slice();
    other[1] = 42;
    expect(store.intern(other)).toBe(other);
    expect(store.intern(other.slice())).toBe(other);
    expect(store.bytes).toBe(8000);
  });

  it('tells −0 from 0 and keeps vectors of other lengths apart', () => {
    const store = new SharedVectors();
    const zeros = new Float32Array(64);
    const negative = zeros.slice();
    negative[5] = -0;
    expect(store.intern(zeros)).toBe(zeros);
    expect(store.intern(negative)).toBe(negative);
    const longer = new Float32Array(65);
    expect(store.intern(longer)).toBe(longer);
    expect(store.intern(new Float32Array(0)).length).toBe(0);
  });
});
