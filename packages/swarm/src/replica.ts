/**
 * What every replica holds (ARCHITECTURE.md, "Apply, commit, abort"): θ_global and the outer
 * momentum m, per fragment in its contiguous form, the last committed round and its hash; and the
 * rounds in flight, whose shard results arrive one by one. When a round's last shard result is
 * in, the replica applies the outer step to copies (tentative), hashes θ' ‖ m' and reports the
 * hash; on commit it adopts θ' and m' if its hash is the committed one, else it is diverged.
 *
 * Every replica decodes the same encoded shard results and runs the same fixed-order f32 outer
 * step, so replicas agree bitwise whatever their GPUs.
 */
import {
  type Codec,
  createCodec,
  type Fragment,
  type FragmentHasher,
  gatherFragment,
  type OuterOptimizerOptions,
  scatterFragment,
  tentativeOuterStep,
} from '@shoal/diloco';
import type { ShardRange } from '@shoal/protocol';

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

interface PendingRound {
  fragment: number;
  round: number;
  codec: Codec;
  shards: ShardRange[];
  /** Decoded aggregate per shard, null until its result arrives. */
  results: (Float32Array | null)[];
  tentative: { theta: Float32Array; momentum: Float32Array; hash: string } | null;
}

/** `shards`: the round's shard count, so callers can tell how far the all-gather is. */
export type ShardResultOutcome =
  | { status: 'waiting'; missing: number; shards: number }
  | { status: 'complete'; hash: string; shards: number }
  | { status: 'ignored'; reason: string };

export type CommitOutcome = 'adopted' | 'diverged' | 'not-ready';

const key = (fragment: number, round: number) => `${fragment}:${round}`;

export class ReplicaState {
  readonly fragments: FragmentState[];
  private readonly pending = new Map<string, PendingRound>();

  constructor(
    fragments: readonly Fragment[],
    /** θ_global in the logical layout (the seeded init, or a checkpoint). */
    params: Float32Array,
    private readonly hasher: FragmentHasher,
    private readonly outer: OuterOptimizerOptions,
    /** Outer momentum in the logical layout; zeros when omitted. */
    momentum?: Float32Array,
  ) {
    this.fragments = fragments.map((fragment) => {
      const theta = gatherFragment(params, fragment);
      const m = momentum ? gatherFragment(momentum, fragment) : new Float32Array(fragment.size);
      return { fragment, theta, momentum: m, round: 0, hash: hasher.hash(theta, m) };
    });
  }

  fragment(p: number): FragmentState {
    const state = this.fragments[p];
    if (!state) throw new RangeError(`no fragment ${p} (the run has ${this.fragments.length})`);
    return state;
  }

  /** θ_global in the logical layout (for evaluation, checkpoints, a worker's merge). */
  params(out: Float32Array): Float32Array {
    for (const state of this.fragments) scatterFragment(state.theta, state.fragment, out);
    return out;
  }

  momentum(out: Float32Array): Float32Array {
    for (const state of this.fragments) scatterFragment(state.momentum, state.fragment, out);
    return out;
  }

  /** Starts collecting shard results for round `round` of fragment p (from round-open). */
  openRound(p: number, round: number, codecName: string, blockSize: number, shards: ShardRange[]): void {
    const state = this.fragment(p);
    if (round <= state.round) throw new RangeError(`round ${round} of fragment ${p} is not after ${state.round}`);
    this.pending.set(key(p, round), {
      fragment: p,
      round,
      codec: createCodec(codecName, { blockSize }),
      shards,
      results: shards.map(() => null),
      tentative: null,
    });
  }

  isOpen(p: number, round: number): boolean {
    return this.pending.has(key(p, round));
  }

  /**
   * One shard's aggregate (encoded). Throws CodecError on bytes that do not decode (the caller
   * counts it); returns 'complete' with the tentative hash when it was the last one.
   */
  addShardResult(p: number, round: number, shard: number, payload: Uint8Array): ShardResultOutcome {
    const pending = this.pending.get(key(p, round));
    if (!pending) return { status: 'ignored', reason: 'round-not-open' };
    const range = pending.shards[shard];
    if (!range) return { status: 'ignored', reason: 'no-such-shard' };
    if (pending.results[shard]) return { status: 'ignored', reason: 'duplicate' };
    const decoded = pending.codec.decode(payload, range.end - range.start);
    for (let i = 0; i < decoded.length; i++) {
      if (!Number.isFinite(decoded[i] as number)) return { status: 'ignored', reason: 'non-finite' };
    }
    pending.results[shard] = decoded;
    const missing = pending.results.filter((r) => r === null).length;
    const shards = pending.shards.length;
    if (missing > 0) return { status: 'waiting', missing, shards };
    const state = this.fragment(p);
    const delta = new Float32Array(state.fragment.size);
    for (const [k, s] of pending.shards.entries()) delta.set(pending.results[k] as Float32Array, s.start);
    const next = tentativeOuterStep(state.theta, state.momentum, delta, this.outer);
    const hash = this.hasher.hash(next.theta, next.momentum);
    pending.tentative = { ...next, hash };
    return { status: 'complete', hash, shards };
  }

  /** The tentative hash of a round whose shard results are all in, else null. */
  tentativeHash(p: number, round: number): string | null {
    return this.pending.get(key(p, round))?.tentative?.hash ?? null;
  }

  /** Adopts the committed round if this replica reached the same state; otherwise it is diverged. */
  commit(p: number, round: number, hash: string): CommitOutcome {
    const pending = this.pending.get(key(p, round));
    this.pending.delete(key(p, round));
    const state = this.fragment(p);
    if (!pending?.tentative) {
      // Missed shard results (joined mid-round, or a lost owner): the state must be fetched.
      return round > state.round ? 'diverged' : 'not-ready';
    }
    if (pending.tentative.hash !== hash) return 'diverged';
    state.theta = pending.tentative.theta;
    state.momentum = pending.tentative.momentum;
    state.round = round;
    state.hash = hash;
    return 'adopted';
  }

  abort(p: number, round: number): void {
    this.pending.delete(key(p, round));
  }

  /** Forgets every round in flight (their coordinator is gone). */
  abortAll(): void {
    this.pending.clear();
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
    state.theta = theta;
    state.momentum = momentum;
    state.round = round;
    state.hash = hash;
    for (const k of [...this.pending.keys()]) if (k.startsWith(`${p}:`)) this.pending.delete(k);
    return true;
  }
}
