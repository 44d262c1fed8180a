/**
 * GELU for the CPU backend in WebAssembly SIMD: gelu.cpu.ts's tanh approximation, computed through
 * the logistic function. ½·(1 + tanh a) = σ(2a) = 1 / (1 + e^−2a) and 1 − tanh² a = 4·σ(1 − σ), so
 *
 *   forward:  out   = x·σ                                                     (overwrites out)
 *   backward: dinp += dout·(σ + 2x·σ(1 − σ)·√(2/π)·(1 + 3·0.044715·x²))         (ADDS)
 *
 * with a = √(2/π)·(x + 0.044715·x³): one vector exp and one division per four values. σ(1 − σ)
 * is taken as e·σ² (e = e^−2a), not from 1 − σ, which cancels for large x and cost 7 ulp there.
 * In V8, Math.tanh costs ≈17 ns a value and the JS kernels spent ≈20 ms of a 250 ms nano step in
 * it (forward and backward); this takes ≈1 ns (forward) and ≈1.4 ns (backward) a value. The
 * logistic form also keeps full relative precision where 1 + tanh a → 0 (large negative x).
 * Values past the last multiple of 32 take the same formula in JS.
 */
import type { WasmArena } from '../simd/arena.cpu.ts';
import { KernelThreads, splitRange } from '../simd/threads.cpu.ts';
import { compileOnce, declareExpConstants, emitExp, FunctionBuilder, type ModuleFamily, op } from '../simd/wasm.cpu.ts';

// GELU_SCALE and GELU_CUBIC of gelu.cpu.ts (which re-exports this file: no import back).
const SCALE = Math.sqrt(2 / Math.PI);
const CUBIC = 0.044715;

/**
 * Vectors per loop iteration. One vector's GELU is a chain of ~40 dependent instructions (~100
 * cycles); UNROLL independent chains side by side let the core overlap them. Measured on
 * 512K values: forward 2.4 → 0.94 ns a value, backward 3.2 → 1.4 (unroll 1, 2, 4, 6, 8 tried).
 */
const UNROLL = 8;

/** forward(out, inp, n) or backward(dinp, inp, dout, n), n a multiple of 4·UNROLL, addresses in bytes. */
function geluKernel(backward: boolean): FunctionBuilder {
  const params = backward ? (['dinp', 'inp', 'dout', 'n'] as const) : (['out', 'inp', 'n'] as const);
  const f = new FunctionBuilder(
    backward ? 'geluBackward' : 'geluForward',
    params.map((p) => [p, 'i32'] as const),
  );
  const { localGet: get, localSet: set, f32x4Const: k4, i32Add: add } = op;
  const { inp, n, out, dinp, dout } = f.params as Record<'inp' | 'n' | 'out' | 'dinp' | 'dout', number>;
  const { i, end } = f.named('i32', ['i', 'end']);
  const constants = declareExpConstants(f);
  const [one, lin, cubic, dLin, dCubic] = [1, -2 * SCALE, -2 * SCALE * CUBIC, 2 * SCALE, 6 * SCALE * CUBIC].map((c) => {
    const local = f.local('v128');
    f.emit(k4(c), set(local));
    return local;
  }) as [number, number, number, number, number];
  const lanes = Array.from({ length: UNROLL }, (_, u) => ({
    offset: 16 * u,
    x: f.local('v128'),
    x2: f.local('v128'),
    t: f.local('v128'),
    e: f.local('v128'),
    sigma: f.local('v128'),
  }));
  f.emit(get(n), op.i32Const(4), op.i32Mul, set(end));
  f.forLoop(i, op.i32Const(0), get(end), 16 * UNROLL, () => {
    for (const { offset, x, x2, t } of lanes) {
      f.emit(get(inp), get(i), add, op.v128Load(offset), set(x));
      f.emit(get(x), get(x), op.f32x4Mul, set(x2));
      // t = −2a = x·(−2√(2/π) − 2√(2/π)·0.044715·x²)
      f.emit(get(x2), get(cubic), op.f32x4Mul, get(lin), op.f32x4Add, get(x), op.f32x4Mul, set(t));
    }
    for (const { t, e } of lanes) emitExp(f, t, e, constants);
    for (const { offset, x, x2, t, e, sigma } of lanes) {
      f.emit(get(one), get(one), get(e), op.f32x4Add, op.f32x4Div, set(sigma)); // σ = 1 / (1 + e^t)
      if (!backward) {
        f.emit(get(out), get(i), add, get(x), get(sigma), op.f32x4Mul, op.v128Store(offset));
        continue;
      }
      // gelu′ = σ + x·e·σ²·(2√(2/π) + 6√(2/π)·0.044715·x²)
      f.emit(get(x2), get(dCubic), op.f32x4Mul, get(dLin), op.f32x4Add, get(x), op.f32x4Mul);
      // e·σ = 1 − σ ≤ 1 first: x·(…)·e alone overflows for large negative x (e clamps at e^88).
      f.emit(get(e), get(sigma), op.f32x4Mul, get(sigma), op.f32x4Mul, op.f32x4Mul, get(sigma), op.f32x4Add, set(t));
      f.emit(get(dinp), get(i), add); // the store's address
      f.emit(get(dinp), get(i), add, op.v128Load(offset), get(dout), get(i), add, op.v128Load(offset), get(t));
      f.emit(op.f32x4Mul, op.f32x4Add, op.v128Store(offset));
    }
  });
  return f;
}

