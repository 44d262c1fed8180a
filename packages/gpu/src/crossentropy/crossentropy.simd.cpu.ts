/**
 * Fused softmax + cross-entropy for the CPU backend in WebAssembly SIMD: crossentropy.cpu.ts's
 * two passes with a vector exp (Cephes' expf, simd/wasm.cpu.ts) in place of Math.exp, which costs
 * ≈11 ns a value in V8: the JS kernels spent ≈3.5 ms on each pass over a nano step's 1,024 × 256
 * logits. One kernel does a row's max, Σ exp(x − max) and, for the backward, the scaled
 * softmax; the log and the target's correction stay in JS (once per row). Needs V a multiple of
 * 16 (the model's 256); `supports` says when.
 */
import type { WasmArena } from '../simd/arena.cpu.ts';
import { compileOnce, declareExpConstants, emitExp, emitHorizontal, FunctionBuilder, op } from '../simd/wasm.cpu.ts';

/**
 * softmaxRows(src, dst, dstStride, stats, N, V, scale, normalise): for each of N rows of V floats
 * at src, dst row = e^(x − max) (times scale / Σ when normalise ≠ 0), stats[2r, 2r+1] = max, Σ.
 * Addresses and dstStride in bytes (dstStride 0 reuses one row: the forward needs only Σ).
 */
function softmaxRowsKernel(): FunctionBuilder {
  const f = new FunctionBuilder('softmaxRows', [
    ['src', 'i32'],
    ['dst', 'i32'],
    ['dstStride', 'i32'],
    ['stats', 'i32'],
    ['N', 'i32'],
    ['V', 'i32'],
    ['scale', 'f32'],
    ['normalise', 'i32'],
  ]);
  const { localGet: get, localSet: set, i32Add: add, i32Mul: mul, i32Const: int } = op;
  const { src, dst, dstStride, stats, N, V, scale, normalise } = f.params;
  const { r, j, rowBytes, row, out } = f.named('i32', ['r', 'j', 'rowBytes', 'row', 'out']);
  const { max, sum } = f.named('f32', ['max', 'sum']);
  const { acc, factor } = f.named('v128', ['acc', 'factor']);
  const lanes = Array.from({ length: UNROLL }, (_, u) => ({ offset: 16 * u, x: f.local('v128'), e: f.local('v128') }));
  const constants = declareExpConstants(f);
  f.emit(get(V), int(4), mul, set(rowBytes));
  f.forLoop(r, int(0), get(N), 1, () => {
    f.emit(get(src), get(r), get(rowBytes), mul, add, set(row));
    f.emit(get(dst), get(r), get(dstStride), mul, add, set(out));
    // max
    f.emit(op.f32x4Const(Number.NEGATIVE_INFINITY), set(acc));
    f.forLoop(j, int(0), get(rowBytes), 16, () => {
      f.emit(get(acc), get(row), get(j), add, op.v128Load(), op.f32x4Pmax, set(acc));
    });
    emitHorizontal(f, acc, 'max');
    f.emit(set(max));
    // e^(x − max) into dst, and Σ
    f.emit(op.f32x4Const(0), set(acc));
    f.forLoop(j, int(0), get(rowBytes), 16 * UNROLL, () => {
      for (const { offset, x, e } of lanes) {
        f.emit(get(row), get(j), add, op.v128Load(offset), get(max), op.f32x4Splat, op.f32x4Sub, set(x));
        emitExp(f, x, e, constants);
        f.emit(get(out), get(j), add, get(e), op.v128Store(offset), get(acc), get(e), op.f32x4Add, set(acc));
      }
    });
    emitHorizontal(f, acc, 'add');
    f.emit(set(sum));
    f.emit(get(stats), get(r), int(8), mul, add, get(max), op.f32Store(0));
    f.emit(get(stats), get(r), int(8), mul, add, get(sum), op.f32Store(4));
    // dst ·= scale / Σ
    f.emit(get(normalise), op.if);
    f.emit(get(scale), get(sum), op.f32Div, op.f32x4Splat, set(factor));
    f.forLoop(j, int(0), get(rowBytes), 16, () => {
      f.emit(get(out), get(j), add, get(out), get(j), add, op.v128Load(), get(factor), op.f32x4Mul, op.v128Store());
    });
    f.emit(op.end);
  });
  return f;
}

