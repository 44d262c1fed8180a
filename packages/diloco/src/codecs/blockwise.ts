/**
 * Blockwise codecs: the values are cut into blocks of B (the last one may be shorter), and each
 * block is stored as its scale followed by one small code per value.
 *
 * Layout, block after block: scale (float32 LE, the block's max |x|), then the block's codes.
 *   int8: one byte per value, a two's-complement q in −127 … 127; x̂ = q/127 · scale.
 *         Bytes: 4·⌈n/B⌉ + n. |x − x̂| ≤ scale/254 (+ float32 rounding of x̂, ≤ 2^-24·scale).
 *   int4: two values per byte, value 2i in the low nibble and 2i+1 in the high nibble of byte i
 *         (counted from the block's start); an odd-length last block leaves the last high nibble 0.
 *         A nibble is sign (bit 3) | magnitude k in 0 … 7; x̂ = ±k/7 · scale.
 *         Bytes: Σ_blocks (4 + ⌈len/2⌉), i.e. 0.5 + 4/B per value. |x − x̂| ≤ scale/14 (+ rounding).
 *   fp4:  (E3M0) nibbles packed as for int4: sign (bit 3) | a 3-bit exponent code c:
 *         c = 0 → x̂ = 0; c = 1 … 7 → x̂ = ±2^(c−7) · scale, i.e. ±scale·{1/64, 1/32, …, 1/2, 1}.
 *         Encoding picks the nearest representable value (ties to the larger magnitude), so
 *         |x − x̂| ≤ max(|x|/3, scale/128) ≤ scale/4. Same size as int4. Coarser than int4 near the
 *         absmax but far finer for small values (relative error ≤ 1/3 down to scale/64).
 * Codes the encoder never writes are rejected by the decoder: int8 0x80 (−128), and nibble 0x8
 * (a negative zero) in int4 and fp4. A zero scale means an all-zero block (every code 0).
 *
 * Quantisation is deterministic round-to-nearest, ties away from zero (int4 and fp4 compare |x|
 * against a table of midpoints, see NibbleFormat): biased on its own, which error feedback
 * (error-feedback.ts) corrects over rounds.
 */
import {
  assertCount,
  blockAbsMax,
  type Codec,
  CodecError,
  checkBlockSize,
  checkEncodedLength,
  checkScale,
  roundHalfAway,
} from './codec.ts';
import { Fp4Kernels } from './fp4.simd.ts';

export const DEFAULT_BLOCK_SIZE = 64;

const SCALE_BYTES = 4;

/**
 * One blockwise format: how many code bytes a block of n values takes, and how a block's codes
 * are written and read, given the block's scale (the loop over blocks and the scales are shared).
 */
interface BlockFormat {
  name: 'int8' | 'int4' | 'fp4';
  codeBytes(values: number): number;
  /** Writes the codes of values[start … end) from bytes[at]; the buffer is zeroed. */
  encodeBlock(values: Float32Array, start: number, end: number, scale: number, bytes: Uint8Array, at: number): void;
  /** Reads the codes at bytes[at] into target[start … end); throws a CodecError on a bad code. */
  decodeBlock(bytes: Uint8Array, at: number, start: number, end: number, scale: number, target: Float32Array): void;
}

/**
 * Whole blocks the fast way (fp4.simd.ts): false where the scalar loops must run instead (a
 * fault, which they word). Takes block sizes that are multiples of 8.
 */
interface FastBlocks {
  encode(
    values: Float32Array,
    blocks: number,
    size: number,
    bytes: Uint8Array,
    feedback?: { residual: Float32Array; staged: Float32Array },
  ): boolean;
  decode(bytes: Uint8Array, blocks: number, size: number, target: Float32Array): boolean;
}

