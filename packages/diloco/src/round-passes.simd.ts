/**
 * The outer step and the merge (round-passes.ts) in WebAssembly SIMD, two values a step in
 * float64: each element's expression is the scalar one, operation for operation, rounded to
 * float32 where the scalar code stores it, so the results are the same bits. Operands are copied
 * into a per-process arena and back; an odd last element is the caller's.
 */
import { compileOnce, FunctionBuilder, op, WasmArena } from '@shoal/gpu/simd';

/** Emits the f64x2 of the two float32 at local `base` + local `i` (bytes). */
const loadPair = (base: number, i: number) => [
  op.localGet(base),
  op.localGet(i),
  op.i32Add,
  op.v128Load64Zero(),
  op.f64x2PromoteLowF32x4,
];

/**
 * outerStep(theta, momentum, delta, nextTheta, nextMomentum, n, lr, mu) → 1 if a θ′ or m′ is not
 * finite, else 0: m′ = fround(μ·m + Δ̄), θ′ = fround(θ − η·(Δ̄ + μ·m′)), n even.
 */
function outerKernel(): FunctionBuilder {
  const f = new FunctionBuilder(
    'outerStep',
    [
      ['theta', 'i32'],
      ['momentum', 'i32'],
      ['delta', 'i32'],
      ['nextTheta', 'i32'],
      ['nextMomentum', 'i32'],
      ['n', 'i32'],
      ['lr', 'f64'],
      ['mu', 'f64'],
    ],
    'i32',
  );
  const { localGet: get, localSet: set } = op;
  const { theta, momentum, delta, nextTheta, nextMomentum, n, lr, mu } = f.params;
  const i = f.local('i32');
  const { lrs, mus, d, m, t, check } = f.named('v128', ['lrs', 'mus', 'd', 'm', 't', 'check']);
  f.emit(get(lr), op.f64x2Splat, set(lrs), get(mu), op.f64x2Splat, set(mus), op.f32x4Const(0), set(check));
  f.forLoop(i, op.i32Const(0), [...get(n), ...op.i32Const(4), ...op.i32Mul], 8, () => {
    f.emit(...loadPair(delta, i), set(d));
    f.emit(get(mus), ...loadPair(momentum, i), op.f64x2Mul, get(d), op.f64x2Add, op.f32x4DemoteF64x2Zero, set(m));
    f.emit(get(nextMomentum), get(i), op.i32Add, get(m), op.v128Store64Lane(0));
    f.emit(...loadPair(theta, i), get(lrs), get(d), get(mus), get(m), op.f64x2PromoteLowF32x4, op.f64x2Mul);
    f.emit(op.f64x2Add, op.f64x2Mul, op.f64x2Sub, op.f32x4DemoteF64x2Zero, set(t));
    f.emit(get(nextTheta), get(i), op.i32Add, get(t), op.v128Store64Lane(0));
    // x − x is 0 for a finite x and NaN otherwise: the sum stays 0 while all are finite
    f.emit(get(check), get(m), get(m), op.f32x4Sub, op.f32x4Add, get(t), get(t), op.f32x4Sub, op.f32x4Add);
    f.emit(set(check));
  });
  f.emit(get(check), get(check), op.f32x4Eq, op.i32x4Const(0), op.i32x4Eq, op.v128AnyTrue);
  return f;
}

/**
 * merge(local, global, base, n, alpha, keep): local = fround(α·local + keep·global), or with a
 * base (≠ 0), fround(local + keep·(global − base)); keep = 1 − α; n even.
 */
