/**
 * fp4's blocks in WebAssembly SIMD: encode (optionally fused with error feedback: c = Δ + r, the
 * codes, r′ = c − decode(codes), one pass after the block's absmax) and decode, eight values a
 * step. Bitwise what blockwise.ts's scalar loops give:
 *
 * - A code is #{j : |x| ≥ cut_j}, cut_j = threshold_j · scale in float64. For a float32 |x|,
 *   |x| ≥ c ⇔ |x| ≥ c↑ where c↑ is the least float32 ≥ c, so the kernel compares in float32
 *   against c↑ (made once per block), seven compares a lane, no branch.
 * - A value is ±2^(c−7) · scale: the power of two is exact, so the float32 product is the
 *   float64 one rounded once, as the scalar decode stores it. c + r and c − x̂ are single float32
 *   operations, which float64-then-round gives exactly too (53 ≥ 2·24 + 2 bits).
 *
 * The kernels take whole blocks of a multiple of 8 values; the caller does a shorter last block
 * and every fault (a non-finite value, a bad code) the scalar way, which also words the error.
 */
import { compileOnce, FunctionBuilder, op, WasmArena } from '@shoal/gpu/simd';

/** Block layout: a float32 scale, then B/2 bytes of codes. */
const SCALE_BYTES = 4;

/** i32x4 lanes [b0 … b3] of the 4 bytes at the address on the stack. */
const loadFourBytes = [op.v128Load32Zero(), op.i16x8ExtendLowI8x16U, op.i32x4ExtendLowI16x8U];

/** Bytes of a ‖ b: i32 lanes (a0, b0, a1, b1) and (a2, b2, a3, b3). */
const INTERLEAVE_LOW = [0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23];
const INTERLEAVE_HIGH = [8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31];

interface NibbleConstants {
  seven: number;
  eight: number;
  bias: number;
  zero: number;
}

function declareConstants(f: FunctionBuilder): NibbleConstants {
  const constant = (value: number) => {
    const local = f.local('v128');
    f.emit(op.i32x4Const(value), op.localSet(local));
    return local;
  };
  return { seven: constant(7), eight: constant(8), bias: constant(120), zero: constant(0) };
}

/** Emits x̂ = ±2^(k−7)·scale (0 for k = 0) for nibbles in local `nibble` into local `out`. */
function emitValue(f: FunctionBuilder, nibble: number, scale: number, out: number, c: NibbleConstants): void {
  const { localGet: get, localSet: set } = op;
  const magnitude = f.local('v128');
  f.emit(get(nibble), get(c.seven), op.v128And, set(magnitude));
  // (k + 120) << 23 is 2^(k − 7)'s float bits; k = 0 is 0; the sign is bit 3 moved to bit 31
  f.emit(get(magnitude), get(c.bias), op.i32x4Add, op.i32Const(23), op.i32x4Shl);
  f.emit(get(magnitude), get(c.zero), op.i32x4Eq, op.v128Andnot);
  f.emit(get(nibble), get(c.eight), op.v128And, op.i32Const(28), op.i32x4Shl, op.v128Or);
  f.emit(get(scale), op.f32x4Mul, set(out));
}

/** fp4Decode(src, dst, blocks, B) → 1 if a code 0x8 was met, else 0; B a multiple of 8. */
function decodeKernel(): FunctionBuilder {
  const f = new FunctionBuilder(
    'fp4Decode',
    [
      ['src', 'i32'],
      ['dst', 'i32'],
      ['blocks', 'i32'],
      ['size', 'i32'],
    ],
    'i32',
  );
  const { localGet: get, localSet: set } = op;
  const { src, dst, blocks, size } = f.params;
  const { b, p, end } = f.named('i32', ['b', 'p', 'end']);
  const { scale, word, low, high, nibble, value, bad } = f.named('v128', [
    'scale',
    'word',
    'low',
    'high',
    'nibble',
    'value',
    'bad',
  ]);
  const c = declareConstants(f);
  f.emit(op.i32x4Const(0), set(bad));
  f.forLoop(b, op.i32Const(0), get(blocks), 1, () => {
    f.emit(get(src), op.f32Load(), op.f32x4Splat, set(scale));
    f.emit(get(src), op.i32Const(SCALE_BYTES), op.i32Add, set(p));
    f.emit(get(p), get(size), op.i32Const(1), op.i32ShrU, op.i32Add, set(end));
    f.emit(op.block, op.loop, get(p), get(end), op.i32GeS, op.brIf(1));
    f.emit(get(p), ...loadFourBytes, set(word));
    f.emit(get(word), op.i32x4Const(15), op.v128And, set(low));
    f.emit(get(word), op.i32Const(4), op.i32x4ShrU, set(high));
    for (const lanes of [INTERLEAVE_LOW, INTERLEAVE_HIGH]) {
      f.emit(get(low), get(high), op.i8x16Shuffle(...lanes), set(nibble));
      f.emit(get(bad), get(nibble), get(c.eight), op.i32x4Eq, op.v128Or, set(bad));
      emitValue(f, nibble, scale, value, c);
      f.emit(get(dst), get(value), op.v128Store(), get(dst), op.i32Const(16), op.i32Add, set(dst));
    }
    f.emit(get(p), op.i32Const(4), op.i32Add, set(p), op.br(0), op.end, op.end);
    f.emit(get(end), set(src));
  });
  f.emit(get(bad), op.v128AnyTrue);
  return f;
}

