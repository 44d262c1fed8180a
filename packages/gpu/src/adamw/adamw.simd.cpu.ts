/**
 * The optimizer step of the CPU backend in WebAssembly SIMD: the global gradient norm and AdamW
 * (adamw.cpu.ts's update, in float32 as on the GPU) over vectors that live in a WasmArena, split
 * over its KernelThreads. The JS reference computes in float64 at about 5 ns a parameter; this is
 * memory-bound (28 bytes a parameter), several times faster, and shares the work.
 *
 *   sumSquares(g, n, out):  out[0] = Σ g² over n floats (f32 lanes, then their sum)
 *   adamw(θ, g, m, v, n, lr, β1, β2, ε, decay, 1/(1−β1ᵗ), 1/(1−β2ᵗ), scale):
 *     g′ = g·scale; m = β1·m + (1−β1)·g′; v = β2·v + (1−β2)·g′²;
 *     θ −= lr·(m/(1−β1ᵗ) / (√(v/(1−β2ᵗ)) + ε) + decay·θ)
 *
 * The norm sums fixed CHUNK-float pieces, each in one thread, then adds the pieces' sums in
 * order in float64: the same bits on any number of threads. n need not be a multiple of 4: the
 * last n mod 4 values are done in JS, the same arithmetic in float32 (Math.fround).
 */
import type { WasmArena } from '../simd/arena.cpu.ts';
import { type KernelCall, KernelThreads } from '../simd/threads.cpu.ts';
import { compileOnce, emitHorizontal, FunctionBuilder, type ModuleFamily, op } from '../simd/wasm.cpu.ts';
import { adamwBiasCorrections } from './adamw.cpu.ts';

/** One run of AdamW: vectors of the same length in the arena, and their weight decay. */
export interface AdamWRun {
  params: Float32Array;
  grads: Float32Array;
  m: Float32Array;
  v: Float32Array;
  decay: number;
}

/** Floats per piece of the norm's sum (and per AdamW task). */
const CHUNK = 1 << 15;

function sumSquaresKernel(): FunctionBuilder {
  const f = new FunctionBuilder('sumSquares', [
    ['g', 'i32'],
    ['n', 'i32'],
    ['out', 'i32'],
  ]);
  const { localGet: get, localSet: set, i32Add: add, i32Mul: mul, i32Const: int } = op;
  const { g, n, out } = f.params;
  const { j, end } = f.named('i32', ['j', 'end']);
  const { acc, x } = f.named('v128', ['acc', 'x']);
  f.emit(op.f32x4Const(0), set(acc), get(n), int(4), mul, set(end));
  f.forLoop(j, int(0), get(end), 16, () => {
    f.emit(get(g), get(j), add, op.v128Load(), set(x), get(acc), get(x), get(x), op.f32x4Mul, op.f32x4Add, set(acc));
  });
  f.emit(get(out));
  emitHorizontal(f, acc, 'add');
  f.emit(op.f32Store());
  return f;
}

const ADAMW_PARAMS = [
  ['p', 'i32'],
  ['g', 'i32'],
  ['m', 'i32'],
  ['v', 'i32'],
  ['n', 'i32'],
  ['lr', 'f32'],
  ['beta1', 'f32'],
  ['beta2', 'f32'],
  ['eps', 'f32'],
  ['decay', 'f32'],
  ['invBc1', 'f32'],
  ['invBc2', 'f32'],
  ['scale', 'f32'],
] as const;
/** Bit i set for each f32 argument of `adamw` (KernelCall.floats). */
const ADAMW_FLOATS = ADAMW_PARAMS.reduce((mask, [, type], i) => (type === 'f32' ? mask | (1 << i) : mask), 0);

