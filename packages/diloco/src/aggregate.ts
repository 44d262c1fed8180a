/**
 * Aggregation rules: how a shard owner combines the K participants' decoded Δ (one shard each,
 * same length) into the one Δ̄ that every replica's outer step uses.
 *
 * - `mean`: weighted mean, Σ w_k·Δ_k / Σ w_k. Weights are tokens trained (the coordinator caps
 *   them at weightCapFactor × the median, 2×, before they get here).
 * - `clipped-mean`: each Δ_k is first scaled down to at most `clipFactor` × the median L2 norm,
 *   then the weighted mean. The median of an even count is the lower middle norm, so with K = 2
 *   one huge contribution cannot lift its own threshold. Needs an honest majority to mean anything.
 * - `trimmed-mean`: per coordinate, drop the t lowest and t highest values, weighted mean of the
 *   rest (their weights renormalised per coordinate). t = ⌊trimFraction·K⌋, but at least 1 when
 *   K ≥ 3 and trimFraction > 0 (10% of a room of 4 rounds to nothing, which would silently make
 *   this the plain mean) and at most ⌊(K − 1)/2⌋ so a value is left; K = 3 is the coordinate-wise
 *   median. For K ≤ 2 nothing can be trimmed: t = 0, the weighted mean, and the result says so.
 *   Ties are broken by contribution index (a lower index counts as the smaller).
 * - `centered-clip`: CenteredClip (Karimireddy, He & Jaggi 2021, "Learning from History for
 *   Byzantine Robust Optimization"; BTARD, Gorbunov et al. 2021): first each Δ_k scaled to at most
 *   `clipFactor` × the median L2 norm, as `clipped-mean`; then, from the coordinate-wise median v
 *   (the mean of the two middle values for an even K), `iterations` times
 *   v ← v + Σ_k (w_k/W)·clip_τ(Δ_k − v), clip_τ(x) = x·min(1, τ/‖x‖), with the radius
 *   τ = `radiusFactor` × the median (lower middle) of ‖Δ_k − v‖ at the start. A contribution
 *   that is large in any direction moves v by at most its weight share of τ per iteration, and τ
 *   is set by the honest majority's own spread around the centre; honest contributions within τ
 *   are averaged as by the mean. K = 1 gives Δ_1. With K = 2 both start τ from the midpoint, so
 *   the first iteration gives the clipped mean; later ones move on toward the heavier of the two
 *   (the lighter is then beyond τ), by at most the lighter's weight share of τ each.
 *
 * Every rule first sets aside contributions with a wrong length, a non-finite value or a weight
 * that is not a finite number > 0, and says which and why in the result (never a throw); the rest
 * are aggregated, or, if none is left, the result says that instead.
 *
 * Determinism: each output coordinate is a float64 sum over the accepted contributions in index
 * order, rounded once to float32, so every owner computes the same bits from the same inputs.
 */

import { ClipKernels, type ClipPasses, clipPassesSimd } from './aggregate.simd.ts';
import { columnMedian, lowerMiddle, pullsOf } from './clip-math.ts';

export interface Contribution {
  values: Float32Array;
  /** Tokens behind this Δ; must be finite and > 0. */
  weight: number;
}

export type RejectionReason = 'length' | 'non-finite' | 'weight';

export interface Rejection {
  /** Position in the contributions array. */
  index: number;
  reason: RejectionReason;
  message: string;
}

export interface AggregateSuccess {
  ok: true;
  values: Float32Array;
  /** Indices of the contributions that were aggregated, ascending. */
  accepted: number[];
  rejected: Rejection[];
}

export interface ClippedMeanSuccess extends AggregateSuccess {
  medianNorm: number;
  threshold: number;
  /** Contributions scaled down, with their L2 norm and the factor applied (< 1). */
  clipped: { index: number; norm: number; factor: number }[];
}

export interface TrimmedMeanSuccess extends AggregateSuccess {
  /** Values dropped at each end, per coordinate; 0 means this was the weighted mean. */
  trimPerSide: number;
}

