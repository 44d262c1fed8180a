import { describe, expect, it } from 'vitest';
import { firstDifference, gradientLike } from '../test-values.ts';
import { createFp4Codec, createInt4Codec, createInt8Codec, DEFAULT_BLOCK_SIZE } from './blockwise.ts';
import { type Codec, CodecError, encodedSlice } from './codec.ts';

type Factory = (blockSize?: number) => Codec;

/** Each codec's documented error bound for value x in a block whose absmax is `scale`. */
const BOUNDS: Record<string, { factory: Factory; bound: (x: number, scale: number) => number; bytes: number }> = {
  int8: { factory: createInt8Codec, bound: (_x, s) => s / 254, bytes: 1 },
  int4: { factory: createInt4Codec, bound: (_x, s) => s / 14, bytes: 0.5 },
  fp4: { factory: createFp4Codec, bound: (x, s) => Math.min(s / 4, Math.max(Math.abs(x) / 3, s / 128)), bytes: 0.5 },
};

/** Slack for float32 rounding of the decoded value (≤ 2^-24 of it) and of the scale arithmetic. */
const ROUNDING = 2 ** -22;

/** Per value, the error against the bound; returns the worst error / absmax over all blocks. */
function checkBounds(codec: Codec, values: Float32Array, bound: (x: number, scale: number) => number): number {
  const decoded = codec.decode(codec.encode(values), values.length);
  let worst = 0;
  for (let start = 0; start < values.length; start += codec.blockSize) {
    const end = Math.min(start + codec.blockSize, values.length);
    let scale = 0;
    for (let i = start; i < end; i++) scale = Math.max(scale, Math.abs(values[i] as number));
    for (let i = start; i < end; i++) {
      const x = values[i] as number;
      const error = Math.abs(x - (decoded[i] as number));
      if (error > bound(x, scale) + ROUNDING * scale) {
        throw new Error(`${codec.name}/B${codec.blockSize}: value ${i} = ${x} decoded ${decoded[i]}, scale ${scale}`);
      }
      if (scale > 0) worst = Math.max(worst, error / scale);
    }
  }
  return worst;
}