function adamwKernel(): FunctionBuilder {
  const f = new FunctionBuilder('adamw', ADAMW_PARAMS);
  const { localGet: get, localSet: set, i32Add: add, i32Mul: mul, i32Const: int } = op;
  const { p, g, m, v, n, lr, beta1, beta2, eps, decay, invBc1, invBc2, scale } = f.params;
  const { j, end } = f.named('i32', ['j', 'end']);
  const c = f.named('v128', ['lr', 'b1', 'c1', 'b2', 'c2', 'eps', 'decay', 'bc1', 'bc2', 'scale']);
  const { gv, mv, vv, theta } = f.named('v128', ['gv', 'mv', 'vv', 'theta']);
  const splat = (local: number, target: number) => f.emit(get(local), op.f32x4Splat, set(target));
  splat(lr, c.lr);
  splat(beta1, c.b1);
  splat(beta2, c.b2);
  splat(eps, c.eps);
  splat(decay, c.decay);
  splat(invBc1, c.bc1);
  splat(invBc2, c.bc2);
  splat(scale, c.scale);
  f.emit(op.f32Const(1), get(beta1), op.f32Sub, op.f32x4Splat, set(c.c1));
  f.emit(op.f32Const(1), get(beta2), op.f32Sub, op.f32x4Splat, set(c.c2));
  f.emit(get(n), int(4), mul, set(end));
  f.forLoop(j, int(0), get(end), 16, () => {
    f.emit(get(g), get(j), add, op.v128Load(), get(c.scale), op.f32x4Mul, set(gv));
    // m = β1·m + (1−β1)·g; v = β2·v + (1−β2)·g·g
    f.emit(
      get(c.b1),
      get(m),
      get(j),
      add,
      op.v128Load(),
      op.f32x4Mul,
      get(c.c1),
      get(gv),
      op.f32x4Mul,
      op.f32x4Add,
      set(mv),
    );
    f.emit(get(c.b2), get(v), get(j), add, op.v128Load(), op.f32x4Mul, get(c.c2), get(gv), op.f32x4Mul, get(gv));
    f.emit(op.f32x4Mul, op.f32x4Add, set(vv));
    f.emit(get(m), get(j), add, get(mv), op.v128Store(), get(v), get(j), add, get(vv), op.v128Store());
    // θ −= lr·(m·bc1 / (√(v·bc2) + ε) + decay·θ)
    f.emit(get(p), get(j), add, op.v128Load(), set(theta));
    f.emit(get(p), get(j), add, get(theta)); // the store's address, and θ
    f.emit(get(mv), get(c.bc1), op.f32x4Mul, get(vv), get(c.bc2), op.f32x4Mul, op.f32x4Sqrt, get(c.eps), op.f32x4Add);
    f.emit(op.f32x4Div, get(c.decay), get(theta), op.f32x4Mul, op.f32x4Add, get(c.lr), op.f32x4Mul, op.f32x4Sub);
    f.emit(op.v128Store());
  });
  return f;
}

const optimizerModule = compileOnce(() => [sumSquaresKernel(), adamwKernel()]);

/** Float32 arithmetic of one AdamW element, as the kernel does it: for the n mod 4 tail. */
function adamwTail(
  p: Float32Array,
  g: Float32Array,
  m: Float32Array,
  v: Float32Array,
  i: number,
  k: { lr: number; beta1: number; beta2: number; eps: number; decay: number; bc1: number; bc2: number; scale: number },
): void {
  const f = Math.fround;
  const gs = f((g[i] as number) * k.scale);
  const mi = f(f(k.beta1 * (m[i] as number)) + f(f(1 - k.beta1) * gs));
  const vi = f(f(k.beta2 * (v[i] as number)) + f(f(f(1 - k.beta2) * gs) * gs));
  m[i] = mi;
  v[i] = vi;
  const theta = p[i] as number;
  const step = f(f(f(mi * k.bc1) / f(f(Math.sqrt(f(vi * k.bc2))) + k.eps)) + f(k.decay * theta));
  p[i] = f(theta - f(k.lr * step));
}

/** The gradient norm and AdamW on vectors in a WasmArena. */
export class SimdOptimizer {
  private readonly threads: KernelThreads;
  private readonly fns: { sumSquares: number; adamw: number };

  private constructor(
    private readonly arena: WasmArena,
    threads: KernelThreads | undefined,
  ) {
    this.threads = threads ?? new KernelThreads(arena, [optimizerModule], 1);
    this.threads.add(optimizerModule);
    this.fns = {
      sumSquares: this.threads.fn(optimizerModule, 'sumSquares'),
      adamw: this.threads.fn(optimizerModule, 'adamw'),
    };
  }

