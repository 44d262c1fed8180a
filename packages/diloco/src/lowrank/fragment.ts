/**
 * The low-rank codec over a whole fragment, as a round uses it (docs/lowrank.md, "In a round").
 *
 * A round names a rank r and a side. Each 2-D tensor of the fragment whose factor is at most
 * half its dense size travels as a factor against a basis every replica derives from the
 * fragment's outer momentum m (replicated, hashed state: no basis is stored or sent):
 *   right: basis Q (cols×r) spans the top row space of M (m's tensor); a worker sends Δ·Q;
 *   left:  basis P (rows×r) spans the top column space of M; a worker sends Δᵀ·P.
 * The other tensors (1-D ones, and 2-D ones too small to gain) travel as they are. The payload,
 * which the round's quantiser (fp4, int8, …) encodes and its shards split, is the concatenation
 * in tensor order. Averaging payloads averages the Δ's projections, so owners aggregate as for
 * a dense round, and every replica decodes the same averaged payload to the same Δ̂.
 *
 * Alternating sides across rounds is what lets new directions in: a right round's Δ̂ has m's
 * row space and a new column space, a left round's the reverse (otherwise m's subspace would be
 * locked in). The basis is a randomised range finder with one power iteration, seeded by
 * (fragment, round, tensor), its columns ordered by the energy of M along them, so the first j
 * columns are the best rank-j part and a worker can report the error of every smaller rank.
 */
import type { FragmentTensor } from '../fragments.ts';
import { mixSeed, orthonormalize, seededOrthonormal } from './orthonormal.ts';
import { type LowRankSide, project, reconstruct } from './project.ts';

/** The ranks a room may use, ascending; the adaptive rule moves along them. */
export const LOW_RANK_RUNGS = [1, 2, 4, 8, 16, 32, 64] as const;
export const MAX_LOW_RANK = 64;
/**
 * The adaptive rule's default target for the relative error of a worker's Δ: 0, the most rank
 * throughout (after a dense first round). On the measured run no target did better: 0.6 matched its
 * loss with 1.8× the bytes, and 0.7 and 0.8 chose ranks below 16 and lost 5–8% (docs/lowrank.md).
 */
export const LOW_RANK_TARGET = 0;
/** The most rank of a low-rank method where none is set (`shoal simulate`'s dilocox). */
export const DEFAULT_LOW_RANK = 16;

/** The ranks the adaptive rule chooses from under a most of `rank`: the ladder below it, and it. */
export function lowRankRungs(rank: number): number[] {
  return [...LOW_RANK_RUNGS.filter((r) => r < rank), rank];
}

export interface LowRankSpec {
  rank: number;
  side: LowRankSide;
}

/** How one tensor travels in a round: factored at `rank`, or dense (rank 0). */
export interface LowRankEntry {
  tensor: FragmentTensor;
  /** min(r, rows, cols) when factored; 0 when the tensor goes as it is. */
  rank: number;
  /** Where it sits in the payload, and its values there. */
  payloadOffset: number;
  payloadSize: number;
}

function checkSpec(spec: LowRankSpec): void {
  if (!Number.isSafeInteger(spec.rank) || spec.rank < 1 || spec.rank > MAX_LOW_RANK) {
    throw new RangeError(`low-rank rank must be an integer in 1 … ${MAX_LOW_RANK}, got ${spec.rank}`);
  }
  if (spec.side !== 'right' && spec.side !== 'left') throw new RangeError(`low-rank side '${spec.side}'`);
}

/** Which tensors are factored at this rank and side, and where each sits in the payload. */
export function lowRankPlan(tensors: readonly FragmentTensor[], spec: LowRankSpec): LowRankEntry[] {
  checkSpec(spec);
  let at = 0;
  return tensors.map((tensor) => {
    const { rows, cols, size } = tensor;
    const r = Math.min(spec.rank, rows, cols);
    const factorSize = (spec.side === 'right' ? rows : cols) * r;
    const factored = cols > 1 && rows > 1 && 2 * factorSize <= size;
    const payloadSize = factored ? factorSize : size;
    const entry = { tensor, rank: factored ? r : 0, payloadOffset: at, payloadSize };
    at += payloadSize;
    return entry;
  });
}

/** Values in a round's payload for this fragment at this rank and side. */
export function lowRankPayloadSize(tensors: readonly FragmentTensor[], spec: LowRankSpec): number {
  return lowRankPlan(tensors, spec).reduce((n, e) => n + e.payloadSize, 0);
}

/**
 * The shared basis of one tensor for a round, from its momentum M (rows×cols, row-major): an
 * orthonormal cols×r (right) or rows×r (left), columns by descending energy of M along them.
 * M = 0 (the first rounds) gives the seeded random basis.
 */