for (const [name, { factory, bound, bytes: bytesPerValue }] of Object.entries(BOUNDS)) {
  describe(`${name} codec`, () => {
    it(`defaults to blocks of ${DEFAULT_BLOCK_SIZE} and reports its size`, () => {
      const codec = factory();
      expect(codec.blockSize).toBe(64);
      expect(codec.encodedSize(0)).toBe(0);
      // full blocks: 4 scale bytes + the codes
      expect(codec.encodedSize(64 * 1000) / (64 * 1000)).toBe(bytesPerValue + 4 / 64);
      expect(factory(128).encodedSize(128 * 10) / (128 * 10)).toBe(bytesPerValue + 4 / 128);
      // 1000 = 15 blocks of 64 + one of 40
      expect(codec.encodedSize(1000)).toBe(16 * 4 + Math.ceil(bytesPerValue * 64) * 15 + bytesPerValue * 40);
      for (const n of [0, 1, 63, 64, 65, 1001])
        expect(codec.encode(new Float32Array(n))).toHaveLength(codec.encodedSize(n));
    });

    it('stays within its documented error bound, over block sizes and ragged lengths', () => {
      for (const blockSize of [2, 16, 64, 128]) {
        for (const length of [1, 63, 64, 65, 1001, 5000]) {
          checkBounds(factory(blockSize), gradientLike(length, blockSize * 7919 + length), bound);
        }
      }
    });

    it('encodes all-zero blocks as a zero scale and zero codes', () => {
      const codec = factory(4);
      const values = Float32Array.of(0, 0, 0, 0, 1, 0, -0, 0.5, 0, 0);
      const bytes = codec.encode(values);
      expect([...bytes.subarray(0, codec.encodedSize(4))].every((b) => b === 0)).toBe(true);
      expect(firstDifference(codec.decode(bytes, values.length).subarray(0, 4), [0, 0, 0, 0])).toBe(-1);
      expect(codec.decode(bytes, values.length).subarray(8)).toEqual(new Float32Array(2));
    });

    it('confines a huge value to its own block', () => {
      const codec = factory(8);
      const values = gradientLike(24, 5);
      values[3] = 1e30;
      const decoded = codec.decode(codec.encode(values), values.length);
      expect(decoded[3]).toBe(Math.fround(1e30));
      checkBounds(codec, values, bound); // bounds hold in the huge block, relative to 1e30
      // the other blocks are encoded as if the huge value did not exist
      const alone = codec.decode(codec.encode(values.subarray(8)), 16);
      expect(firstDifference(decoded.subarray(8), alone)).toBe(-1);
    });

    it('lets a block-aligned slice of the encoding stand for the same slice of the values', () => {
      const codec = factory(16);
      const values = gradientLike(16 * 10 + 5, 11);
      const whole = codec.encode(values);
      for (const [start, end] of [
        [0, 48],
        [48, 160],
        [160, 165],
        [32, 165],
      ] as const) {
        const slice = encodedSlice(codec, whole, start, end);
        expect(firstDifference(slice, codec.encode(values.subarray(start, end)))).toBe(-1);
      }
      // off the grid, a slice of the whole would not be the part's encoding
      expect(() => encodedSlice(codec, whole, 8, 48)).toThrow(/block grid/);
    });

    it('is symmetric in sign and byte-exact across calls', () => {
      const codec = factory();
      const values = gradientLike(1000, 3);
      const negated = values.map((x) => -x);
      const decoded = codec.decode(codec.encode(values), 1000);
      const decodedNegated = codec.decode(codec.encode(negated), 1000);
      expect(
        firstDifference(
          decodedNegated,
          decoded.map((x) => 0 - x),
        ),
      ).toBe(-1); // 0 − x: a zero code decodes to +0
      expect(firstDifference(codec.encode(values), codec.encode(values.slice()))).toBe(-1);
    });

    it('decodes from an unaligned offset into a given buffer', () => {
      const codec = factory(6);
      const values = gradientLike(17, 8);
      const encoded = codec.encode(values);
      const framed = new Uint8Array(encoded.length + 3);
      framed.set(encoded, 3);
      const out = new Float32Array(17);
      expect(codec.decode(framed.subarray(3), 17, out)).toBe(out);
      expect(firstDifference(out, codec.decode(encoded, 17))).toBe(-1);
    });

    it('rejects non-finite input, and wrong lengths and bad scales on the wire', () => {
      const codec = factory(4);
      expect(() => codec.encode(Float32Array.of(1, 2, Number.NaN))).toThrow(/non-finite value NaN at index 2/);
      expect(() => codec.encode(Float32Array.of(Number.NEGATIVE_INFINITY))).toThrow(RangeError);
      const bytes = codec.encode(Float32Array.of(1, 2, 3, 4, 5, 6));
      expect(() => codec.decode(bytes.subarray(1), 6)).toThrow(CodecError);
      expect(() => codec.decode(bytes, 2)).toThrow(new RegExp(`${name}: payload has ${bytes.length} bytes, 2 values`));
      for (const [scale, shown] of [
        [Number.NaN, 'NaN'],
        [Number.POSITIVE_INFINITY, 'Infinity'],
        [-1, '-1'],
      ] as const) {
        const bad = bytes.slice();
        new DataView(bad.buffer).setFloat32(codec.encodedSize(4), scale, true); // block 1's scale
        expect(() => codec.decode(bad, 6)).toThrow(
          `${name}: block 1 has scale ${shown} (a scale must be finite and ≥ 0)`,
        );
      }
    });
  });
}

