/**
 * Causal self-attention for the CPU backend in WebAssembly SIMD: attention.cpu.ts's products as
 * matmuls per (batch, head) on SimdMatmul's gemm, the softmax and its backward in small SIMD
 * kernels. The JS reference walks one (t, t2) pair at a time with a Math.exp each (≈1 GFLOP/s,
 * 30–50% of a nano step once the matmuls were SIMD); this is ≈8× faster. Per (b, h), with
 * Q, K, V, dY the head's [T, hs] slices (rows 3C or C floats apart, used in place):
 *
 *   forward:  S = Q·(K/√hs)ᵀ → preatt    P = causal softmax(S) → att    Y = P·V → out
 *   backward: dP = dY·Vᵀ → datt           dV += Pᵀ·dY
 *             dS = P ⊙ (dP − Σ_t2 P·dP) / √hs → dpreatt                 dQ += dS·K   dK += dSᵀ·Q
 *
 * The two products with a transposed operand (Kᵀ, Vᵀ) take it from a [hs, T] scratch copy, so
 * every gemm streams contiguous rows. The products are causal: they run in blocks of ROW_BLOCK
 * query rows, each over the keys its rows can see (and dV, dK over the queries that see a key
 * block), so the masked half of the square is skipped in forward and backward alike. Each (b, h)
 * is one task of kernel calls with its own scratch, and the tasks are spread over the matmul's
 * threads (KernelThreads): a head's results never depend on which thread ran it. Differences from the reference, all in
 * the scratch it documents as such: preatt holds scores only on and below the diagonal (what
 * lies above is unspecified), and dpreatt holds the gradient with respect to q·k (the reference's
 * dpreatt times 1/√hs), 0 on masked keys.
 *
 * Needs T and hs multiples of 4 (`supports`; the caller runs the JS reference otherwise) and
 * every operand in the arena (CpuGpt's activations are; others are refused, not copied).
 */
import type { SimdMatmul } from '../matmul/matmul.simd.cpu.ts';
import type { WasmArena } from '../simd/arena.cpu.ts';
import type { KernelCall, KernelThreads } from '../simd/threads.cpu.ts';
import {
  compileOnce,
  declareExpConstants,
  emitExp,
  emitHorizontal,
  FunctionBuilder,
  type ModuleFamily,
  op,
} from '../simd/wasm.cpu.ts';

/**
 * softmaxCausal(s, p, T): for each row t of the [T, T] block at s, p row = softmax(s[t, 0…t]),
 * zeros after. Vectors of 4 cover keys 0…t; the last one, which may reach past t, is masked
 * (−∞ for the max, 0 after the exp).
 */