/**
 * Vectors per iteration of the exp loop: independent exps side by side let the core overlap their
 * dependency chains (as in gelu.simd.cpu.ts): 0.63 → 0.5 ms for 1,024 × 256 logits. Rows must
 * hold a multiple of 4·UNROLL logits.
 */
const UNROLL = 4;

const softmaxModule = compileOnce(() => [softmaxRowsKernel()]);

interface SoftmaxExports {
  softmaxRows(
    src: number,
    dst: number,
    dstStride: number,
    stats: number,
    N: number,
    V: number,
    scale: number,
    normalise: number,
  ): void;
}

/** Cross-entropy forward and backward on a WasmArena (logits outside it are copied in and out). */
export class SimdCrossEntropy {
  private readonly kernels: SoftmaxExports;

  private constructor(private readonly arena: WasmArena) {
    this.kernels = arena.exportsOf<SoftmaxExports>(softmaxModule);
  }

  /** The kernels on `arena`, or null where WebAssembly SIMD is unavailable. */
  static create(arena: WasmArena): SimdCrossEntropy | null {
    return softmaxModule(arena.shared) ? new SimdCrossEntropy(arena) : null;
  }

  /** Whether rows of V logits suit the kernel (V a multiple of 4·UNROLL = 16). */
  static supports(V: number): boolean {
    return V % (4 * UNROLL) === 0;
  }

  /** Scratch floats a call with N rows of V needs, logits copied in. */
  static scratchFloats(N: number, V: number): number {
    return N * V + V + 2 * N + 12;
  }

  /** losses[r] = −log softmax(logits[r])[targets[r]]; returns the mean, as crossEntropyForward. */
  forward(losses: Float32Array, logits: Float32Array, targets: Int32Array, N: number, V: number): number {
    const arena = this.arena;
    arena.resetScratch();
    const logitsAt = arena.place(logits, N, V);
    const row = arena.scratch(V);
    const stats = arena.scratch(2 * N);
    this.kernels.softmaxRows(logitsAt, row, 0, stats, N, V, 1, 0);
    const f32 = arena.f32;
    let total = 0;
    for (let r = 0; r < N; r++) {
      const max = f32[(stats >> 2) + 2 * r] as number;
      const sum = f32[(stats >> 2) + 2 * r + 1] as number;
      const loss = Math.log(sum) - ((f32[(logitsAt >> 2) + r * V + (targets[r] as number)] as number) - max);
      losses[r] = loss;
      total += loss;
    }
    return total / N;
  }

  /** dlogits = (softmax(logits) − onehot)·scale, overwritten; may be logits itself, as crossEntropyBackward. */
  backward(
    dlogits: Float32Array,
    logits: Float32Array,
    targets: Int32Array,
    N: number,
    V: number,
    scale = 1 / N,
  ): void {
    const arena = this.arena;
    arena.resetScratch();
    const logitsAt = arena.place(logits, N, V);
    const dlogitsAt = dlogits === logits ? logitsAt : arena.output(dlogits, N * V);
    const stats = arena.scratch(2 * N);
    this.kernels.softmaxRows(logitsAt, dlogitsAt, 4 * V, stats, N, V, scale, 1);
    const f32 = arena.f32;
    for (let r = 0; r < N; r++) {
      const at = (dlogitsAt >> 2) + r * V + (targets[r] as number);
      f32[at] = (f32[at] as number) - scale;
    }
    arena.copyOut(dlogits, dlogitsAt, N, V);
  }
}