export interface AggregateFailure {
  ok: false;
  reason: 'no-valid-contributions';
  message: string;
  rejected: Rejection[];
}

export interface AggregateOptions {
  /** The shard length; defaults to the first contribution's length. Pass it when known. */
  length?: number;
  /** false: the scalar loops only (the reference the SIMD kernels are tested against). */
  simd?: boolean;
}

export type AggregationRule =
  | { kind: 'mean' }
  | { kind: 'clipped-mean'; clipFactor?: number }
  | { kind: 'trimmed-mean'; trimFraction?: number }
  | { kind: 'centered-clip'; clipFactor?: number; radiusFactor?: number; iterations?: number };

/**
 * The rules by name (`--aggregation`, the host form); the default is run-options.ts's,
 * centered-clip (docs/robust-aggregation.md), which came last.
 */
export const AGGREGATION_KINDS = ['clipped-mean', 'trimmed-mean', 'mean', 'centered-clip'] as const;
export type AggregationKind = (typeof AGGREGATION_KINDS)[number];

/** The rule of that name with its default parameters; a RangeError names the choices. */
export function aggregationRuleOf(kind: string): AggregationRule {
  if (!(AGGREGATION_KINDS as readonly string[]).includes(kind)) {
    throw new RangeError(`unknown aggregation "${kind}": choose ${AGGREGATION_KINDS.join(', ')}`);
  }
  return { kind: kind as AggregationKind };
}

export const DEFAULT_CLIP_FACTOR = 2;
export const DEFAULT_TRIM_FRACTION = 0.1;
/** τ as a multiple of the median distance from the centre (docs/robust-aggregation.md). */
export const DEFAULT_RADIUS_FACTOR = 1;
/** CenteredClip's iterations: a fixed count, so every owner stops at the same bits. */
export const DEFAULT_CLIP_ITERATIONS = 3;
/** The most iterations a rule may ask for (each is two passes over K shards). */
export const MAX_CLIP_ITERATIONS = 16;

interface Screened {
  accepted: number[];
  rejected: Rejection[];
  length: number;
}

/** Sets aside contributions with a wrong length, a non-finite value or a bad weight. */
export function screenContributions(contributions: readonly Contribution[], options: AggregateOptions = {}): Screened {
  const length = options.length ?? contributions[0]?.values.length ?? 0;
  const accepted: number[] = [];
  const rejected: Rejection[] = [];
  contributions.forEach(({ values, weight }, index) => {
    if (!(Number.isFinite(weight) && weight > 0)) {
      rejected.push({ index, reason: 'weight', message: `weight ${weight} is not a finite number > 0` });
    } else if (values.length !== length) {
      rejected.push({ index, reason: 'length', message: `${values.length} values, the shard has ${length}` });
    } else {
      let bad = -1;
      for (let i = 0; i < length && bad < 0; i++) if (!Number.isFinite(values[i])) bad = i;
      if (bad >= 0) rejected.push({ index, reason: 'non-finite', message: `value ${values[bad]} at index ${bad}` });
      else accepted.push(index);
    }
  });
  return { accepted, rejected, length };
}

function noneLeft(contributions: readonly Contribution[], rejected: Rejection[]): AggregateFailure {
  const message =
    contributions.length === 0 ? 'no contributions' : `all ${contributions.length} contributions were rejected`;
  return { ok: false, reason: 'no-valid-contributions', message, rejected };
}

/** Σ_k coefficient_k · values_k in index order, float64, rounded to float32 once per coordinate. */
function combine(contributions: readonly Contribution[], accepted: number[], coefficients: number[], length: number) {
  const sum = new Float64Array(length);
  accepted.forEach((k, j) => {
    const values = (contributions[k] as Contribution).values;
    const c = coefficients[j] as number;
    for (let i = 0; i < length; i++) sum[i] = (sum[i] as number) + c * (values[i] as number);
  });
  return new Float32Array(sum); // one rounding per coordinate
}

const weightsOf = (contributions: readonly Contribution[], accepted: number[]) =>
  accepted.map((k) => (contributions[k] as Contribution).weight);