function softmaxCausalKernel(): FunctionBuilder {
  const f = new FunctionBuilder('softmaxCausal', [
    ['s', 'i32'],
    ['p', 'i32'],
    ['T', 'i32'],
  ]);
  const { localGet: get, localSet: set, i32Add: add, i32Mul: mul, i32Const: int } = op;
  const { s, p, T } = f.params;
  const { t, j, rowBytes, rowS, rowP, full, rest } = f.named('i32', [
    't',
    'j',
    'rowBytes',
    'rowS',
    'rowP',
    'full',
    'rest',
  ]);
  const { acc, x, e, mask, max } = f.named('v128', ['acc', 'x', 'e', 'mask', 'max']);
  const constants = declareExpConstants(f);
  f.emit(get(T), int(4), mul, set(rowBytes));
  f.forLoop(t, int(0), get(T), 1, () => {
    f.emit(get(s), get(t), get(rowBytes), mul, add, set(rowS));
    f.emit(get(p), get(t), get(rowBytes), mul, add, set(rowP));
    // Keys 0…t: `full` bytes of whole vectors, then `rest` = (t + 1) mod 4 keys in a masked one.
    f.emit(get(t), int(1), add, int(-4), op.i32And, int(4), mul, set(full));
    f.emit(get(t), int(1), add, int(3), op.i32And, set(rest));
    f.emit(op.i32x4Lanes(0, 1, 2, 3), get(rest), op.i32x4Splat, op.i32x4LtS, set(mask)); // lane < rest
    // max over keys 0…t
    f.emit(op.f32x4Const(Number.NEGATIVE_INFINITY), set(acc));
    f.forLoop(j, int(0), get(full), 16, () => {
      f.emit(get(acc), get(rowS), get(j), add, op.v128Load(), op.f32x4Pmax, set(acc));
    });
    f.emit(get(rest), op.if);
    f.emit(get(acc), get(rowS), get(full), add, op.v128Load(), op.f32x4Const(Number.NEGATIVE_INFINITY), get(mask));
    f.emit(op.v128Bitselect, op.f32x4Pmax, set(acc), op.end);
    emitHorizontal(f, acc, 'max');
    f.emit(op.f32x4Splat, set(max));
    // e^(s − max) into p, and Σ
    f.emit(op.f32x4Const(0), set(acc));
    f.forLoop(j, int(0), get(full), 16, () => {
      f.emit(get(rowS), get(j), add, op.v128Load(), get(max), op.f32x4Sub, set(x));
      emitExp(f, x, e, constants);
      f.emit(get(rowP), get(j), add, get(e), op.v128Store(), get(acc), get(e), op.f32x4Add, set(acc));
    });
    f.emit(get(rest), op.if);
    f.emit(get(rowS), get(full), add, op.v128Load(), get(max), op.f32x4Sub, set(x));
    emitExp(f, x, e, constants);
    f.emit(get(e), get(mask), op.v128And, set(e));
    f.emit(get(rowP), get(full), add, get(e), op.v128Store(), get(acc), get(e), op.f32x4Add, set(acc));
    f.emit(get(full), int(16), add, set(full), op.end); // the masked vector is scaled with the rest
    // p ·= 1/Σ over the keys written; zeros after.
    f.emit(op.f32Const(1));
    emitHorizontal(f, acc, 'add');
    f.emit(op.f32Div, op.f32x4Splat, set(x));
    f.forLoop(j, int(0), get(full), 16, () => {
      f.emit(get(rowP), get(j), add, get(rowP), get(j), add, op.v128Load(), get(x), op.f32x4Mul, op.v128Store());
    });
    f.forLoop(j, get(full), get(rowBytes), 16, () => {
      f.emit(get(rowP), get(j), add, op.f32x4Const(0), op.v128Store());
    });
  });
  return f;
}

/**
 * softmaxBackward(p, dp, ds, T, scale): for each row t of the [T, T] blocks,
 * ds = p ⊙ (dp − Σ p·dp)·scale over the vectors that hold keys 0…t (p is 0 past t, so ds is
 * too), zeros after: dp is only computed up to there.
 */
function softmaxBackwardKernel(): FunctionBuilder {
  const f = new FunctionBuilder('softmaxBackward', [
    ['p', 'i32'],
    ['dp', 'i32'],
    ['ds', 'i32'],
    ['T', 'i32'],
    ['scale', 'f32'],
  ]);
  const { localGet: get, localSet: set, i32Add: add, i32Mul: mul, i32Const: int } = op;
  const { p, dp, ds, T, scale } = f.params;
  const { t, j, rowBytes, row, keysEnd, rowEnd } = f.named('i32', ['t', 'j', 'rowBytes', 'row', 'keysEnd', 'rowEnd']);
  const { acc, weighted, factor } = f.named('v128', ['acc', 'weighted', 'factor']);
  f.emit(get(T), int(4), mul, set(rowBytes), get(scale), op.f32x4Splat, set(factor));
  f.forLoop(t, int(0), get(T), 1, () => {
    // Byte offsets within the block: the row, the end of its key vectors ((t + 4) & ~3 keys), its end.
    f.emit(get(t), get(rowBytes), mul, set(row), get(row), get(rowBytes), add, set(rowEnd));
    f.emit(get(row), get(t), int(4), add, int(-4), op.i32And, int(4), mul, add, set(keysEnd));
    f.emit(op.f32x4Const(0), set(acc));
    f.forLoop(j, get(row), get(keysEnd), 16, () => {
      f.emit(get(acc), get(p), get(j), add, op.v128Load(), get(dp), get(j), add, op.v128Load(), op.f32x4Mul);
      f.emit(op.f32x4Add, set(acc));
    });
    emitHorizontal(f, acc, 'add');
    f.emit(op.f32x4Splat, set(weighted));
    f.forLoop(j, get(row), get(keysEnd), 16, () => {
      f.emit(get(ds), get(j), add); // the store's address
      f.emit(get(dp), get(j), add, op.v128Load(), get(weighted), op.f32x4Sub, get(p), get(j), add, op.v128Load());
      f.emit(op.f32x4Mul, get(factor), op.f32x4Mul, op.v128Store());
    });
    f.forLoop(j, get(keysEnd), get(rowEnd), 16, () => {
      f.emit(get(ds), get(j), add, op.f32x4Const(0), op.v128Store());
    });
  });
  return f;
}