function mergeKernel(): FunctionBuilder {
  const f = new FunctionBuilder('merge', [
    ['local', 'i32'],
    ['global', 'i32'],
    ['base', 'i32'],
    ['n', 'i32'],
    ['alpha', 'f64'],
    ['keep', 'f64'],
  ]);
  const { localGet: get, localSet: set } = op;
  const { local, global, base, n, alpha, keep } = f.params;
  const i = f.local('i32');
  const { alphas, keeps, x } = f.named('v128', ['alphas', 'keeps', 'x']);
  f.emit(get(alpha), op.f64x2Splat, set(alphas), get(keep), op.f64x2Splat, set(keeps));
  const limit = [...get(n), ...op.i32Const(4), ...op.i32Mul];
  f.emit(get(base), op.if);
  f.forLoop(i, op.i32Const(0), limit, 8, () => {
    f.emit(...loadPair(local, i), get(keeps), ...loadPair(global, i), ...loadPair(base, i), op.f64x2Sub);
    f.emit(op.f64x2Mul, op.f64x2Add, op.f32x4DemoteF64x2Zero, set(x));
    f.emit(get(local), get(i), op.i32Add, get(x), op.v128Store64Lane(0));
  });
  f.emit(op.else);
  f.forLoop(i, op.i32Const(0), limit, 8, () => {
    f.emit(get(alphas), ...loadPair(local, i), op.f64x2Mul, get(keeps), ...loadPair(global, i), op.f64x2Mul);
    f.emit(op.f64x2Add, op.f32x4DemoteF64x2Zero, set(x));
    f.emit(get(local), get(i), op.i32Add, get(x), op.v128Store64Lane(0));
  });
  f.emit(op.end);
  return f;
}

/**
 * delta(global, local, n) → the largest |global − local| (float64), NaN if one is not finite:
 * local = fround(global − local); n even.
 */
function deltaKernel(): FunctionBuilder {
  const f = new FunctionBuilder(
    'delta',
    [
      ['global', 'i32'],
      ['local', 'i32'],
      ['n', 'i32'],
    ],
    'f64',
  );
  const { localGet: get, localSet: set } = op;
  const { global, local, n } = f.params;
  const i = f.local('i32');
  const { d, largest, check } = f.named('v128', ['d', 'largest', 'check']);
  f.emit(op.f64x2Const(0), set(largest), op.f64x2Const(0), set(check));
  f.forLoop(i, op.i32Const(0), [...get(n), ...op.i32Const(4), ...op.i32Mul], 8, () => {
    f.emit(...loadPair(global, i), ...loadPair(local, i), op.f64x2Sub, set(d));
    f.emit(get(local), get(i), op.i32Add, get(d), op.f32x4DemoteF64x2Zero, op.v128Store64Lane(0));
    f.emit(get(largest), get(d), op.f64x2Abs, op.f64x2Pmax, set(largest));
    f.emit(get(check), get(d), get(d), op.f64x2Sub, op.f64x2Add, set(check));
  });
  // NaN when a d was not finite (d − d is NaN then, 0 otherwise), else the larger lane
  f.emit(get(check), op.f64x2ExtractLane(0), get(check), op.f64x2ExtractLane(1), op.f64Add);
  f.emit(get(largest), op.f64x2ExtractLane(0), get(largest), op.f64x2ExtractLane(1), op.f64Max, op.f64Add);
  return f;
}

interface PassExports {
  delta(global: number, local: number, n: number): number;
  outerStep(
    theta: number,
    momentum: number,
    delta: number,
    nextTheta: number,
    nextMomentum: number,
    n: number,
    lr: number,
    mu: number,
  ): number;
  merge(local: number, global: number, base: number, n: number, alpha: number, keep: number): void;
}

const family = compileOnce(() => [outerKernel(), mergeKernel(), deltaKernel()]);
let made: { arena: WasmArena; kernels: PassExports } | null | undefined;

/** The kernels on their arena, or null where WebAssembly SIMD is missing. */
export function roundKernels(): { arena: WasmArena; kernels: PassExports } | null {
  if (made === undefined) {
    const arena = family() ? WasmArena.create() : null;
    made = arena ? { arena, kernels: arena.exportsOf<PassExports>(family) } : null;
  }
  return made;
}