export function weightedMean(
  contributions: readonly Contribution[],
  options: AggregateOptions = {},
): AggregateSuccess | AggregateFailure {
  const { accepted, rejected, length } = screenContributions(contributions, options);
  if (accepted.length === 0) return noneLeft(contributions, rejected);
  const weights = weightsOf(contributions, accepted);
  const total = weights.reduce((a, b) => a + b, 0);
  const values = combine(
    contributions,
    accepted,
    weights.map((w) => w / total),
    length,
  );
  return { ok: true, values, accepted, rejected };
}

/** L2 norm in float64, summed in index order. */
export function l2Norm(values: Float32Array): number {
  let sum = 0;
  for (let i = 0; i < values.length; i++) sum += (values[i] as number) * (values[i] as number);
  return Math.sqrt(sum);
}

/** The factor (≤ 1) that scales each accepted Δ_k to at most clipFactor × the median L2 norm. */
function normClip(norms: readonly number[], accepted: number[], clipFactor: number) {
  const medianNorm = lowerMiddle([...norms]);
  const threshold = clipFactor * medianNorm;
  const clipped: ClippedMeanSuccess['clipped'] = [];
  const factors = norms.map((norm, j) => {
    if (norm <= threshold) return 1;
    const factor = threshold / norm;
    clipped.push({ index: accepted[j] as number, norm, factor });
    return factor;
  });
  return { medianNorm, threshold, clipped, factors };
}

export function clippedMean(
  contributions: readonly Contribution[],
  options: AggregateOptions & { clipFactor?: number } = {},
): ClippedMeanSuccess | AggregateFailure {
  const clipFactor = options.clipFactor ?? DEFAULT_CLIP_FACTOR;
  if (!(Number.isFinite(clipFactor) && clipFactor > 0)) {
    throw new RangeError(`clipFactor must be a finite number > 0, got ${clipFactor}`);
  }
  const { accepted, rejected, length } = screenContributions(contributions, options);
  if (accepted.length === 0) return noneLeft(contributions, rejected);
  const norms = accepted.map((k) => l2Norm((contributions[k] as Contribution).values));
  const { medianNorm, threshold, clipped, factors } = normClip(norms, accepted, clipFactor);
  const weights = weightsOf(contributions, accepted);
  const total = weights.reduce((a, b) => a + b, 0);
  const coefficients = weights.map((w, j) => (w / total) * (factors[j] as number));
  const values = combine(contributions, accepted, coefficients, length);
  return { ok: true, values, accepted, rejected, medianNorm, threshold, clipped };
}

/** Values dropped at each end for K contributions (see the file comment). */
export function trimPerSide(count: number, trimFraction: number): number {
  if (trimFraction === 0 || count < 3) return 0;
  return Math.min(Math.max(1, Math.floor(trimFraction * count)), Math.floor((count - 1) / 2));
}

export function trimmedMean(
  contributions: readonly Contribution[],
  options: AggregateOptions & { trimFraction?: number } = {},
): TrimmedMeanSuccess | AggregateFailure {
  const trimFraction = options.trimFraction ?? DEFAULT_TRIM_FRACTION;
  if (!(trimFraction >= 0 && trimFraction < 0.5)) {
    throw new RangeError(`trimFraction must be in [0, 0.5), got ${trimFraction}`);
  }
  const { accepted, rejected, length } = screenContributions(contributions, options);
  if (accepted.length === 0) return noneLeft(contributions, rejected);
  const K = accepted.length;
  const t = trimPerSide(K, trimFraction);
  const rows = accepted.map((k) => (contributions[k] as Contribution).values);
  const weights = weightsOf(contributions, accepted);
  if (t === 0) {
    const total = weights.reduce((a, b) => a + b, 0);
    const values = combine(
      contributions,
      accepted,
      weights.map((w) => w / total),
      length,
    );
    return { ok: true, values, accepted, rejected, trimPerSide: 0 };
  }
  const values = new Float32Array(length);
  const dropped = new Uint8Array(K);
  for (let i = 0; i < length; i++) {
    dropped.fill(0);
    // t passes: drop the smallest and the largest (value, index) still in
    for (let pass = 0; pass < t; pass++) {
      let low = -1;
      let high = -1;
      for (let j = 0; j < K; j++) {
        if (dropped[j]) continue;
        const x = (rows[j] as Float32Array)[i] as number;
        if (low < 0 || x < ((rows[low] as Float32Array)[i] as number)) low = j;
        if (high < 0 || x >= ((rows[high] as Float32Array)[i] as number)) high = j;
      }
      dropped[low] = 1;
      dropped[high] = 1;
    }
    let sum = 0;
    let weightSum = 0;
    for (let j = 0; j < K; j++) {
      if (dropped[j]) continue;
      sum += (weights[j] as number) * ((rows[j] as Float32Array)[i] as number);
      weightSum += weights[j] as number;
    }
    values[i] = sum / weightSum;
  }
  return { ok: true, values, accepted, rejected, trimPerSide: t };
}

