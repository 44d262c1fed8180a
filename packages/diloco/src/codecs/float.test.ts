import { describe, expect, it } from 'vitest';
import { firstDifference, gradientLike } from '../test-values.ts';
import { CodecError } from './codec.ts';
import { bf16FromFloat32Bits, createBf16Codec, createFp32Codec } from './float.ts';

const bitsOf = (x: number) => new Uint32Array(Float32Array.of(x).buffer)[0] as number;

describe('fp32 codec', () => {
  const codec = createFp32Codec();

  it('round-trips exactly, −0, subnormals and extremes included', () => {
    const values = Float32Array.of(0, -0, 1, -1, 1.401298464324817e-45, -3.4028234663852886e38, ...gradientLike(999));
    const bytes = codec.encode(values);
    expect(bytes).toHaveLength(codec.encodedSize(values.length));
    expect(bytes).toHaveLength(4 * values.length);
    expect(firstDifference(codec.decode(bytes, values.length), values)).toBe(-1);
  });

  it('writes little-endian float32', () => {
    expect([...codec.encode(Float32Array.of(1, -2))]).toEqual([0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0]);
  });

  it('decodes from a byte offset that is not 4-aligned, into a given buffer', () => {
    const values = gradientLike(10);
    const framed = new Uint8Array(1 + 40);
    framed.set(codec.encode(values), 1);
    const out = new Float32Array(10);
    expect(codec.decode(framed.subarray(1), 10, out)).toBe(out);
    expect(firstDifference(out, values)).toBe(-1);
  });

  it('rejects non-finite input and wrong lengths', () => {
    expect(() => codec.encode(Float32Array.of(1, Number.NaN))).toThrow(/non-finite value NaN at index 1/);
    expect(() => codec.decode(new Uint8Array(7), 2)).toThrow(CodecError);
    expect(() => codec.decode(new Uint8Array(7), 2)).toThrow(/fp32: payload has 7 bytes, 2 values need 8/);
    expect(() => codec.decode(new Uint8Array(8), 2, new Float32Array(3))).toThrow(/output holds 3/);
  });
});

describe('bf16 codec', () => {
  const codec = createBf16Codec();

  it('keeps the top half of the float32 bits, little-endian, 2 bytes per value', () => {
    expect([...codec.encode(Float32Array.of(1, -2))]).toEqual([0x80, 0x3f, 0x00, 0xc0]);
    expect(codec.encodedSize(1001)).toBe(2002);
  });

  it('rounds to nearest, ties to even', () => {
    const roundTrip = (x: number) => codec.decode(codec.encode(Float32Array.of(x)), 1)[0];
    expect(roundTrip(1 + 2 ** -8)).toBe(1); // halfway between 1 and 1 + 2^-7: even is 1
    expect(roundTrip(1 + 3 * 2 ** -8)).toBe(1 + 2 ** -6); // halfway: even is 1 + 2^-6
    expect(roundTrip(1 + 2 ** -8 + 2 ** -20)).toBe(1 + 2 ** -7); // past halfway
    expect(roundTrip(-(1 + 2 ** -8 + 2 ** -20))).toBe(-(1 + 2 ** -7));
  });

  it('saturates at the largest finite bf16 instead of rounding to infinity', () => {
    expect(bf16FromFloat32Bits(bitsOf(3.4028234663852886e38))).toBe(0x7f7f);
    expect(bf16FromFloat32Bits(bitsOf(-3.4028234663852886e38))).toBe(0xff7f);
    const decoded = codec.decode(codec.encode(Float32Array.of(3.4e38)), 1)[0] as number;
    expect(Number.isFinite(decoded)).toBe(true);
  });

  it('stays within max(2^-8·|x|, 2^-134) of every input', () => {
    const values = Float32Array.of(...gradientLike(10_000), 1e-40, -3e-42, 1e-45, 3e38, 65504, 1e-7);
    const decoded = codec.decode(codec.encode(values), values.length);
    let worst = 0;
    values.forEach((x, i) => {
      const error = Math.abs(x - (decoded[i] as number));
      expect(error, `value ${x}`).toBeLessThanOrEqual(Math.max(2 ** -8 * Math.abs(x), 2 ** -134));
      if (Math.abs(x) > 1e-30) worst = Math.max(worst, error / Math.abs(x));
    });
    expect(worst).toBeGreaterThan(2 ** -10); // the bound is nearly reached: the test measures something
  });

  it('rejects NaN and infinity on encode, wrong lengths on decode', () => {
    expect(() => codec.encode(Float32Array.of(Number.POSITIVE_INFINITY))).toThrow(
      /non-finite value Infinity at index 0/,
    );
    expect(() => codec.encode(Float32Array.of(0, 0, Number.NaN))).toThrow(/at index 2/);
    expect(() => codec.decode(new Uint8Array(3), 2)).toThrow(/bf16: payload has 3 bytes, 2 values need 4/);
  });
});
