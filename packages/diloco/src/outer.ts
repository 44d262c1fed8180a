/**
 * The outer optimizer: Nesterov momentum as PyTorch's
 * `torch.optim.SGD(params, lr=η, momentum=μ, nesterov=True, dampening=0, weight_decay=0)`,
 * with the aggregated pseudo-gradient Δ̄ = mean(θ_global − θ_local) in the role of the gradient:
 *
 *     m ← μ·m + Δ̄
 *     θ ← θ − η·(Δ̄ + μ·m)        (m is the value just updated)
 *
 * PyTorch initialises the buffer on the first step to a copy of the gradient instead of applying
 * the formula. Starting m at zeros gives the same first buffer: μ·(+0) + Δ̄ = Δ̄ exactly for every
 * finite Δ̄ (bit for bit, except that a −0 in Δ̄ becomes +0, which changes no later value), so one
 * code path serves both and a fresh replica just holds m = 0.
 *
 * Determinism: every replica runs this on the CPU over the same three fp32 vectors, element by
 * element in index order. Each element's expression is evaluated in float64 (what JS numbers are;
 * IEEE-754 fixes every operation's result and JS engines never fuse a multiply-add) and rounded
 * to fp32 where it is stored (m, then θ). So any two replicas, on any JS engine and CPU, end with
 * bitwise-identical θ_global and m, which is what the round's hash check relies on. Against
 * PyTorch's fp32 kernels (which round after every operation, sometimes fused) results agree to
 * an ulp or two, not bit for bit.
 */
import { DILOCO_RANGES, inRange } from './settings.ts';

export interface OuterOptimizerOptions {
  /** η, the outer learning rate (DILOCO_RANGES.outerLr; 0.7 by default). */
  lr?: number;
  /** μ, the momentum (DILOCO_RANGES.outerMomentum; 0.9 by default). */
  momentum?: number;
}

/** Throws unless η and μ are within their ranges (settings.ts); returns them with defaults filled in. */
export function resolveOuterOptions(options: OuterOptimizerOptions = {}): Required<OuterOptimizerOptions> {
  const { outerLr, outerMomentum } = DILOCO_RANGES;
  const lr = options.lr ?? outerLr.default;
  const momentum = options.momentum ?? outerMomentum.default;
  if (!inRange(lr, outerLr)) throw new RangeError(`Outer lr must be in [${outerLr.min}, ${outerLr.max}], got ${lr}`);
  if (!inRange(momentum, outerMomentum)) {
    throw new RangeError(`Outer momentum must be in [${outerMomentum.min}, ${outerMomentum.max}], got ${momentum}`);
  }
  return { lr, momentum };
}

/**
 * One outer Nesterov step for one fragment, in place: updates `momentum` (m) and then `theta`
 * (θ_global) from `delta` (Δ̄). All three are the fragment's contiguous form (see fragments.ts),
 * the same length; `delta` is only read.
 */
export function outerNesterovStep(
  theta: Float32Array,
  momentum: Float32Array,
  delta: Float32Array,
  options: OuterOptimizerOptions = {},
): void {
  if (momentum.length !== theta.length || delta.length !== theta.length) {
    throw new RangeError(
      `Outer step needs equal lengths: θ ${theta.length}, m ${momentum.length}, Δ̄ ${delta.length} values`,
    );
  }
  const { lr, momentum: mu } = resolveOuterOptions(options);
  for (let i = 0; i < theta.length; i++) {
    const d = delta[i] as number;
    const m = Math.fround(mu * (momentum[i] as number) + d);
    momentum[i] = m;
    theta[i] = Math.fround((theta[i] as number) - lr * (d + mu * m));
  }
}

/**
 * The outer step applied to copies: returns θ' and m' and leaves the inputs alone. This is the
 * tentative apply of "Apply, commit, abort": a replica hashes θ' ‖ m', adopts them on commit
 * and drops them on abort.
 */
export function tentativeOuterStep(
  theta: Float32Array,
  momentum: Float32Array,
  delta: Float32Array,
  options: OuterOptimizerOptions = {},
): { theta: Float32Array; momentum: Float32Array } {
  const nextTheta = theta.slice();
  const nextMomentum = momentum.slice();
  outerNesterovStep(nextTheta, nextMomentum, delta, options);
  return { theta: nextTheta, momentum: nextMomentum };
}