export function momentumBasis(
  momentum: Float32Array,
  rows: number,
  cols: number,
  rank: number,
  side: LowRankSide,
  seed: number,
): Float32Array {
  const basisRows = side === 'right' ? cols : rows;
  const start = seededOrthonormal(basisRows, rank, seed);
  // right: Mᵀ(M·G) spans M's top row space; left: M(Mᵀ·G) its top column space
  const other = side === 'right' ? 'left' : 'right';
  const first = project(momentum, rows, cols, start, side);
  const power = project(momentum, rows, cols, first, other);
  const basis = orthonormalize(power, basisRows, rank, mixSeed(seed, rank));
  return byEnergy(basis, basisRows, rank, project(momentum, rows, cols, basis, side));
}

/** Reorders the basis's columns by the norm of the matching columns of `along`, largest first (ties: index). */
function byEnergy(basis: Float32Array, rows: number, rank: number, along: Float32Array): Float32Array {
  const n = along.length / rank;
  const energy = Array.from({ length: rank }, (_, c) => columnEnergy(along, n, c));
  const order = energy.map((_, c) => c).sort((a, b) => (energy[b] as number) - (energy[a] as number) || a - b);
  const out = new Float32Array(basis.length);
  for (const [to, c] of order.entries()) out.set(basis.subarray(c * rows, (c + 1) * rows), to * rows);
  return out;
}

function columnEnergy(m: Float32Array, rows: number, c: number): number {
  let sum = 0;
  for (let i = c * rows; i < (c + 1) * rows; i++) sum += (m[i] as number) * (m[i] as number);
  return sum;
}

function sumSquares(values: Float32Array): number {
  let sum = 0;
  for (let i = 0; i < values.length; i++) sum += (values[i] as number) * (values[i] as number);
  return sum;
}

/**
 * One round's projection of a fragment: the plan and the bases, built from θ_global's momentum
 * at the round's base (every replica, and every participant, builds the same). `seed` must be the
 * same everywhere for the round: `lowRankSeed(fragment, round)`.
 */
export class FragmentProjection {
  readonly plan: LowRankEntry[];
  readonly payloadSize: number;
  readonly fragmentSize: number;
  readonly spec: LowRankSpec;
  private readonly bases: (Float32Array | null)[];

  constructor(tensors: readonly FragmentTensor[], momentum: Float32Array, spec: LowRankSpec, seed: number) {
    this.spec = { ...spec };
    this.plan = lowRankPlan(tensors, spec);
    this.payloadSize = this.plan.reduce((n, e) => n + e.payloadSize, 0);
    this.fragmentSize = tensors.reduce((n, t) => n + t.size, 0);
    if (momentum.length !== this.fragmentSize) {
      throw new RangeError(
        `FragmentProjection: momentum has ${momentum.length} values, the fragment ${this.fragmentSize}`,
      );
    }
    this.bases = this.plan.map((e, t) => {
      if (e.rank === 0) return null;
      const { offset, size, rows, cols } = e.tensor;
      return momentumBasis(momentum.subarray(offset, offset + size), rows, cols, e.rank, spec.side, mixSeed(seed, t));
    });
  }

  /** The payload for a fragment-sized Δ (its factors, and its dense tensors as they are). */
  encode(values: Float32Array): Float32Array {
    this.check('encode', values.length, this.fragmentSize);
    const payload = new Float32Array(this.payloadSize);
    for (const [t, e] of this.plan.entries()) {
      const { offset, size, rows, cols } = e.tensor;
      const part = values.subarray(offset, offset + size);
      const basis = this.bases[t];
      payload.set(basis ? project(part, rows, cols, basis, this.spec.side) : part, e.payloadOffset);
    }
    return payload;
  }

  /** The fragment-sized Δ̂ a payload stands for. */
  decode(payload: Float32Array): Float32Array {
    this.check('decode', payload.length, this.payloadSize);
    const out = new Float32Array(this.fragmentSize);
    for (const [t, e] of this.plan.entries()) {
      const { offset, rows, cols } = e.tensor;
      const part = payload.subarray(e.payloadOffset, e.payloadOffset + e.payloadSize);
      const basis = this.bases[t];
      out.set(basis ? reconstruct(part, basis, this.spec.side, rows, cols) : part, offset);
    }
    return out;
  }