/**
 * fp4Encode(src, residual, staged, dst, blocks, B) → 0, or 1 + the first block whose absmax is
 * not finite (nothing is to be trusted then). With `feedback`, c = src + residual is encoded and
 * c − x̂ written to `staged`; without, src is encoded and residual and staged are unused.
 */
function encodeKernel(thresholds: Float64Array, feedback: boolean): FunctionBuilder {
  const f = new FunctionBuilder(
    feedback ? 'fp4EncodeFeedback' : 'fp4Encode',
    [
      ['src', 'i32'],
      ['residual', 'i32'],
      ['staged', 'i32'],
      ['dst', 'i32'],
      ['blocks', 'i32'],
      ['size', 'i32'],
    ],
    'i32',
  );
  const { localGet: get, localSet: set } = op;
  const { src, residual, staged, dst, blocks, size } = f.params;
  const { b, i, bytes } = f.named('i32', ['b', 'i', 'bytes']);
  const { absMax, scale } = f.named('f32', ['absMax', 'scale']);
  const scaled = f.local('f64');
  const { x, m, scales, k, nibble, sign, value, packed } = f.named('v128', [
    'x',
    'm',
    'scales',
    'k',
    'nibble',
    'sign',
    'value',
    'packed',
  ]);
  const cutLocals = Array.from(thresholds, () => f.local('v128'));
  const nibbles = [f.local('v128'), f.local('v128')];
  const c = declareConstants(f);
  // c for the block's value at byte offset i: src (+ residual, kept in staged for the second pass)
  const source = feedback ? staged : src;
  f.forLoop(b, op.i32Const(0), get(blocks), 1, () => {
    f.emit(op.f32x4Const(0), set(m));
    f.forLoop(i, op.i32Const(0), [...get(size), ...op.i32Const(2), ...op.i32Shl], 16, () => {
      f.emit(get(src), get(i), op.i32Add, op.v128Load(), set(x));
      if (feedback) {
        f.emit(get(residual), get(i), op.i32Add, op.v128Load(), get(x), op.f32x4Add, set(x));
        f.emit(get(staged), get(i), op.i32Add, get(x), op.v128Store());
      }
      // max propagates NaN, and ∞ stays: a block that is not finite shows in its absmax
      f.emit(get(m), get(x), op.f32x4Abs, op.f32x4Max, set(m));
    });
    f.emit(get(m), op.f32x4ExtractLane(0), get(m), op.f32x4ExtractLane(1), op.f32Max);
    f.emit(get(m), op.f32x4ExtractLane(2), op.f32Max, get(m), op.f32x4ExtractLane(3), op.f32Max, set(absMax));
    f.emit(get(absMax), get(absMax), op.f32Sub, op.f32Const(0), op.f32Ne, op.if);
    f.emit(get(b), op.i32Const(1), op.i32Add, op.return, op.end);
    f.emit(get(dst), get(absMax), op.f32Store(), get(dst), op.i32Const(SCALE_BYTES), op.i32Add, set(dst));
    f.emit(get(absMax), op.f32x4Splat, set(scales));
    // cut_j rounded up to float32 (see the file comment); a zero scale: no |x| reaches any cut
    for (const [j, threshold] of thresholds.entries()) {
      f.emit(op.f64Const(threshold), get(absMax), op.f64PromoteF32, op.f64Mul, set(scaled));
      f.emit(get(scaled), op.f32DemoteF64, set(scale));
      f.emit(get(scale), op.f64PromoteF32, get(scaled), op.f64Lt, op.if);
      f.emit(get(scale), op.i32ReinterpretF32, op.i32Const(1), op.i32Add, op.f32ReinterpretI32, set(scale), op.end);
      f.emit(op.f32Const(Number.POSITIVE_INFINITY), get(scale), get(absMax), op.f32Const(0), op.f32Eq, op.select);
      f.emit(op.f32x4Splat, set(cutLocals[j] as number));
    }
    f.emit(op.i32Const(0), set(bytes));
    f.forLoop(i, op.i32Const(0), [...get(size), ...op.i32Const(2), ...op.i32Shl], 32, () => {
      for (const [half, n] of nibbles.entries()) {
        f.emit(get(source), get(i), op.i32Add, op.v128Load(16 * half), set(x));
        f.emit(op.i32x4Const(0), set(k));
        for (const cl of cutLocals) f.emit(get(k), get(x), op.f32x4Abs, get(cl), op.f32x4Ge, op.i32x4Sub, set(k));
        f.emit(get(x), op.f32x4Const(0), op.f32x4Lt, get(k), get(c.zero), op.i32x4Ne, op.v128And);
        f.emit(get(c.eight), op.v128And, set(sign));
        f.emit(get(k), get(sign), op.v128Or, set(nibble), get(nibble), set(n));
        if (feedback) {
          emitValue(f, nibble, scales, value, c);
          f.emit(get(staged), get(i), op.i32Add, get(x), get(value), op.f32x4Sub, op.v128Store(16 * half));
        }
      }
      // lane pairs (v0, v1) of each 64-bit half into one byte v0 | v1 << 4, then 4 bytes out
      const [first, second] = nibbles as [number, number];
      f.emit(get(first), get(first), op.i32Const(28), op.i64x2ShrU, op.v128Or, set(packed));
      f.emit(get(second), get(second), op.i32Const(28), op.i64x2ShrU, op.v128Or);
      f.emit(get(packed), op.i8x16Shuffle(16, 24, 0, 8, ...new Array(12).fill(0)), set(packed));
      f.emit(get(dst), get(bytes), op.i32Add, get(packed), op.v128Store32Lane(0));
      f.emit(get(bytes), op.i32Const(4), op.i32Add, set(bytes));
    });
    f.emit(get(dst), get(bytes), op.i32Add, set(dst));
    const advance = [...get(size), ...op.i32Const(2), ...op.i32Shl, ...op.i32Add];
    f.emit(get(src), advance, set(src));
    if (feedback) f.emit(get(residual), advance, set(residual), get(staged), advance, set(staged));
  });
  f.emit(op.i32Const(0));
  return f;
}