/**
 * transposeScaled(src, ld, T, hs, dst, scale): dst [hs, T] = scale · src[t, i] for the [T, hs]
 * block at src (rows ld bytes apart): a head's keys (scaled by 1/√hs) or values, transposed so
 * the products stream contiguous rows.
 */
function transposeKernel(): FunctionBuilder {
  const f = new FunctionBuilder('transposeScaled', [
    ['src', 'i32'],
    ['ld', 'i32'],
    ['T', 'i32'],
    ['hs', 'i32'],
    ['dst', 'i32'],
    ['scale', 'f32'],
  ]);
  const { localGet: get, localSet: set, i32Add: add, i32Mul: mul, i32Const: int } = op;
  const { src, ld, T, hs, dst, scale } = f.params;
  const { t, i, row, column } = f.named('i32', ['t', 'i', 'row', 'column']);
  f.forLoop(t, int(0), get(T), 1, () => {
    f.emit(get(src), get(t), get(ld), mul, add, set(row), get(dst), get(t), int(4), mul, add, set(column));
    f.forLoop(i, int(0), get(hs), 1, () => {
      f.emit(get(column), get(i), get(T), mul, int(4), mul, add); // the store's address: dst[i, t]
      f.emit(get(row), get(i), int(4), mul, add, op.f32Load(), get(scale), op.f32Mul, op.f32Store());
    });
  });
  return f;
}

/**
 * Query rows per product call. The products skip the key blocks a row block cannot see, about
 * half the work, for T/16 calls per product instead of one.
 */
const ROW_BLOCK = 16;

/** Task lists kept (two a layer: forward and backward; the oldest goes first). */
const MAX_CACHED_JOBS = 256;

const attentionModule = compileOnce(() => [softmaxCausalKernel(), softmaxBackwardKernel(), transposeKernel()]);

/** Attention forward and backward on a WasmArena, its products on `matmul` (same arena, same threads). */
export class SimdAttention {
  private readonly threads: KernelThreads;
  private readonly fns: { softmaxCausal: number; softmaxBackward: number; transposeScaled: number };
  private readonly jobs = new Map<string, KernelCall[][]>();

  private constructor(
    private readonly arena: WasmArena,
    private readonly matmul: SimdMatmul,
  ) {
    this.threads = matmul.threads;
    this.threads.add(attentionModule);
    const fn = (name: string) => this.threads.fn(attentionModule, name);
    this.fns = {
      softmaxCausal: fn('softmaxCausal'),
      softmaxBackward: fn('softmaxBackward'),
      transposeScaled: fn('transposeScaled'),
    };
  }

  /** The kernel module, for the KernelThreads that run it (a pool of several threads must be given it at start). */
  static readonly module: ModuleFamily = attentionModule;

  /** The kernels on `arena`, or null where WebAssembly SIMD is unavailable. */
  static create(arena: WasmArena, matmul: SimdMatmul): SimdAttention | null {
    return attentionModule(arena.shared) ? new SimdAttention(arena, matmul) : null;
  }

  /** Scratch floats a call on B sequences needs (each (b, h) transposes its keys or values into its own [hs, T]). */
  static scratchFloats(B: number, T: number, C: number, NH: number): number {
    return B * NH * (C / NH) * T + T + C / NH + 8;
  }

  /** Whether this shape suits the kernels (T and the head size multiples of 4; else run the JS reference). */
  static supports(T: number, C: number, NH: number): boolean {
    const hs = C / NH;
    return T % 4 === 0 && Number.isInteger(hs) && hs % 4 === 0;
  }

