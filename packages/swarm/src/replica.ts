/**
 * What every replica holds (docs/design.md, "Apply, commit, abort"): θ_global and the outer
 * momentum m, per fragment in its contiguous form, the last committed round and its hash; and the
 * rounds in flight, whose shard results arrive one by one. When a round's last shard result is
 * in, the replica applies the outer step to copies (tentative), hashes θ' ‖ m' and reports the
 * hash; on commit it adopts θ' and m' if its hash is the committed one, else it is diverged.
 *
 * Every replica decodes the same encoded shard results and runs the same fixed-order f32 outer
 * step, so replicas agree bitwise whatever their GPUs. Replicas of one process (the simulator) may
 * share that work through a RoundMemo (round-memo.ts): each result under its exact inputs.
 */
import {
  type Codec,
  checkedOuterStep,
  type Fragment,
  type FragmentHasher,
  FragmentProjection,
  firstOutOfBounds,
  gatherFragment,
  type LowRankSpec,
  lowRankSeed,
  type OuterOptimizerOptions,
  scatterFragment,
  vectorPool,
} from '@shoal/diloco';
import type { RunConfig, ShardRange } from '@shoal/protocol';
import { contributionBound } from './config.ts';
import {
  type CommitOutcome,
  type Decoded,
  key,
  type PendingRound,
  type ShardClaim,
  type ShardResultOutcome,
  type ShardSlot,
  type ShardSource,
  type StepOutcome,
  verifiedResult,
  verifiedValues,
} from './replica-round.ts';
import { codecKey, fragmentKey, type RoundMemo, type VectorInterner } from './round-memo.ts';

export type { CommitOutcome, ShardClaim, ShardResultOutcome, ShardSource } from './replica-round.ts';
export type { VectorInterner } from './round-memo.ts';

export interface FragmentState {
  readonly fragment: Fragment;
  /** θ_global[p], contiguous. */
  theta: Float32Array;
  /** Outer momentum m[p], contiguous. */
  momentum: Float32Array;
  /** Last committed round (0: none yet). */
  round: number;
  hash: string;
}

/** What a run's replica starts from besides the run's config (ReplicaState.forRun). */
export interface ReplicaSetup {
  fragments: readonly Fragment[];
  /** θ_global in the logical layout (the seeded init, or a checkpoint). */
  params: Float32Array;
  hasher: FragmentHasher;
  /** Outer momentum in the logical layout; zeros when omitted. */
  momentum?: Float32Array;
  vectors?: VectorInterner;
  memo?: RoundMemo;
}

export class ReplicaState {
  readonly fragments: FragmentState[];
  private readonly pending = new Map<string, PendingRound>();
  /** With a memo: each fragment's layout and this replica's step settings, as memo keys. */
  private readonly fragmentKeys: string[];
  private readonly settingsKey: string;
  /**
   * The fragments this replica follows (applies rounds of, holds θ_global and m of); null: all.
   * A pipeline stage follows its stage's fragments only: the others' state is released.
   */
  private followed: ReadonlySet<number> | null = null;

  constructor(
    fragments: readonly Fragment[],
    /** θ_global in the logical layout (the seeded init, or a checkpoint). */
    params: Float32Array,
    readonly hasher: FragmentHasher,
    private readonly outer: OuterOptimizerOptions,
    /** Outer momentum in the logical layout; zeros when omitted. */
    momentum?: Float32Array,
    /** The largest |Δ̄| coordinate an outer step accepts (contributionBound); Infinity: none. */
    private readonly maxMagnitude = Number.POSITIVE_INFINITY,
    /** Shares the vectors it holds with other replicas of this process (the simulator); none by default. */
    private readonly vectors: VectorInterner | null = null,
    /** Shares decoded results, projections and outer steps with other replicas of this process (the simulator). */
    readonly memo: RoundMemo | null = null,
  ) {
    this.fragmentKeys = memo ? fragments.map(fragmentKey) : [];
    this.settingsKey = `${hasher.algorithm} ${outer.lr} ${outer.momentum} ${maxMagnitude}`;
    this.fragments = fragments.map((fragment) => {
      const theta = this.keep(gatherFragment(params, fragment));
      const m = this.keep(momentum ? gatherFragment(momentum, fragment) : new Float32Array(fragment.size));
      return { fragment, theta, momentum: m, round: 0, hash: hasher.hash(theta, m) };
    });
  }