  /**
   * The relative error ‖c − ĉ_j‖/‖c‖ over the factored tensors, for each rung j of
   * `lowRankRungs(rank)`, of a Δ and its (unquantised) payload: the basis's first j columns kept. The adaptive
   * rule reads these (docs/lowrank.md, "Adaptive rank"). Empty when nothing is factored.
   */
  rungErrors(values: Float32Array, payload: Float32Array): number[] {
    const rungs = lowRankRungs(this.spec.rank);
    if (!this.plan.some((e) => e.rank > 0)) return [];
    let total = 0;
    const captured = rungs.map(() => 0);
    for (const e of this.plan) {
      if (e.rank === 0) continue;
      const { offset, size } = e.tensor;
      total += sumSquares(values.subarray(offset, offset + size));
      const factor = payload.subarray(e.payloadOffset, e.payloadOffset + e.payloadSize);
      const n = e.payloadSize / e.rank;
      for (let c = 0; c < e.rank; c++) {
        const energy = columnEnergy(factor, n, c);
        rungs.forEach((j, k) => {
          if (c < j) captured[k] = (captured[k] as number) + energy;
        });
      }
    }
    if (total === 0) return rungs.map(() => 0);
    return captured.map((c) => Math.sqrt(Math.max(0, total - c) / total));
  }

  private check(what: string, length: number, expected: number): void {
    if (length !== expected) throw new RangeError(`FragmentProjection.${what}: ${length} values, expected ${expected}`);
  }
}

/** The seed of a round's bases: the same on every replica. */
export function lowRankSeed(fragment: number, round: number): number {
  return mixSeed(0x5eed10 + fragment, round);
}

/**
 * A worker's error feedback for the low-rank codec, per fragment (local, like ErrorFeedback):
 * c = Δ + e is projected and the round's quantiser applied; e ← c − decode(what was sent), staged
 * until the round commits (`commit`) or dropped when it aborts (`discard`). Rooms keep none by
 * default (`errorFeedback` in the run config; docs/lowrank.md says why).
 */
export class LowRankFeedback {
  private residualValues: Float32Array;
  private staged: Float32Array | null = null;

  /** `keep` false: nothing is kept (the residual stays zero); the payload and errors are the same. */
  constructor(
    readonly size: number,
    readonly keep = true,
  ) {
    this.residualValues = new Float32Array(keep ? size : 0);
  }

  get pending(): boolean {
    return this.staged !== null;
  }

  /** What is kept (zeros when nothing is). */
  get residual(): Float32Array {
    return this.keep ? this.residualValues.slice() : new Float32Array(this.size);
  }

  /**
   * The payload to send for Δ, and the rung errors of the error-fed Δ. `roundTrip` maps a payload
   * to what the room decodes (the quantiser's encode then decode); `limit` scales the payload down
   * so no value exceeds it (the owners' bound), the residual keeping what that left out.
   */
  encode(
    delta: Float32Array,
    projection: FragmentProjection,
    roundTrip: (payload: Float32Array) => Float32Array = (p) => p,
    limit = Number.POSITIVE_INFINITY,
  ): { payload: Float32Array; errors: number[] } {
    if (delta.length !== this.size)
      throw new RangeError(`LowRankFeedback: Δ has ${delta.length} values, not ${this.size}`);
    const fed = new Float32Array(delta);
    if (this.keep)
      for (let i = 0; i < fed.length; i++) fed[i] = (fed[i] as number) + (this.residualValues[i] as number);
    const payload = projection.encode(fed);
    const errors = projection.rungErrors(fed, payload);
    let largest = 0;
    for (let i = 0; i < payload.length; i++) largest = Math.max(largest, Math.abs(payload[i] as number));
    if (largest > limit) {
      const scale = limit / largest;
      for (let i = 0; i < payload.length; i++) payload[i] = (payload[i] as number) * scale;
    }
    if (!this.keep) return { payload, errors };
    const sent = projection.decode(roundTrip(payload));
    for (let i = 0; i < fed.length; i++) fed[i] = (fed[i] as number) - (sent[i] as number);
    this.staged = fed;
    return { payload, errors };
  }

  /**
   * A dense round in a low-rank room: Δ plus the whole residual goes out as it is (scaled into
   * `limit` if need be, the rest kept), so nothing stays behind. Returns what to send.
   */
  flush(delta: Float32Array, limit = Number.POSITIVE_INFINITY): Float32Array {
    if (delta.length !== this.size)
      throw new RangeError(`LowRankFeedback: Δ has ${delta.length} values, not ${this.size}`);
    const fed = new Float32Array(delta);
    let largest = 0;
    for (let i = 0; i < fed.length; i++) {
      if (this.keep) fed[i] = (fed[i] as number) + (this.residualValues[i] as number);
      largest = Math.max(largest, Math.abs(fed[i] as number));
    }
    const scale = largest > limit ? limit / largest : 1;
    const kept = new Float32Array(this.size);
    if (scale < 1) {
      for (let i = 0; i < fed.length; i++) {
        const sent = (fed[i] as number) * scale;
        kept[i] = (fed[i] as number) - sent;
        fed[i] = sent;
      }
    }
    if (this.keep) this.staged = kept;
    return fed;
  }

  commit(): void {
    if (this.staged) this.residualValues = this.staged;
    this.staged = null;
  }

  discard(): void {
    this.staged = null;
  }
}
