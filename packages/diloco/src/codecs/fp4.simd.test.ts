import { describe, expect, it } from 'vitest';
import { createFp4Codec, FP4_THRESHOLDS } from './blockwise.ts';
import { CodecError } from './codec.ts';
import { ErrorFeedback } from './error-feedback.ts';
import { Fp4Kernels } from './fp4.simd.ts';

/** A seeded generator of values over many magnitudes, with zeros of both signs and subnormals. */
function values(n: number, seed: number, hostile: number[] = []): Float32Array {
  let s = seed >>> 0;
  const next = () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    const pick = next();
    if (pick < 0.02) out[i] = pick < 0.01 ? 0 : -0;
    else if (pick < 0.03)
      out[i] = (next() - 0.5) * 1e-44; // subnormal
    else out[i] = (next() - 0.5) * 2 ** Math.floor(next() * 40 - 30);
  }
  for (const [j, value] of hostile.entries()) out[(j * 7919 + 13) % n] = value;
  return out;
}

const bits = (x: Float32Array) => new Uint32Array(x.buffer, x.byteOffset, x.length);
const outcome = (run: () => unknown) => {
  try {
    return { value: run() };
  } catch (error) {
    return { error: `${(error as Error).name}: ${(error as Error).message}` };
  }
};

describe('fp4 in WebAssembly SIMD', () => {
  it('compiles here (the CPU backend needs WebAssembly SIMD anyway)', () => {
    expect(Fp4Kernels.get(FP4_THRESHOLDS)).not.toBeNull();
  });

  it('encodes, decodes and feeds back bitwise as the scalar loops, over block sizes and lengths', () => {
    for (const B of [8, 16, 64, 1024]) {
      const simd = createFp4Codec(B);
      const scalar = createFp4Codec(B, { simd: false });
      for (const n of [0, 1, 7, 8, B - 2, B, B + 2, 3 * B + 6, 5000]) {
        const x = values(n, n * 31 + B);
        const bytes = simd.encode(x);
        expect(bytes).toEqual(scalar.encode(x));
        expect(bits(simd.decode(bytes, n))).toEqual(bits(scalar.decode(bytes, n)));
        const residual = values(n, n + 5).map((v) => v * 1e-3);
        const [a, b] = [new ErrorFeedback(simd, n), new ErrorFeedback(scalar, n)];
        for (const feedback of [a, b]) {
          feedback.encode(residual);
          feedback.commit();
        }
        expect(a.encode(x)).toEqual(b.encode(x));
        a.commit();
        b.commit();
        expect(bits(a.residual)).toEqual(bits(b.residual));
      }
    }
  });

  it('handles all-zero blocks, huge values and blocks that reach the largest float', () => {
    const simd = createFp4Codec(16);
    const scalar = createFp4Codec(16, { simd: false });
    const x = new Float32Array(64);
    x.set([3.4028234663852886e38, -3.4028234663852886e38, 1e38, 1e-38], 16);
    x.set([-0, -0, 0], 32);
    for (let i = 48; i < 64; i++) x[i] = 2 ** (i - 60) * 1.5; // exactly on midpoints: ties to the larger
    const bytes = simd.encode(x);
    expect(bytes).toEqual(scalar.encode(x));
    expect(bits(simd.decode(bytes, 64))).toEqual(bits(scalar.decode(bytes, 64)));
  });

  it('refuses non-finite values with the scalar error, wherever they are', () => {
    const simd = createFp4Codec(64);
    const scalar = createFp4Codec(64, { simd: false });
    for (const hostile of [[Number.NaN], [Number.POSITIVE_INFINITY], [1, Number.NEGATIVE_INFINITY, Number.NaN]]) {
      const x = values(1000, 3, hostile);
      const expected = outcome(() => scalar.encode(x));
      expect('error' in expected).toBe(true);
      expect(outcome(() => simd.encode(x))).toEqual(expected);
      const [a, b] = [new ErrorFeedback(simd, 1000), new ErrorFeedback(scalar, 1000)];
      expect(outcome(() => a.encode(x))).toEqual(outcome(() => b.encode(x)));
    }
  });

  it('refuses bad codes, bad scales and bad padding with the scalar error', () => {
    const simd = createFp4Codec(16);
    const scalar = createFp4Codec(16, { simd: false });
    const good = simd.encode(values(69, 9)); // blocks of 12 bytes (scale, 8 code bytes), then 4 + 3
    const scale = (at: number, value: number) => (b: Uint8Array) => new DataView(b.buffer).setFloat32(at, value, true);
    const byte = (at: number, value: number) => (b: Uint8Array) => b.fill(value, at, at + 1);
    const cases: ((bytes: Uint8Array) => void)[][] = [
      [byte(12 * 2 + 4 + 3, 0x08)], // a code 0x8 in a low nibble
      [byte(4 + 2, 0x80)], // in a high one
      [byte(12 * 4 + 4 + 1, 0x80)], // in the shorter last block
      [scale(12, Number.NaN)],
      [scale(24, -1)],
      [scale(0, Number.POSITIVE_INFINITY)],
      [byte(good.length - 1, (good[good.length - 1] as number) | 0x10)], // the padding nibble
      [byte(5, 0x88), scale(24, -1)], // a bad code before a bad scale
    ];
    for (const corruptions of cases) {
      const bytes = good.slice();
      for (const corrupt of corruptions) corrupt(bytes);
      const expected = outcome(() => scalar.decode(bytes, 69));
      expect(expected).toHaveProperty('error');
      expect(outcome(() => simd.decode(bytes, 69))).toEqual(expected);
    }
    expect(() => simd.decode(good.subarray(1), 69)).toThrow(CodecError);
  });
});