function createBlockwiseCodec(format: BlockFormat, blockSize: number, fastBlocks: FastBlocks | null = null): Codec {
  const B = checkBlockSize(blockSize);
  const { name, codeBytes } = format;
  const fast = B % 8 === 0 ? fastBlocks : null;
  /** Encodes the blocks from value `from` (a block boundary) on, the scalar way. */
  const encodeFrom = (values: Float32Array, bytes: Uint8Array, from: number) => {
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    let at = codec.encodedSize(from);
    for (let start = from; start < values.length; start += B) {
      const end = Math.min(start + B, values.length);
      const scale = blockAbsMax(name, values, start, end);
      view.setFloat32(at, scale, true);
      at += SCALE_BYTES;
      format.encodeBlock(values, start, end, scale, bytes, at);
      at += codeBytes(end - start);
    }
  };
  /** Decodes the blocks from value `from` on, the scalar way (checking every scale and code). */
  const decodeFrom = (bytes: Uint8Array, count: number, target: Float32Array, from: number) => {
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    let at = codec.encodedSize(from);
    for (let start = from; start < count; start += B) {
      const end = Math.min(start + B, count);
      const scale = view.getFloat32(at, true);
      checkScale(name, scale, start / B);
      at += SCALE_BYTES;
      format.decodeBlock(bytes, at, start, end, scale, target);
      at += codeBytes(end - start);
    }
  };
  /** Whether every whole block's scale is finite and ≥ 0 (else the scalar decode words the fault). */
  const scalesValid = (bytes: Uint8Array, blocks: number) => {
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    const stride = SCALE_BYTES + codeBytes(B);
    for (let b = 0; b < blocks; b++) {
      const scale = view.getFloat32(b * stride, true);
      if (!(scale >= 0 && scale <= Number.MAX_VALUE)) return false;
    }
    return true;
  };
  const codec: Codec = {
    name,
    blockSize: B,
    decodedBound(bytes, count) {
      const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
      const stride = SCALE_BYTES + codeBytes(B);
      let largest = 0;
      for (let at = 0; at < codec.encodedSize(count); at += stride) {
        const scale = view.getFloat32(at, true);
        if (!(scale <= largest)) largest = scale > largest ? scale : Number.NaN;
      }
      return largest;
    },
    encodedSize(count) {
      assertCount(name, count);
      const full = Math.floor(count / B);
      const rest = count - full * B;
      return full * (SCALE_BYTES + codeBytes(B)) + (rest > 0 ? SCALE_BYTES + codeBytes(rest) : 0);
    },
    encode(values) {
      const bytes = new Uint8Array(codec.encodedSize(values.length));
      const full = Math.floor(values.length / B);
      const done = fast && full > 0 && fast.encode(values, full, B, bytes) ? full * B : 0;
      encodeFrom(values, bytes, done);
      return bytes;
    },
    decode(bytes, count, out) {
      const target = checkEncodedLength(codec, bytes, count, out);
      const full = Math.floor(count / B);
      const done = fast && full > 0 && scalesValid(bytes, full) && fast.decode(bytes, full, B, target) ? full * B : 0;
      decodeFrom(bytes, count, target, done);
      return target;
    },
  };
  if (fast) {
    codec.encodeWithFeedback = (values, residual, staged) => {
      const bytes = new Uint8Array(codec.encodedSize(values.length));
      const full = Math.floor(values.length / B);
      if (full > 0 && !fast.encode(values, full, B, bytes, { residual, staged })) return null;
      // the last, shorter block the scalar way, as ErrorFeedback would
      const start = full * B;
      if (start === values.length) return bytes;
      for (let i = start; i < values.length; i++) staged[i] = (values[i] as number) + (residual[i] as number);
      encodeFrom(staged, bytes, start);
      const decoded = new Float32Array(values.length - start);
      const at = codec.encodedSize(start) + SCALE_BYTES;
      const scale = new DataView(bytes.buffer).getFloat32(at - SCALE_BYTES, true);
      format.decodeBlock(bytes, at, 0, decoded.length, scale, decoded);
      for (let i = start; i < values.length; i++) staged[i] = (staged[i] as number) - (decoded[i - start] as number);
      return bytes;
    };
  }
  return codec;
}

/** int8: one byte per value, q = round(x · 127/scale). */
const INT8: BlockFormat = {
  name: 'int8',
  codeBytes: (values) => values,
  encodeBlock(values, start, end, scale, bytes, at) {
    const perUnit = scale > 0 ? 127 / scale : 0;
    for (let i = start; i < end; i++) {
      const q = Math.max(-127, Math.min(127, roundHalfAway((values[i] as number) * perUnit)));
      bytes[at++] = q & 0xff;
    }
  },
  decodeBlock(bytes, at, start, end, scale, target) {
    const step = scale / 127;
    for (let i = start; i < end; i++) {
      const byte = bytes[at++] as number;
      if (byte === 0x80) throw new CodecError(`int8: invalid code -128 at value ${i}`);
      target[i] = (byte < 128 ? byte : byte - 256) * step;
    }
  },
};