  /** A replica of a room's run: its outer optimizer and its bound on an outer step, from `config`. */
  static forRun(config: RunConfig, o: ReplicaSetup): ReplicaState {
    const { outerLr: lr, outerMomentum: momentum } = config.diloco;
    return new ReplicaState(
      o.fragments,
      o.params,
      o.hasher,
      { lr, momentum },
      o.momentum,
      contributionBound(config),
      o.vectors ?? null,
      o.memo ?? null,
    );
  }

  /** A vector it holds from now on and never writes to: the interner's copy of it, if any. */
  private keep(values: Float32Array): Float32Array {
    return this.vectors ? this.vectors.intern(values) : values;
  }

  /** Whether it follows fragment p (holds its state and applies its rounds). */
  follows(p: number): boolean {
    return this.followed === null || this.followed.has(p);
  }

  /**
   * Follows only `fragments` (null: all) from now on: the others' θ_global and m are released and
   * their rounds forgotten. Returns the fragments it follows now and did not hold: their state is
   * stale and must be fetched.
   */
  follow(fragments: ReadonlySet<number> | null): number[] {
    const stale = this.fragments.flatMap((f, p) =>
      (fragments === null || fragments.has(p)) && f.theta.length !== f.fragment.size ? [p] : [],
    );
    this.followed = fragments;
    for (const [p, state] of this.fragments.entries()) {
      if (this.follows(p)) continue;
      state.theta = new Float32Array(0);
      state.momentum = new Float32Array(0);
      for (const k of [...this.pending.keys()]) if (k.startsWith(`${p}:`)) this.pending.delete(k);
    }
    return stale;
  }

  fragment(p: number): FragmentState {
    const state = this.fragments[p];
    if (!state) throw new RangeError(`no fragment ${p} (the run has ${this.fragments.length})`);
    return state;
  }

  /** θ_global in the logical layout (for evaluation, checkpoints, a worker's merge); unfollowed fragments left as they are in `out`. */
  params(out: Float32Array): Float32Array {
    for (const [p, state] of this.fragments.entries()) {
      if (this.follows(p)) scatterFragment(state.theta, state.fragment, out);
    }
    return out;
  }

  momentum(out: Float32Array): Float32Array {
    for (const [p, state] of this.fragments.entries()) {
      if (this.follows(p)) scatterFragment(state.momentum, state.fragment, out);
    }
    return out;
  }

  /**
   * Starts collecting shard results for round `round` of fragment p (from round-open). A low-rank
   * round's projection is built here, from m[p] as it stands (the round's base): the participants
   * on this replica project their Δ with it, and the averaged payload decodes with it.
   */
  openRound(
    p: number,
    round: number,
    codec: Codec,
    shards: (ShardRange & { checker?: string })[],
    lowRank?: LowRankSpec,
  ): void {
    const state = this.fragment(p);
    if (round <= state.round) throw new RangeError(`round ${round} of fragment ${p} is not after ${state.round}`);
    const projection = lowRank ? this.projectionOf(p, round, lowRank) : null;
    this.pending.set(key(p, round), {
      fragment: p,
      round,
      codec,
      projection,
      shards,
      slots: shards.map((shard) => ({
        checked: shard.checker !== undefined,
        owner: null,
        checkHash: null,
        checkAccepted: [],
        referee: null,
      })),
      tentative: null,
      refused: null,
    });
  }