  /** The kernel module, for the KernelThreads that run it (a pool of several threads must be given it at start). */
  static readonly module: ModuleFamily = optimizerModule;

  /** The kernels on `arena` (on `threads`, else this thread), or null where WebAssembly SIMD is unavailable. */
  static create(arena: WasmArena, threads?: KernelThreads): SimdOptimizer | null {
    return optimizerModule(arena.shared) ? new SimdOptimizer(arena, threads) : null;
  }

  /** Scratch floats a call needs for `n` values. */
  static scratchFloats(n: number): number {
    return Math.ceil(n / CHUNK) + 4;
  }

  private check(arrays: Float32Array[]): void {
    if (!arrays.every((x) => this.arena.owns(x)))
      throw new RangeError('SimdOptimizer: every vector must live in the arena');
  }

  /** √Σ g² over g (as gradNorm), from fixed pieces summed in order: the same on any number of threads. */
  gradNorm(g: Float32Array): number {
    this.check([g]);
    const { arena } = this;
    const n4 = g.length - (g.length % 4);
    const pieces = Math.ceil(n4 / CHUNK);
    arena.resetScratch();
    const out = arena.scratch(pieces);
    const tasks: KernelCall[][] = [];
    for (let c = 0; c < pieces; c++) {
      const start = c * CHUNK;
      tasks.push([
        { fn: this.fns.sumSquares, args: [g.byteOffset + 4 * start, Math.min(CHUNK, n4 - start), out + 4 * c] },
      ]);
    }
    this.threads.run(tasks);
    let sum = 0;
    for (let c = 0; c < pieces; c++) sum += arena.f32[(out >> 2) + c] as number;
    for (let i = n4; i < g.length; i++) sum += (g[i] as number) * (g[i] as number);
    return Math.sqrt(sum);
  }

  /** One AdamW step over the vectors (same length, in the arena), as adamwUpdate in float32. */
  update(
    params: Float32Array,
    grads: Float32Array,
    m: Float32Array,
    v: Float32Array,
    lr: number,
    beta1: number,
    beta2: number,
    eps: number,
    weightDecay: number,
    t: number,
    gradScale = 1,
  ): void {
    this.updateRuns([{ params, grads, m, v, decay: weightDecay }], lr, beta1, beta2, eps, t, gradScale);
  }

  /** One AdamW step over several runs of vectors, each with its weight decay, as one job on the threads. */
  updateRuns(
    runs: readonly AdamWRun[],
    lr: number,
    beta1: number,
    beta2: number,
    eps: number,
    t: number,
    gradScale = 1,
  ): void {
    const [bc1, bc2] = adamwBiasCorrections(beta1, beta2, t);
    const tasks: KernelCall[][] = [];
    const tails: (() => void)[] = [];
    for (const { params, grads, m, v, decay } of runs) {
      this.check([params, grads, m, v]);
      const n = params.length;
      if (grads.length !== n || m.length !== n || v.length !== n)
        throw new RangeError('SimdOptimizer: params, grads, m and v must have the same length');
      const k = { lr, beta1, beta2, eps, decay, bc1: 1 / bc1, bc2: 1 / bc2, scale: gradScale };
      const n4 = n - (n % 4);
      for (let start = 0; start < n4; start += CHUNK) {
        const at = (x: Float32Array) => x.byteOffset + 4 * start;
        const count = Math.min(CHUNK, n4 - start);
        const args = [
          at(params),
          at(grads),
          at(m),
          at(v),
          count,
          k.lr,
          k.beta1,
          k.beta2,
          k.eps,
          k.decay,
          k.bc1,
          k.bc2,
          k.scale,
        ];
        tasks.push([{ fn: this.fns.adamw, args, floats: ADAMW_FLOATS }]);
      }
      tails.push(() => {
        for (let i = n4; i < n; i++) adamwTail(params, grads, m, v, i, k);
      });
    }
    this.threads.run(tasks);
    for (const tail of tails) tail();
  }
}