export function createInt8Codec(blockSize = DEFAULT_BLOCK_SIZE): Codec {
  return createBlockwiseCodec(INT8, blockSize);
}

/**
 * A 4-bit format: nibble = sign (bit 3) | magnitude code k in 0 … 7. Encoding picks
 * k = #{j : |x| ≥ thresholds[j]·scale}, i.e. the nearest of the 8 magnitudes with ties to the
 * larger; one table drives both int4 and fp4, so the encode loop has no per-format branch.
 */
interface NibbleFormat {
  name: 'int4' | 'fp4';
  /** 16 decoded multiples of the scale, indexed by nibble (NaN: a code never written). */
  multipliers: Float64Array;
  /** 7 ascending multiples of the scale: the midpoints between consecutive magnitudes. */
  thresholds: Float64Array;
}

function nibbleFormat(name: NibbleFormat['name'], magnitude: (code: number) => number): NibbleFormat {
  const multipliers = new Float64Array(16);
  const thresholds = new Float64Array(7);
  for (let code = 0; code < 8; code++) {
    multipliers[code] = magnitude(code);
    multipliers[code | 8] = code === 0 ? Number.NaN : -magnitude(code);
    if (code > 0) thresholds[code - 1] = (magnitude(code - 1) + magnitude(code)) / 2;
  }
  return { name, multipliers, thresholds };
}

/** k/7: thresholds (k − ½)/7. */
const INT4 = nibbleFormat('int4', (k) => k / 7);

/** 0, then 2^(c−7): thresholds 1/128, then 1.5·2^(c−8) (exact in binary, so ties are exact). */
const FP4 = nibbleFormat('fp4', (c) => (c === 0 ? 0 : 2 ** (c - 7)));

/** sign | k, k = how many of the 7 ascending cuts |x| reaches (a 3-step binary search). */
function nibbleOf(x: number, cut: Float64Array): number {
  const a = Math.abs(x);
  let k = a >= (cut[3] as number) ? 4 : 0;
  if (a >= (cut[k + 1] as number)) k += 2;
  if (a >= (cut[k] as number)) k += 1;
  return k !== 0 && x < 0 ? k | 8 : k;
}

/** A nibble format's block coding; `cut` is its scratch (thresholds × the block's scale). */
function nibbleBlocks(format: NibbleFormat): BlockFormat {
  const { name, multipliers, thresholds } = format;
  const cut = new Float64Array(7);
  return {
    name,
    codeBytes: (values) => Math.ceil(values / 2),
    encodeBlock(values, start, end, scale, bytes, at) {
      if (scale === 0) return; // all codes 0
      for (let j = 0; j < 7; j++) cut[j] = (thresholds[j] as number) * scale;
      for (let i = start; i < end; i += 2) {
        const low = nibbleOf(values[i] as number, cut);
        const high = i + 1 < end ? nibbleOf(values[i + 1] as number, cut) : 0;
        bytes[at++] = low | (high << 4);
      }
    },
    decodeBlock(bytes, at, start, end, scale, target) {
      for (let i = start; i < end; i++) {
        const byte = bytes[at + ((i - start) >> 1)] as number;
        const nibble = (i - start) & 1 ? byte >> 4 : byte & 0xf;
        const multiplier = multipliers[nibble] as number;
        if (Number.isNaN(multiplier)) throw new CodecError(`${name}: invalid code 0x8 at value ${i}`);
        target[i] = multiplier * scale;
      }
      if ((end - start) & 1 && (bytes[at + ((end - start) >> 1)] as number) >> 4 !== 0) {
        throw new CodecError(`${name}: padding nibble after value ${end - 1} is not 0`);
      }
    },
  };
}

export function createInt4Codec(blockSize = DEFAULT_BLOCK_SIZE): Codec {
  return createBlockwiseCodec(nibbleBlocks(INT4), blockSize);
}

/** fp4's midpoints (7 ascending multiples of the scale), for its SIMD kernels. */
export const FP4_THRESHOLDS: Float64Array = FP4.thresholds;

/** `simd: false` keeps to the scalar loops (the reference the SIMD kernels are tested against). */
export function createFp4Codec(blockSize = DEFAULT_BLOCK_SIZE, options: { simd?: boolean } = {}): Codec {
  const fast = options.simd === false ? null : Fp4Kernels.get(FP4.thresholds);
  return createBlockwiseCodec(nibbleBlocks(FP4), blockSize, fast);
}