  /** Throws unless the shape suits the kernels and every operand lives in the arena (they are used in place). */
  private check(T: number, C: number, NH: number, arrays: Float32Array[]): void {
    if (!SimdAttention.supports(T, C, NH))
      throw new RangeError(`SimdAttention: T ${T} and head size ${C / NH} must be multiples of 4`);
    if (!arrays.every((x) => this.arena.owns(x)))
      throw new RangeError('SimdAttention: every operand must live in the arena');
  }

  /**
   * Runs a call's tasks, built by `build` the first time a key (its operands' addresses and
   * shape) is seen: CpuGpt calls with the same activations every step, so each layer's lists are
   * built once (building them, thousands of small objects, took a tenth of the attention's time).
   */
  private runCached(key: string, build: () => KernelCall[][]): void {
    const { jobs } = this;
    let tasks = jobs.get(key);
    if (!tasks) {
      tasks = build();
      if (jobs.size >= MAX_CACHED_JOBS) jobs.delete(jobs.keys().next().value as string);
      jobs.set(key, tasks);
    }
    this.threads.run(tasks);
  }

  /**
   * An [hs, T] area per (b, h) task for its transposed keys or values (tasks run on whichever
   * thread takes them, so each owns its scratch), and a zero row for the products' C0.
   */
  private scratchAreas(T: number, hs: number, heads: number): { area: (task: number) => number; zeros: number } {
    const { arena } = this;
    arena.resetScratch();
    const first = arena.scratch(heads * hs * T);
    return { area: (task) => first + 4 * task * hs * T, zeros: arena.zeros(Math.max(T, hs)) };
  }

  /** As attentionForward: out [B,T,C], preatt and att [B,NH,T,T] from qkv [B,T,3C]; one task per (b, h). */
  forward(
    out: Float32Array,
    preatt: Float32Array,
    att: Float32Array,
    qkv: Float32Array,
    B: number,
    T: number,
    C: number,
    NH: number,
  ): void {
    this.check(T, C, NH, [out, preatt, att, qkv]);
    const { matmul, fns } = this;
    const hs = C / NH;
    const C3 = 3 * C;
    const { area, zeros } = this.scratchAreas(T, hs, B * NH);
    const key = [out, preatt, att, qkv].map((x) => x.byteOffset);
    this.runCached(['forward', ...key, B, T, C, NH, area(0), zeros].join(), () => {
      const tasks: KernelCall[][] = [];
      for (let b = 0; b < B; b++) {
        for (let h = 0; h < NH; h++) {
          const calls: KernelCall[] = [];
          const keysT = area(tasks.length);
          const q = qkv.byteOffset + 4 * (b * T * C3 + h * hs);
          const block = 4 * (b * NH + h) * T * T;
          const [s, p] = [preatt.byteOffset + block, att.byteOffset + block];
          // (K/√hs)ᵀ [hs, T]
          calls.push({
            fn: fns.transposeScaled,
            args: [q + 4 * C, 4 * C3, T, hs, keysT, 1 / Math.sqrt(hs)],
            floats: 1 << 5,
          });
          // S rows t0…t0+15 need keys 0…t0+15 only; P·V likewise (P is 0 past the diagonal).
          for (let t0 = 0; t0 < T; t0 += ROW_BLOCK) {
            const [rows, keys] = [Math.min(ROW_BLOCK, T - t0), Math.min(T, t0 + ROW_BLOCK)];
            matmul.directCalls(
              calls,
              rows,
              keys,
              hs,
              q + t0 * 4 * C3,
              4 * C3,
              4,
              keysT,
              4 * T,
              s + t0 * 4 * T,
              4 * T,
              zeros,
              0,
            );
          }
          calls.push({ fn: fns.softmaxCausal, args: [s, p, T] });
          const y = out.byteOffset + 4 * (b * T * C + h * hs);
          for (let t0 = 0; t0 < T; t0 += ROW_BLOCK) {
            const [rows, keys] = [Math.min(ROW_BLOCK, T - t0), Math.min(T, t0 + ROW_BLOCK)];
            matmul.directCalls(
              calls,
              rows,
              hs,
              keys,
              p + t0 * 4 * T,
              4 * T,
              4,
              q + 8 * C,
              4 * C3,
              y + t0 * 4 * C,
              4 * C,
              zeros,
              0,
            );
          }
          tasks.push(calls);
        }
      }
      return tasks;
    });
  }

