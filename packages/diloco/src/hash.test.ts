import { describe, expect, it } from 'vitest';
import { createFragmentHasher, type FragmentHashAlgorithm } from './hash.ts';
import { gradientLike } from './test-values.ts';

/** Flips one bit of one float in a copy. */
function flipBit(values: Float32Array, index: number, bit: number): Float32Array {
  const copy = values.slice();
  const words = new Uint32Array(copy.buffer);
  words[index] = (words[index] as number) ^ (1 << bit);
  return copy;
}

// Reference digests: the published test vectors for empty input (XXH3-128 seed 0, BLAKE3), and
// one small state pinned so that a change of library or byte order cannot pass unnoticed.
const PINNED: Record<FragmentHashAlgorithm, { empty: string; small: string }> = {
  xxh128: { empty: '99aa06d3014798d86001c324468d497f', small: '09ec977e1bb6675ae57c224cecd0ca9e' },
  blake3: {
    empty: 'af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262',
    small: 'ab9b6e0e51ded27e65c6ad52303c2761a9b619f39c84dfd6ab37cbbc5b4f61ba',
  },
};

for (const algorithm of ['xxh128', 'blake3'] as const) {
  describe(`fragment hash (${algorithm})`, async () => {
    const hasher = await createFragmentHasher(algorithm);
    const theta = gradientLike(10_000, 1);
    const momentum = gradientLike(10_000, 2);
    const reference = hasher.hash(theta, momentum);

    it('matches the pinned digests', () => {
      expect(hasher.algorithm).toBe(algorithm);
      expect(hasher.hash(new Float32Array(0), new Float32Array(0))).toBe(PINNED[algorithm].empty);
      expect(hasher.hash(Float32Array.of(1, -2, 0.5), Float32Array.of(0, 0.25, -0))).toBe(PINNED[algorithm].small);
    });

    it('gives identical hashes for identical state, wherever the views start', () => {
      expect(hasher.hash(theta.slice(), momentum.slice())).toBe(reference);
      const framed = new Float32Array(20_003);
      framed.set(theta, 3);
      expect(hasher.hash(framed.subarray(3, 10_003), momentum)).toBe(reference);
      expect(reference).toMatch(algorithm === 'xxh128' ? /^[0-9a-f]{32}$/ : /^[0-9a-f]{64}$/);
    });

    it('changes when any one bit changes, in θ or in m', () => {
      const seen = new Set([reference]);
      for (const [index, bit] of [
        [0, 0],
        [5000, 31],
        [9999, 17],
      ] as const) {
        seen.add(hasher.hash(flipBit(theta, index, bit), momentum));
        seen.add(hasher.hash(theta, flipBit(momentum, index, bit)));
      }
      expect(seen.size).toBe(7);
      // +0 and −0 are equal numbers but different state bytes
      expect(hasher.hash(Float32Array.of(0), Float32Array.of(0))).not.toBe(
        hasher.hash(Float32Array.of(-0), Float32Array.of(0)),
      );
    });

    it('depends on order: θ before m, and element order within each', () => {
      expect(hasher.hash(momentum, theta)).not.toBe(reference);
      const swapped = theta.slice();
      [swapped[0], swapped[1]] = [theta[1] as number, theta[0] as number];
      expect(hasher.hash(swapped, momentum)).not.toBe(reference);
    });

    it('rejects θ and m of different lengths', () => {
      expect(() => hasher.hash(new Float32Array(3), new Float32Array(2))).toThrow(/one length, got 3 and 2/);
    });
  });
}

it('rejects unknown algorithms', async () => {
  await expect(createFragmentHasher('md5' as FragmentHashAlgorithm)).rejects.toThrow(/choose xxh128 or blake3/);
});