  /** Round `round`'s projection of fragment p, from m[p] as it stands (built once per m where a memo is shared). */
  private projectionOf(p: number, round: number, spec: LowRankSpec): FragmentProjection {
    const { fragment, momentum } = this.fragment(p);
    const seed = lowRankSeed(p, round);
    const build = () => new FragmentProjection(fragment.tensors, momentum, { ...spec }, seed);
    if (!this.memo) return build();
    const key = `projection ${this.fragmentKeys[p]} m${this.memo.id(momentum)} ${spec.rank} ${spec.side} ${seed}`;
    return this.memo.recall({ fragment: p, round }, key, [], build);
  }

  isOpen(p: number, round: number): boolean {
    return this.pending.has(key(p, round));
  }

  /** The projection of an open low-rank round (null for a dense one, undefined when not open here). */
  projection(p: number, round: number): FragmentProjection | null | undefined {
    return this.pending.get(key(p, round))?.projection;
  }

  /**
   * One shard's result from one of its aggregators. `resultHash` is the hash of what arrived (the
   * node computes it for an owner's payload; a checker sends only its hash). Throws CodecError on
   * bytes that do not decode (the caller counts it); returns 'complete' with the tentative hash
   * when the last shard became verified.
   */
  addShardResult(
    p: number,
    round: number,
    shard: number,
    source: ShardSource,
    result: { payload: Uint8Array; resultHash: string; accepted: string[] },
  ): ShardResultOutcome {
    const { payload, resultHash, accepted } = result;
    const pending = this.pending.get(key(p, round));
    if (!pending) return { status: 'ignored', reason: 'round-not-open' };
    const range = pending.shards[shard];
    const slot = pending.slots[shard];
    if (!range || !slot) return { status: 'ignored', reason: 'no-such-shard' };
    if (pending.tentative || pending.refused) return { status: 'ignored', reason: 'late' };
    if (source === 'checker') {
      if (slot.checkHash !== null) return { status: 'ignored', reason: 'duplicate' };
      slot.checkHash = resultHash;
      slot.checkAccepted = accepted;
    } else {
      if (source === 'owner' && slot.owner) return { status: 'ignored', reason: 'duplicate' };
      if (source === 'referee' && slot.referee) return { status: 'ignored', reason: 'duplicate' };
      const decoded = this.decodeResult(pending, shard, payload);
      if (!decoded) return { status: 'ignored', reason: 'non-finite' };
      const { values, bound } = decoded;
      if (source === 'owner') slot.owner = { values, hash: resultHash, accepted, bound };
      else slot.referee = { values, accepted, bound };
    }
    if (!slot.referee && slot.owner && slot.checkHash !== null && slot.owner.hash !== slot.checkHash) {
      return { status: 'disputed', ownerHash: slot.owner.hash, checkHash: slot.checkHash };
    }
    const shards = pending.shards.length;
    const missing = pending.slots.filter((s) => verifiedValues(s) === null).length;
    if (missing > 0) return { status: 'waiting', missing, shards };
    const state = this.fragment(p);
    const step = () => this.outerStep(state, pending);
    const memo = this.memo;
    const outcome = memo ? memo.recall({ fragment: p, round }, this.stepKey(state, pending), [], step) : step();
    if ('reason' in outcome) {
      pending.refused = outcome.message;
      return { status: 'refused', reason: outcome.reason, message: outcome.message };
    }
    const { theta, momentum, hash } = outcome;
    pending.tentative = { theta, momentum, hash };
    return { status: 'complete', hash, shards };
  }

  /** Shard k's result's values, or null when one is not finite (decoded once per payload where a memo is shared). */
  private decodeResult(pending: PendingRound, shard: number, payload: Uint8Array): Decoded | null {
    const { codec } = pending;
    const range = pending.shards[shard] as ShardRange;
    const count = range.end - range.start;
    const decode = (): Decoded | null => {
      const decoded = codec.decode(payload, count, vectorPool.take(count));
      // the largest |value| the encoding allows (its largest scale), when it has one: the values
      // need a look only when that is not finite, and Δ̄'s bound check only when it is over
      const bound = codec.decodedBound?.(payload, decoded.length) ?? Number.POSITIVE_INFINITY;
      if (!Number.isFinite(bound) && firstOutOfBounds(decoded)) return null;
      return { values: this.keepOrGive(decoded), bound };
    };
    if (!this.memo) return decode();
    const scope = { fragment: pending.fragment, round: pending.round };
    return this.memo.recall(scope, `decoded ${shard} ${codecKey(codec)} ${count}`, [payload], decode);
  }

