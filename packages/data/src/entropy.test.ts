import { describe, expect, it } from 'vitest';
import { unigramEntropy } from './entropy.ts';

describe('unigramEntropy', () => {
  it('is 0 for one symbol, ln k for k equally frequent ones, in nats', () => {
    expect(unigramEntropy(new Uint8Array(10).fill(7))).toBe(0);
    expect(unigramEntropy(new Uint8Array([1, 2, 1, 2]))).toBeCloseTo(Math.LN2, 12);
    expect(unigramEntropy(Uint8Array.from({ length: 256 }, (_, i) => i))).toBeCloseTo(Math.log(256), 12);
    // p = (3/4, 1/4): −(0.75 ln 0.75 + 0.25 ln 0.25)
    expect(unigramEntropy(new Uint8Array([0, 0, 0, 9]))).toBeCloseTo(0.5623351446, 9);
  });

  it('refuses an empty array', () => {
    expect(() => unigramEntropy(new Uint8Array(0))).toThrow(RangeError);
  });
});