const geluModule = compileOnce(() => [geluKernel(false), geluKernel(true)]);

/** e^−2a for one value, in JS (the tail past the last multiple of 4·UNROLL), clamped as the vector exp is. */
function expMinus2a(x: number): number {
  return Math.exp(Math.min(88, -2 * SCALE * (x + CUBIC * x * x * x)));
}

/**
 * GELU forward and backward on a WasmArena (operands outside it are copied in and out), split
 * into contiguous ranges over KernelThreads: elementwise, so bitwise the same on any count.
 */
export class SimdGelu {
  private readonly threads: KernelThreads;
  private readonly fns: { forward: number; backward: number };

  private constructor(
    private readonly arena: WasmArena,
    threads: KernelThreads | undefined,
  ) {
    this.threads = threads ?? new KernelThreads(arena, [geluModule], 1);
    this.threads.add(geluModule);
    this.fns = {
      forward: this.threads.fn(geluModule, 'geluForward'),
      backward: this.threads.fn(geluModule, 'geluBackward'),
    };
  }

  /** The kernel module, for the KernelThreads that run it (a pool of several threads must be given it at start). */
  static readonly module: ModuleFamily = geluModule;

  /** The kernels on `arena` (on `threads`, else this thread), or null where WebAssembly SIMD is unavailable. */
  static create(arena: WasmArena, threads?: KernelThreads): SimdGelu | null {
    return geluModule(arena.shared) ? new SimdGelu(arena, threads) : null;
  }

  /** `fn`(out, …ins, count) over [0, n) (n a multiple of 4·UNROLL), in a range per thread. */
  private split(fn: number, n: number, addresses: number[]): void {
    const tasks = splitRange(n, this.threads.tasks, 4 * UNROLL * 64).map(([start, end]) => [
      { fn, args: [...addresses.map((at) => at + 4 * start), end - start] },
    ]);
    this.threads.run(tasks);
  }

  /** out = gelu(inp) over n values (overwrites), as geluForward. */
  forward(out: Float32Array, inp: Float32Array, n: number): void {
    const arena = this.arena;
    arena.resetScratch();
    const inpAt = arena.place(inp, 1, n);
    const outAt = arena.output(out, n);
    const n4 = n - (n % (4 * UNROLL));
    this.split(this.fns.forward, n4, [outAt, inpAt]);
    const f32 = arena.f32;
    for (let i = n4; i < n; i++) {
      const x = f32[(inpAt >> 2) + i] as number;
      f32[(outAt >> 2) + i] = x / (1 + expMinus2a(x));
    }
    arena.copyOut(out, outAt, 1, n);
  }

  /** dinp += gelu′(inp)·dout over n values, as geluBackward. */
  backward(dinp: Float32Array, inp: Float32Array, dout: Float32Array, n: number): void {
    const arena = this.arena;
    arena.resetScratch();
    const [inpAt, doutAt, dinpAt] = [arena.place(inp, 1, n), arena.place(dout, 1, n), arena.place(dinp, 1, n)];
    const n4 = n - (n % (4 * UNROLL));
    this.split(this.fns.backward, n4, [dinpAt, inpAt, doutAt]);
    const f32 = arena.f32;
    for (let i = n4; i < n; i++) {
      const x = f32[(inpAt >> 2) + i] as number;
      const e = expMinus2a(x);
      const s = 1 / (1 + e);
      const grad = s + e * s * s * 2 * x * SCALE * (1 + 3 * CUBIC * x * x);
      f32[(dinpAt >> 2) + i] = (f32[(dinpAt >> 2) + i] as number) + grad * (f32[(doutAt >> 2) + i] as number);
    }
    arena.copyOut(dinp, dinpAt, 1, n);
  }
}
