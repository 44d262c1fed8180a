/**
 * The element-wise float codecs: `fp32` (lossless) and `bf16` (16 bits, one rounding).
 *
 * fp32 layout: n × float32 LE. 4n bytes.
 * bf16 layout: n × uint16 LE, each the top half of the value's float32 bits. 2n bytes.
 *
 * Why bf16 rather than fp16: bf16 has float32's exponent range, so every finite Δ has a finite
 * encoding and small Δ (AdamW moves many weights by 1e-6 or less over H steps) keep their relative
 * precision instead of falling into fp16's subnormals below 6e-5 or overflowing past 65504; and
 * float32 → bf16 is exact bit arithmetic, deterministic on every engine without Float16Array
 * (absent in Node 20). The price is precision: 8 significant bits, relative error ≤ 2^-8
 * (fp16: 2^-11 in its normal range), still 30× finer than int8 at a block's absmax.
 *
 * bf16 rounding: round to nearest, ties to even, on the float32 bits. A finite value that would
 * round up to infinity (|x| > 3.3961e38) saturates to the largest finite bf16 instead.
 */
import { assertCount, assertLittleEndianHost, type Codec, checkEncodedLength, throwNonFinite } from './codec.ts';

/** Lossless. 4 bytes per value. */
export function createFp32Codec(): Codec {
  assertLittleEndianHost();
  const codec: Codec = {
    name: 'fp32',
    blockSize: 1,
    encodedSize(count) {
      assertCount('fp32', count);
      return 4 * count;
    },
    encode(values) {
      for (let i = 0; i < values.length; i++) {
        if (!Number.isFinite(values[i])) throwNonFinite('fp32', values, i);
      }
      return new Uint8Array(values.slice().buffer);
    },
    decode(bytes, count, out) {
      const target = checkEncodedLength(codec, bytes, count, out);
      // copy through a Uint8Array view: `bytes` may start at an offset that is not 4-aligned
      new Uint8Array(target.buffer, target.byteOffset, target.byteLength).set(bytes);
      return target;
    },
  };
  return codec;
}

const BF16_MAX_FINITE = 0x7f7f; // 3.3895e38

/** float32 bits → bf16 bits, round to nearest even, saturating at the largest finite bf16. */
export function bf16FromFloat32Bits(bits: number): number {
  const rounded = (bits + 0x7fff + ((bits >>> 16) & 1)) >>> 16;
  const sign = rounded & 0x8000;
  return (rounded & 0x7fff) > BF16_MAX_FINITE ? sign | BF16_MAX_FINITE : rounded & 0xffff;
}

/**
 * 2 bytes per value; |x − decode(encode(x))| ≤ max(2^-8·|x|, 2^-134) for every finite float32 x
 * (the absolute term covers float32 subnormals, where bf16 keeps fewer bits).
 */
export function createBf16Codec(): Codec {
  assertLittleEndianHost();
  const codec: Codec = {
    name: 'bf16',
    blockSize: 1,
    encodedSize(count) {
      assertCount('bf16', count);
      return 2 * count;
    },
    encode(values) {
      const bits = new Uint32Array(values.buffer, values.byteOffset, values.length);
      const halves = new Uint16Array(values.length);
      for (let i = 0; i < values.length; i++) {
        const b = bits[i] as number;
        if ((b & 0x7f800000) === 0x7f800000) throwNonFinite('bf16', values, i); // exponent all ones: Inf or NaN
        halves[i] = bf16FromFloat32Bits(b);
      }
      return new Uint8Array(halves.buffer);
    },
    decode(bytes, count, out) {
      const target = checkEncodedLength(codec, bytes, count, out);
      const bits = new Uint32Array(target.buffer, target.byteOffset, count);
      for (let i = 0; i < count; i++) {
        bits[i] = ((bytes[2 * i] as number) | ((bytes[2 * i + 1] as number) << 8)) << 16;
      }
      return target;
    },
  };
  return codec;
}
