/**
 * What every codec promises, and the checks they share.
 *
 * A codec turns a fragment's (or a shard's) contiguous Float32Array into bytes for the wire and
 * back. Encodings are byte-exact: the same values give the same bytes on every engine, and the
 * layouts (documented in each codec's file) are little-endian. Blockwise codecs put each block's
 * scale in front of that block's payload, so for any split at a multiple of `blockSize` the
 * encoding of the part is the matching slice of the whole encoding, starting at
 * `encodedSize(start)`: a shard owner's bytes can be cut out of one encoding of the fragment.
 *
 * Encoders are for honest senders and throw on a non-finite input (a worker whose Δ holds NaN
 * has diverged and must not contribute). Decoders face the wire: they check the length, every
 * scale (finite and ≥ 0) and every code, and throw a CodecError naming the first fault. Values
 * of the float codecs are passed through as they are; aggregation rejects non-finite ones.
 */

/** The codecs, in the order the wire numbers them (@shoal/protocol's CODEC_IDS). */
export const CODEC_NAMES = ['fp32', 'bf16', 'int8', 'int4', 'fp4'] as const;

export type CodecName = (typeof CODEC_NAMES)[number];

export interface Codec {
  readonly name: CodecName;
  /**
   * Values that share one scale; 1 for the element-wise float codecs. It is also the grid any
   * split must fall on: a part that starts at a multiple of it encodes to the matching slice of
   * the whole's encoding (encodedSlice), so shard boundaries are multiples of it.
   */
  readonly blockSize: number;
  /** Bytes that `count` values encode to. */
  encodedSize(count: number): number;
  /** Encodes all of `values`; throws a RangeError on a non-finite value. */
  encode(values: Float32Array): Uint8Array;
  /**
   * Decodes `count` values (the count comes from the round, not from the bytes), into `out` when
   * given. Throws a CodecError on a wrong length, a bad scale or an impossible code.
   */
  decode(bytes: Uint8Array, count: number, out?: Float32Array): Float32Array;
  /**
   * Error feedback in one pass where the codec has it (fp4 in WebAssembly SIMD): encodes
   * c = values + residual, writes c − decode(bytes) into `staged` and returns the bytes, exactly
   * what ErrorFeedback's three steps give; null when it cannot (a non-finite c: the three steps
   * word the error).
   */
  encodeWithFeedback?(values: Float32Array, residual: Float32Array, staged: Float32Array): Uint8Array | null;
  /**
   * A bound on |value| of every value these bytes decode to, read off the encoding alone (the
   * blockwise codecs: the largest scale, as every code is a multiple ≤ 1 of its block's scale),
   * so a bound check can skip the values; call it on bytes that decoded. Absent: no such bound.
   */
  decodedBound?(bytes: Uint8Array, count: number): number;
}

/** Malformed encoded bytes: the message names the codec and the first fault. */
export class CodecError extends Error {
  override name = 'CodecError';
}

/**
 * The encoding of values [start, end) cut out of `encoded`, one encoding of all the values:
 * `start` must lie on the codec's block grid, and `end` on it too or at the end of the values.
 */
export function encodedSlice(codec: Codec, encoded: Uint8Array, start: number, end: number): Uint8Array {
  if (start % codec.blockSize !== 0) {
    throw new RangeError(`${codec.name}: a slice starts on the ${codec.blockSize}-value block grid, not at ${start}`);
  }
  return encoded.subarray(codec.encodedSize(start), codec.encodedSize(end));
}

/** Typed-array fast paths read and write host byte order; every platform we target is little-endian. */
export function assertLittleEndianHost(): void {
  if (new Uint8Array(Uint16Array.of(1).buffer)[0] !== 1) {
    throw new Error('Shoal codecs need a little-endian host (the wire is little-endian)');
  }
}

export function assertCount(codec: CodecName, count: number): void {
  if (!Number.isSafeInteger(count) || count < 0) {
    throw new RangeError(`${codec}: value count must be an integer ≥ 0, got ${count}`);
  }
}

/** The decoder's first check: the byte length is exactly what `count` values encode to. */
export function checkEncodedLength(codec: Codec, bytes: Uint8Array, count: number, out?: Float32Array): Float32Array {
  assertCount(codec.name, count);
  const expected = codec.encodedSize(count);
  if (bytes.length !== expected) {
    throw new CodecError(`${codec.name}: payload has ${bytes.length} bytes, ${count} values need ${expected}`);
  }
  const target = out ?? new Float32Array(count);
  if (target.length !== count) throw new RangeError(`${codec.name}: output holds ${target.length}, need ${count}`);
  return target;
}

export function throwNonFinite(codec: CodecName, values: Float32Array, index: number): never {
  throw new RangeError(`${codec}: cannot encode non-finite value ${values[index]} at index ${index}`);
}

/** max |values[start … end)|, throwing on a non-finite value. */
export function blockAbsMax(codec: CodecName, values: Float32Array, start: number, end: number): number {
  let absMax = 0;
  for (let i = start; i < end; i++) {
    const a = Math.abs(values[i] as number);
    if (!(a <= Number.MAX_VALUE)) throwNonFinite(codec, values, i); // NaN fails every comparison
    if (a > absMax) absMax = a;
  }
  return absMax;
}

/** A scale read off the wire must be finite and ≥ 0 (−0 allowed). */
export function checkScale(codec: CodecName, scale: number, block: number): void {
  if (!(scale >= 0 && scale <= Number.MAX_VALUE)) {
    throw new CodecError(`${codec}: block ${block} has scale ${scale} (a scale must be finite and ≥ 0)`);
  }
}

/** Block size for the blockwise codecs: even (two 4-bit values share a byte), 2 … 65536. */
export function checkBlockSize(blockSize: number): number {
  if (!Number.isInteger(blockSize) || blockSize < 2 || blockSize > 65536 || blockSize % 2 !== 0) {
    throw new RangeError(`Codec block size must be an even integer from 2 to 65536, got ${blockSize}`);
  }
  return blockSize;
}

/** Rounds half away from zero, so that −x encodes to the negation of x's code. */
export function roundHalfAway(v: number): number {
  const r = Math.floor(Math.abs(v) + 0.5);
  return v < 0 ? -r : r;
}