export interface CenteredClipSuccess extends ClippedMeanSuccess {
  /** τ, the radius around the centre beyond which a contribution's pull is clipped. */
  radius: number;
  /** Per iteration, the contributions whose pull was clipped (indices into the contributions). */
  pulledIn: number[][];
}

/** The coordinate-wise median of rows (scaled by factors), float64: the middle, or the mean of the two middles. */
function coordinateMedian(rows: Float32Array[], factors: number[], length: number): Float64Array {
  const column = new Float64Array(rows.length);
  const median = new Float64Array(length);
  for (let i = 0; i < length; i++) {
    for (let j = 0; j < rows.length; j++) column[j] = (factors[j] as number) * ((rows[j] as Float32Array)[i] as number);
    median[i] = columnMedian(column);
  }
  return median;
}

/** ‖factor·row − centre‖₂, float64 in index order. */
function distanceTo(row: Float32Array, factor: number, centre: Float64Array): number {
  let sum = 0;
  for (let i = 0; i < centre.length; i++) {
    const d = factor * (row[i] as number) - (centre[i] as number);
    sum += d * d;
  }
  return Math.sqrt(sum);
}

/** CenteredClip's median and iterations the scalar way (pulledIn as positions in `rows`). */
function clipPassesScalar(
  rows: Float32Array[],
  factors: number[],
  shares: number[],
  radiusFactor: number,
  iterations: number,
  length: number,
): ClipPasses {
  const centre = coordinateMedian(rows, factors, length);
  const radius = radiusFactor * lowerMiddle(rows.map((row, j) => distanceTo(row, factors[j] as number, centre)));
  const pulledIn: number[][] = [];
  const step = new Float64Array(length);
  for (let iteration = 0; iteration < iterations; iteration++) {
    // each contribution's pull on the centre: its weight share, scaled into the radius
    const distances = rows.map((row, j) => distanceTo(row, factors[j] as number, centre));
    const { pulls, beyond } = pullsOf(distances, shares, radius);
    pulledIn.push(beyond);
    step.fill(0);
    rows.forEach((row, j) => {
      const c = pulls[j] as number;
      const f = factors[j] as number;
      for (let i = 0; i < length; i++)
        step[i] = (step[i] as number) + c * (f * (row[i] as number) - (centre[i] as number));
    });
    for (let i = 0; i < length; i++) centre[i] = (centre[i] as number) + (step[i] as number);
  }
  return { values: new Float32Array(centre), radius, pulledIn }; // one rounding per coordinate
}

/**
 * The screening and the norms with the SIMD kernels: null (the scalar way then) where they are
 * missing, or where a value is not finite (the scalar screen words which).
 */