  /** The tentative outer step of a round whose verified results are all in: Δ̄ from them, then θ', m' and their hash. */
  private outerStep(state: FragmentState, pending: PendingRound): StepOutcome {
    const { projection } = pending;
    // the shards' values side by side (they cover the fragment, or the low-rank payload), in a
    // pool buffer: nothing keeps them past this step
    const values = vectorPool.take(projection ? projection.payloadSize : state.fragment.size);
    for (const [k, s] of pending.shards.entries())
      values.set(verifiedValues(pending.slots[k] as ShardSlot) as Float32Array, s.start);
    const delta: Float32Array = projection ? projection.decode(values) : values;
    // every verified shard's encoding bounds its values within the bound: Δ̄ needs no look
    const bounded =
      !projection && pending.slots.every((s) => (verifiedResult(s)?.bound ?? Number.NaN) <= this.maxMagnitude);
    const problem = bounded ? null : this.outOfBounds(delta);
    if (problem) {
      vectorPool.give(values);
      return problem;
    }
    const size = state.fragment.size;
    // θ′ and m′ (as the decoded results) come from the pool and are not handed back when the round
    // ends: with that hand-back a host resumed from a checkpoint stopped committing in some runs
    // (host-crash.test), and what still read a handed-back vector was not found
    const out = { theta: vectorPool.take(size), momentum: vectorPool.take(size) };
    const next = checkedOuterStep(state.theta, state.momentum, delta, this.outer, out);
    vectorPool.give(values);
    if ('index' in next) return { reason: 'non-finite', message: `θ' is not finite at index ${next.index}` };
    const hash = this.hasher.hash(next.theta, next.momentum);
    return { theta: this.keepOrGive(next.theta), momentum: this.keepOrGive(next.momentum), hash };
  }

  /**
   * `keep`, and where the interner held the same bits already (a dry run's every round) the fresh
   * vector, which nothing else holds, goes to the pool: the next round takes it, not new memory.
   */
  private keepOrGive(values: Float32Array): Float32Array {
    const kept = this.keep(values);
    if (kept !== values) vectorPool.give(values);
    return kept;
  }

  /**
   * Every input of `outerStep`, exactly: θ, m, the shards' values and the projection by identity, the
   * shards' ranges, the layout, the settings (a bound only spares a check whose outcome it implies).
   */
  private stepKey(state: FragmentState, pending: PendingRound): string {
    const memo = this.memo as RoundMemo;
    const shards = pending.shards.map(
      (s, k) => `${s.start}-${s.end}:${memo.id(verifiedValues(pending.slots[k] as ShardSlot) as Float32Array)}`,
    );
    const projection = pending.projection ? memo.id(pending.projection) : 'dense';
    return (
      `step ${this.settingsKey} ${this.fragmentKeys[pending.fragment]} θ${memo.id(state.theta)} m${memo.id(state.momentum)} ` +
      `${projection} ${shards.join(',')}`
    );
  }

  /** Why an aggregate Δ̄ must not be applied, or null: every value finite and within the bound. */
  private outOfBounds(delta: Float32Array): { reason: 'non-finite' | 'magnitude'; message: string } | null {
    const problem = firstOutOfBounds(delta, this.maxMagnitude);
    if (!problem) return null;
    const { reason, index, value } = problem;
    return reason === 'non-finite'
      ? { reason, message: `Δ̄ is ${value} at index ${index}` }
      : { reason, message: `|Δ̄| is ${Math.abs(value)} at index ${index}, over ${this.maxMagnitude}` };
  }

  /** Shards of an open round whose verified result is not in yet (the host referees them). */
  unverifiedShards(p: number, round: number): number[] {
    const pending = this.pending.get(key(p, round));
    if (!pending) return [];
    return pending.slots.flatMap((slot, k) => (verifiedValues(slot) === null ? [k] : []));
  }

