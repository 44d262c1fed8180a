/**
 * The per-element passes of a round (docs/round-machinery.md), each one pass over the fragment
 * with no allocation per element: what a worker computes from θ_local (Δ and its bound), what a
 * replica checks an aggregate and applies (the outer step), and the merge back into θ_local.
 * Shard owners' passes are the codec's checked decode (codecs/) and the aggregation (aggregate.ts).
 *
 * Every pass here is bitwise what its scalar form gives (round-passes.test.ts): the outer step's
 * order is part of the replicas' contract (outer.ts), and the rest must not move a loss. The
 * outer step and the merge run in WebAssembly SIMD where it is (round-passes.simd.ts);
 * `simd: false` keeps them to the scalar loops, the reference.
 */
import { type OuterOptimizerOptions, resolveOuterOptions } from './outer.ts';
import { roundKernels } from './round-passes.simd.ts';

/** Why a vector must not be used: its first non-finite or too-large value. */
export interface BoundProblem {
  reason: 'non-finite' | 'magnitude';
  index: number;
  value: number;
}

/**
 * Δ = global − local into `local` (in place), scaled into ±limit when its largest |value| is
 * beyond it. Returns 'non-finite' (nothing usable) when a value is not finite, 'clamped' when it
 * was scaled, 'ok' otherwise.
 */
export function deltaInPlace(
  global: Float32Array,
  local: Float32Array,
  limit: number,
  options: { simd?: boolean } = {},
): 'ok' | 'clamped' | 'non-finite' {
  const n = local.length;
  if (global.length !== n) throw new RangeError(`Δ needs equal lengths: θ_global ${global.length}, θ_local ${n}`);
  let largest = 0;
  const simd = options.simd === false ? null : roundKernels();
  const even = simd ? n & ~1 : 0;
  if (simd && even > 0) {
    const { arena, kernels } = simd;
    arena.resetScratch();
    const at = arena.place(local, 1, even);
    largest = kernels.delta(arena.place(global, 1, even), at, even);
    local.set(arena.f32.subarray(at >> 2, (at >> 2) + even));
  }
  for (let i = even; i < n; i++) {
    // the largest is the float64 difference's, before it is rounded into local
    const value = (global[i] as number) - (local[i] as number);
    local[i] = value;
    const a = Math.abs(value);
    // a NaN lands here and stays: a later, larger value must not hide it
    if (!(a <= largest)) largest = a > largest ? a : Number.NaN;
  }
  if (!Number.isFinite(largest)) return 'non-finite';
  if (largest <= limit) return 'ok';
  const scale = limit / largest;
  for (let i = 0; i < n; i++) local[i] = (local[i] as number) * scale;
  return 'clamped';
}

/** The first value of `values` that is not finite or whose |value| is over `bound`; null if none. */
export function firstOutOfBounds(values: Float32Array, bound = Number.POSITIVE_INFINITY): BoundProblem | null {
  for (let i = 0; i < values.length; i++) {
    const value = values[i] as number;
    // one comparison for the common case: |value| ≤ bound is false for NaN too
    if (Math.abs(value) <= bound) continue;
    return { reason: Number.isFinite(value) ? 'magnitude' : 'non-finite', index: i, value };
  }
  return null;
}

/**
 * The outer Nesterov step (outer.ts) into fresh θ' and m', failing instead when θ' or m' is not
 * finite: the tentative apply of a round, in one pass (outerNesterovStep's arithmetic, element by
 * element in index order).
 */
export function checkedOuterStep(
  theta: Float32Array,
  momentum: Float32Array,
  delta: Float32Array,
  options: OuterOptimizerOptions & { simd?: boolean } = {},
  /** Where θ′ and m′ go (fresh arrays when omitted); written even when the step fails. */
  out?: { theta: Float32Array; momentum: Float32Array },
): { theta: Float32Array; momentum: Float32Array } | { index: number } {
  const n = theta.length;
  if (momentum.length !== n || delta.length !== n) {
    throw new RangeError(`Outer step needs equal lengths: θ ${n}, m ${momentum.length}, Δ̄ ${delta.length} values`);
  }
  const { lr, momentum: mu } = resolveOuterOptions(options);
  const nextTheta = out?.theta ?? new Float32Array(n);
  const nextMomentum = out?.momentum ?? new Float32Array(n);
  if (nextTheta.length !== n || nextMomentum.length !== n)
    throw new RangeError(`Outer step outputs must hold ${n} values`);
  let bad = -1;
  const simd = options.simd === false ? null : roundKernels();
  const even = simd ? n & ~1 : 0;
  if (simd && even > 0) {
    const { arena, kernels } = simd;
    arena.resetScratch();
    const at = [theta, momentum, delta].map((x) => arena.place(x, 1, even));
    const [t, m] = [arena.scratch(even), arena.scratch(even)] as [number, number];
    const failed = kernels.outerStep(at[0] as number, at[1] as number, at[2] as number, t, m, even, lr, mu);
    nextTheta.set(arena.f32.subarray(t >> 2, (t >> 2) + even));
    nextMomentum.set(arena.f32.subarray(m >> 2, (m >> 2) + even));
    if (failed) bad = firstNonFinite(nextTheta, nextMomentum, even);
  }
  for (let i = even; i < n; i++) {
    const d = delta[i] as number;
    const m = Math.fround(mu * (momentum[i] as number) + d);
    const t = Math.fround((theta[i] as number) - lr * (d + mu * m));
    nextMomentum[i] = m;
    nextTheta[i] = t;
    // m and θ' finite: m − m and θ' − θ' are 0 exactly then, NaN otherwise
    if (bad < 0 && m - m + (t - t) !== 0) bad = i;
  }
  return bad >= 0 ? { index: bad } : { theta: nextTheta, momentum: nextMomentum };
}

/** The first index below `end` where θ′ or m′ is not finite (−1 if none). */
function firstNonFinite(theta: Float32Array, momentum: Float32Array, end: number): number {
  for (let i = 0; i < end; i++) {
    if (!Number.isFinite(theta[i] as number) || !Number.isFinite(momentum[i] as number)) return i;
  }
  return -1;
}

/**
 * The merge of a committed round into θ_local (in place): local ← α·local + (1 − α)·global; with
 * the one-step delay (`base`, θ_local as contributed) local += (1 − α)·(global − base).
 */
export function mergeInPlace(
  local: Float32Array,
  global: Float32Array,
  alpha: number,
  base: Float32Array | null = null,
  options: { simd?: boolean } = {},
): void {
  const n = local.length;
  if (global.length !== n || (base && base.length !== n)) {
    throw new RangeError(`merge needs equal lengths: θ_local ${n}, θ_global ${global.length}`);
  }
  const keep = 1 - alpha;
  const simd = options.simd === false ? null : roundKernels();
  const even = simd ? n & ~1 : 0;
  if (simd && even > 0) {
    const { arena, kernels } = simd;
    arena.resetScratch();
    const at = arena.place(local, 1, even);
    kernels.merge(at, arena.place(global, 1, even), base ? arena.place(base, 1, even) : 0, even, alpha, keep);
    local.set(arena.f32.subarray(at >> 2, (at >> 2) + even));
  }
  if (base) {
    for (let i = even; i < n; i++)
      local[i] = (local[i] as number) + keep * ((global[i] as number) - (base[i] as number));
  } else {
    for (let i = even; i < n; i++) local[i] = alpha * (local[i] as number) + keep * (global[i] as number);
  }
}