function screenSimd(contributions: readonly Contribution[], options: AggregateOptions) {
  const length = options.length ?? contributions[0]?.values.length ?? 0;
  const rejected: Rejection[] = [];
  const accepted: number[] = [];
  contributions.forEach(({ values, weight }, index) => {
    if (!(Number.isFinite(weight) && weight > 0)) {
      rejected.push({ index, reason: 'weight', message: `weight ${weight} is not a finite number > 0` });
    } else if (values.length !== length) {
      rejected.push({ index, reason: 'length', message: `${values.length} values, the shard has ${length}` });
    } else accepted.push(index);
  });
  const rows = accepted.map((k) => (contributions[k] as Contribution).values);
  const kernels = ClipKernels.create(rows, length & ~3);
  if (!kernels) return null;
  const sums = kernels.sumsOfSquares();
  const norms = rows.map((row, j) => {
    let sum = sums[j] as number;
    for (let i = length & ~3; i < length; i++) sum += (row[i] as number) * (row[i] as number);
    return Math.sqrt(sum);
  });
  // a norm is finite exactly when every value is (float32 squares cannot overflow float64)
  if (!norms.every(Number.isFinite)) return null;
  return { screened: { accepted, rejected, length }, norms, kernels };
}

export function centeredClip(
  contributions: readonly Contribution[],
  options: AggregateOptions & { clipFactor?: number; radiusFactor?: number; iterations?: number } = {},
): CenteredClipSuccess | AggregateFailure {
  const clipFactor = options.clipFactor ?? DEFAULT_CLIP_FACTOR;
  const radiusFactor = options.radiusFactor ?? DEFAULT_RADIUS_FACTOR;
  const iterations = options.iterations ?? DEFAULT_CLIP_ITERATIONS;
  if (!(Number.isFinite(clipFactor) && clipFactor > 0)) {
    throw new RangeError(`clipFactor must be a finite number > 0, got ${clipFactor}`);
  }
  if (!(Number.isFinite(radiusFactor) && radiusFactor > 0)) {
    throw new RangeError(`radiusFactor must be a finite number > 0, got ${radiusFactor}`);
  }
  if (!(Number.isInteger(iterations) && iterations >= 1 && iterations <= MAX_CLIP_ITERATIONS)) {
    throw new RangeError(`iterations must be an integer in 1 … ${MAX_CLIP_ITERATIONS}, got ${iterations}`);
  }
  const fast = options.simd === false ? null : screenSimd(contributions, options);
  const { accepted, rejected, length } = fast?.screened ?? screenContributions(contributions, options);
  if (accepted.length === 0) return noneLeft(contributions, rejected);
  const rows = accepted.map((k) => (contributions[k] as Contribution).values);
  const norms = fast?.norms ?? rows.map(l2Norm);
  const { medianNorm, threshold, clipped, factors } = normClip(norms, accepted, clipFactor);
  const weights = weightsOf(contributions, accepted);
  const total = weights.reduce((a, b) => a + b, 0);
  const shares = weights.map((w) => w / total);
  const passes =
    (fast && clipPassesSimd(fast.kernels, rows, factors, shares, radiusFactor, iterations, length)) ??
    clipPassesScalar(rows, factors, shares, radiusFactor, iterations, length);
  const pulledIn = passes.pulledIn.map((positions) => positions.map((j) => accepted[j] as number));
  return {
    ok: true,
    values: passes.values,
    accepted,
    rejected,
    medianNorm,
    threshold,
    clipped,
    radius: passes.radius,
    pulledIn,
  };
}

/** Dispatches on a rule, for configuration (`--aggregate trimmed-mean`). */
export function aggregate(
  contributions: readonly Contribution[],
  rule: AggregationRule,
  options: AggregateOptions = {},
): AggregateSuccess | AggregateFailure {
  switch (rule.kind) {
    case 'mean':
      return weightedMean(contributions, options);
    case 'clipped-mean':
      return clippedMean(contributions, { ...options, clipFactor: rule.clipFactor });
    case 'trimmed-mean':
      return trimmedMean(contributions, { ...options, trimFraction: rule.trimFraction });
    case 'centered-clip':
      return centeredClip(contributions, {
        ...options,
        clipFactor: rule.clipFactor,
        radiusFactor: rule.radiusFactor,
        iterations: rule.iterations,
      });
  }
}