  /** As attentionBackward: dqkv += ∂/∂qkv; dpreatt and datt are scratch (see the header). One task per (b, h). */
  backward(
    dqkv: Float32Array,
    dpreatt: Float32Array,
    datt: Float32Array,
    dout: Float32Array,
    qkv: Float32Array,
    att: Float32Array,
    B: number,
    T: number,
    C: number,
    NH: number,
  ): void {
    this.check(T, C, NH, [dqkv, dpreatt, datt, dout, qkv, att]);
    const { matmul, fns } = this;
    const hs = C / NH;
    const C3 = 3 * C;
    const { area, zeros } = this.scratchAreas(T, hs, B * NH);
    const key = [dqkv, dpreatt, datt, dout, qkv, att].map((x) => x.byteOffset);
    this.runCached(['backward', ...key, B, T, C, NH, area(0), zeros].join(), () => {
      const tasks: KernelCall[][] = [];
      for (let b = 0; b < B; b++) {
        for (let h = 0; h < NH; h++) {
          const calls: KernelCall[] = [];
          const valuesT = area(tasks.length);
          const offset = 4 * (b * T * C3 + h * hs);
          const [q, k, v] = [qkv.byteOffset + offset, qkv.byteOffset + offset + 4 * C, qkv.byteOffset + offset + 8 * C];
          const [dq, dk, dv] = [
            dqkv.byteOffset + offset,
            dqkv.byteOffset + offset + 4 * C,
            dqkv.byteOffset + offset + 8 * C,
          ];
          const dy = dout.byteOffset + 4 * (b * T * C + h * hs);
          const block = 4 * (b * NH + h) * T * T;
          const [p, dp, ds] = [att.byteOffset + block, datt.byteOffset + block, dpreatt.byteOffset + block];
          // Vᵀ [hs, T]
          calls.push({ fn: fns.transposeScaled, args: [v, 4 * C3, T, hs, valuesT, 1], floats: 1 << 5 });
          for (let t0 = 0; t0 < T; t0 += ROW_BLOCK) {
            const [rows, keys] = [Math.min(ROW_BLOCK, T - t0), Math.min(T, t0 + ROW_BLOCK)];
            const [aRow, dRow] = [t0 * 4 * C, t0 * 4 * T]; // byte offsets of row t0 in dY / out and in the square
            // dP = dY·Vᵀ and, after the softmax backward, dQ += dS·K: rows t need keys 0…t.
            matmul.directCalls(calls, rows, keys, hs, dy + aRow, 4 * C, 4, valuesT, 4 * T, dp + dRow, 4 * T, zeros, 0);
          }
          calls.push({ fn: fns.softmaxBackward, args: [p, dp, ds, T, 1 / Math.sqrt(hs)], floats: 1 << 4 });
          for (let t0 = 0; t0 < T; t0 += ROW_BLOCK) {
            const [rows, keys] = [Math.min(ROW_BLOCK, T - t0), Math.min(T, t0 + ROW_BLOCK)];
            const [m0, qRow] = [t0 * 4, t0 * 4 * C3]; // byte offsets: key t0 in a square row, row t0 in qkv
            matmul.directCalls(
              calls,
              rows,
              hs,
              keys,
              ds + t0 * 4 * T,
              4 * T,
              4,
              k,
              4 * C3,
              dq + qRow,
              4 * C3,
              dq + qRow,
              4 * C3,
            );
            // dV += Pᵀ·dY and dK += dSᵀ·Q: key rows t2 take queries t2…T−1.
            const [queries, first] = [T - t0, t0 * 4 * T]; // queries from t0 on; byte offset of square row t0
            matmul.directCalls(
              calls,
              rows,
              hs,
              queries,
              p + first + m0,
              4,
              4 * T,
              dy + t0 * 4 * C,
              4 * C,
              dv + qRow,
              4 * C3,
              dv + qRow,
              4 * C3,
            );
            matmul.directCalls(
              calls,
              rows,
              hs,
              queries,
              ds + first + m0,
              4,
              4 * T,
              q + qRow,
              4 * C3,
              dk + qRow,
              4 * C3,
              dk + qRow,
              4 * C3,
            );
          }
          tasks.push(calls);
        }
      }
      return tasks;
    });
  }
}