interface Fp4Exports {
  fp4Decode(src: number, dst: number, blocks: number, size: number): number;
  fp4Encode(src: number, residual: number, staged: number, dst: number, blocks: number, size: number): number;
  fp4EncodeFeedback(src: number, residual: number, staged: number, dst: number, blocks: number, size: number): number;
}

/**
 * The kernels of one threshold table (fp4's), on a per-process arena that operands are copied
 * into; null where WebAssembly SIMD is missing (the scalar loops serve then).
 */
export class Fp4Kernels {
  private constructor(
    private readonly arena: WasmArena,
    private readonly kernels: Fp4Exports,
  ) {}

  private static made: Fp4Kernels | null | undefined;

  static get(thresholds: Float64Array): Fp4Kernels | null {
    if (Fp4Kernels.made === undefined) {
      const family = compileOnce(() => [
        decodeKernel(),
        encodeKernel(thresholds, false),
        encodeKernel(thresholds, true),
      ]);
      const arena = family() ? WasmArena.create() : null;
      Fp4Kernels.made = arena ? new Fp4Kernels(arena, arena.exportsOf<Fp4Exports>(family)) : null;
    }
    return Fp4Kernels.made;
  }

  /** Places bytes in scratch; returns their address. */
  private placeBytes(bytes: Uint8Array): number {
    const at = this.arena.scratch(Math.ceil(bytes.length / 4));
    new Uint8Array(this.arena.memory.buffer, at, bytes.length).set(bytes);
    return at;
  }

  /**
   * Decodes `blocks` whole blocks of `size` values from `bytes` into target[0 …); false (target
   * partly written) when a code 0x8 is among them. Scales are the caller's to check.
   */
  decode(bytes: Uint8Array, blocks: number, size: number, target: Float32Array): boolean {
    const { arena } = this;
    arena.resetScratch();
    const n = blocks * size;
    const src = this.placeBytes(bytes.subarray(0, blocks * (SCALE_BYTES + size / 2)));
    const dst = arena.scratch(n);
    if (this.kernels.fp4Decode(src, dst, blocks, size) !== 0) return false;
    target.set(arena.f32.subarray(dst >> 2, (dst >> 2) + n));
    return true;
  }

  /**
   * Encodes the whole blocks of `values` (blocks · size of them) into bytes[0 …), or, with a
   * residual, values + residual, writing (values + residual) − decoded into `staged`. False
   * (outputs partly written) when a block is not finite.
   */
  encode(
    values: Float32Array,
    blocks: number,
    size: number,
    bytes: Uint8Array,
    feedback?: { residual: Float32Array; staged: Float32Array },
  ): boolean {
    const { arena } = this;
    arena.resetScratch();
    const n = blocks * size;
    const src = arena.place(values, 1, n);
    const residual = feedback ? arena.place(feedback.residual, 1, n) : 0;
    const staged = feedback ? arena.scratch(n) : 0;
    const byteCount = blocks * (SCALE_BYTES + size / 2);
    const dst = arena.scratch(Math.ceil(byteCount / 4));
    const run = feedback ? this.kernels.fp4EncodeFeedback : this.kernels.fp4Encode;
    if (run(src, residual, staged, dst, blocks, size) !== 0) return false;
    bytes.set(new Uint8Array(arena.memory.buffer, dst, byteCount));
    if (feedback) feedback.staged.set(arena.f32.subarray(staged >> 2, (staged >> 2) + n));
    return true;
  }
}