  /**
   * The peers whose Δ is in each verified shard of an open round (null for a shard not verified
   * yet): the coordinator reads a participant's missed contribution from them.
   */
  verifiedContributors(p: number, round: number): (string[] | null)[] {
    return this.pending.get(key(p, round))?.slots.map((slot) => verifiedResult(slot)?.accepted ?? null) ?? [];
  }

  /** What an open round's shard k has received from its owner and checker: result hash and contributors. */
  shardClaims(p: number, round: number, shard: number): Record<'owner' | 'checker', ShardClaim | null> {
    const slot = this.pending.get(key(p, round))?.slots[shard];
    return {
      owner: slot?.owner ? { hash: slot.owner.hash, accepted: slot.owner.accepted } : null,
      checker: slot && slot.checkHash !== null ? { hash: slot.checkHash, accepted: slot.checkAccepted } : null,
    };
  }

  /** The tentative hash of a round whose shard results are all in, else null. */
  tentativeHash(p: number, round: number): string | null {
    return this.pending.get(key(p, round))?.tentative?.hash ?? null;
  }

  /**
   * Adopts the committed round if this replica reached the same state; otherwise it is diverged.
   * 'waiting' (state untouched, the round kept) while its verified results are still arriving.
   */
  commit(p: number, round: number, hash: string): CommitOutcome {
    const pending = this.pending.get(key(p, round));
    if (pending && !pending.tentative && !pending.refused) return 'waiting';
    const state = this.fragment(p);
    const adopted = pending?.tentative?.hash === hash ? pending.tentative : null;
    this.pending.delete(key(p, round));
    if (!pending?.tentative) {
      // Missed shard results (joined mid-round, or a lost owner): the state must be fetched.
      return round > state.round ? 'diverged' : 'not-ready';
    }
    if (!adopted) return 'diverged';
    // the state it replaces is left to the garbage collector, not the pool: θ_global and m are
    // handed out (checkpoints, state transfers, the host's evaluation) and may still be read
    state.theta = adopted.theta;
    state.momentum = adopted.momentum;
    state.round = round;
    state.hash = hash;
    return 'adopted';
  }

  abort(p: number, round: number): void {
    this.pending.delete(key(p, round));
  }

  /** Forgets every round in flight (their coordinator is gone). */
  abortAll(): void {
    for (const k of [...this.pending.keys()]) this.pending.delete(k);
  }

  /** Values [start, end) of θ and then m, fp32 (a state-transfer payload). */
  exportRange(p: number, start: number, end: number): Uint8Array {
    const state = this.fragment(p);
    if (!(start >= 0 && start < end && end <= state.fragment.size)) {
      throw new RangeError(`range [${start}, ${end}) is outside fragment ${p} of ${state.fragment.size} values`);
    }
    const out = new Float32Array(2 * (end - start));
    out.set(state.theta.subarray(start, end), 0);
    out.set(state.momentum.subarray(start, end), end - start);
    return new Uint8Array(out.buffer);
  }

  /**
   * Installs a fragment's state received in parts; `verify` checks the whole against `hash`
   * before anything changes. Returns false (state untouched) on a hash mismatch.
   */
  importState(p: number, round: number, theta: Float32Array, momentum: Float32Array, hash: string): boolean {
    const state = this.fragment(p);
    if (theta.length !== state.fragment.size || momentum.length !== state.fragment.size) return false;
    if (this.hasher.hash(theta, momentum) !== hash) return false;
    // a fragment it does not follow (a fetch that outlived a change of stage) keeps no state
    const kept = this.follows(p);
    state.theta = kept ? this.keep(theta) : new Float32Array(0);
    state.momentum = kept ? this.keep(momentum) : new Float32Array(0);
    state.round = round;
    state.hash = hash;
    for (const k of [...this.pending.keys()]) if (k.startsWith(`${p}:`)) this.pending.delete(k);
    return true;
  }
}