describe('byte layouts', () => {
  // [1, −0.5, 0.25, 0] in one block of 4: the scale is 1.0 = 0x3f800000, little-endian first.
  const values = Float32Array.of(1, -0.5, 0.25, 0);
  const scale = [0x00, 0x00, 0x80, 0x3f];

  it('int8: q = round(x·127) half away from zero, two’s complement', () => {
    // 127, round(−63.5) = −64 = 0xc0, round(31.75) = 32, 0
    expect([...createInt8Codec(4).encode(values)]).toEqual([...scale, 0x7f, 0xc0, 0x20, 0x00]);
  });

  it('int4: sign | round(|x|·7), low nibble first', () => {
    // 7; −round(3.5) = −4 → 0x8 | 4 = 0xc; round(1.75) = 2; 0  →  bytes 0xc7, 0x02
    expect([...createInt4Codec(4).encode(values)]).toEqual([...scale, 0xc7, 0x02]);
  });

  it('fp4: sign | c with |x| = 2^(c−7)·scale, low nibble first', () => {
    // 1 → c 7; −0.5 → 0x8 | 6 = 0xe; 0.25 → 5; 0 → 0  →  bytes 0xe7, 0x05
    expect([...createFp4Codec(4).encode(values)]).toEqual([...scale, 0xe7, 0x05]);
  });

  it('rejects codes the encoder never writes, and a non-zero padding nibble', () => {
    const int8 = createInt8Codec(4);
    expect(() => int8.decode(Uint8Array.of(...scale, 0x80, 0, 0, 0), 4)).toThrow('int8: invalid code -128 at value 0');
    for (const codec of [createInt4Codec(4), createFp4Codec(4)]) {
      expect(() => codec.decode(Uint8Array.of(...scale, 0x80, 0), 4)).toThrow(
        `${codec.name}: invalid code 0x8 at value 1`,
      );
      // 3 values: the high nibble of the second byte is padding
      expect(codec.decode(Uint8Array.of(...scale, 0x11, 0x01), 3)).toHaveLength(3);
      expect(() => codec.decode(Uint8Array.of(...scale, 0x11, 0x11), 3)).toThrow(
        `${codec.name}: padding nibble after value 2 is not 0`,
      );
    }
  });
});

describe('fp4 rounding', () => {
  const codec = createFp4Codec(2);
  const roundTrip = (x: number) => codec.decode(codec.encode(Float32Array.of(1, x)), 2)[1];

  it('represents ±scale·2^-e for e = 0 … 6 exactly, and zero', () => {
    for (let e = 0; e <= 6; e++) {
      expect(roundTrip(2 ** -e)).toBe(2 ** -e);
      expect(roundTrip(-(2 ** -e))).toBe(-(2 ** -e));
    }
    expect(roundTrip(0)).toBe(0);
  });

  it('picks the nearest representable value, ties to the larger magnitude', () => {
    expect(roundTrip(0.74)).toBe(0.5);
    expect(roundTrip(0.75)).toBe(1);
    expect(roundTrip(0.3)).toBe(0.25);
    expect(roundTrip(0.4)).toBe(0.5);
    expect(roundTrip(1 / 128)).toBe(1 / 64);
    expect(roundTrip(0.99 / 128)).toBe(0);
    expect(roundTrip(-0.99 / 128)).toBe(0);
  });
});

describe('measured worst error / absmax (block 64, 100k pseudo-gradient values)', () => {
  it('is close to, and below, each documented bound', () => {
    const values = gradientLike(100_000, 42);
    const worst = Object.fromEntries(
      Object.entries(BOUNDS).map(([name, { factory, bound }]) => [name, checkBounds(factory(), values, bound)]),
    );
    expect(worst.int8).toBeLessThanOrEqual(1 / 254 + ROUNDING);
    expect(worst.int8).toBeGreaterThan(0.9 / 254);
    expect(worst.int4).toBeLessThanOrEqual(1 / 14 + ROUNDING);
    expect(worst.int4).toBeGreaterThan(0.9 / 14);
    expect(worst.fp4).toBeLessThanOrEqual(1 / 4 + ROUNDING);
    expect(worst.fp4).toBeGreaterThan(0.2);
  });
});
