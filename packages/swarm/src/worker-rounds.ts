/**
 * A worker's part in the rounds it is named in (docs/design.md, "The algorithm", "Rounds…",
 * "The collective"):
 * - at its next inner-step boundary after a round-open naming it, it sends Δ = θ_global[p] −
 *   θ_local[p], encoded once with the round's codec and cut into the round's shards, to each
 *   shard's owner and checker, weighted by the tokens it trained since its last contribution to
 *   p; it keeps the encoded shards until the round ends, so a reassigned owner can be served again;
 * - it merges θ_local[p] ← α·θ_local[p] + (1 − α)·θ_global[p] at the first inner step at or after
 *   its contribution step + τ at which the round has committed.
 * At most one round in flight per fragment: a fragment's next contribution waits for the merge
 * of its previous round.
 */
import {
  type Codec,
  type ErrorFeedback,
  encodedSlice,
  type Fragment,
  gatherFragment,
  scatterFragment,
} from '@shoal/diloco';
import type { Trainer } from '@shoal/model';
import type { PeerId, RoundOpenMessage, RunConfig } from '@shoal/protocol';
import { contributionBound } from './config.ts';
import type { Member } from './member.ts';
import type { ReplicaNode } from './replica-node.ts';

/** The counters a worker's rounds move (part of the worker's metrics). */
export interface RoundCounters {
  /** Inner steps trained (read here: a contribution's step). */
  innerStep: number;
  /** Times the inner loop waited on the network, or a contribution on its fragment's last round. */
  stalls: number;
  contributions: number;
  merges: number;
  /** Contributions scaled down into the owners' bound (contributionBound). */
  clampedContributions: number;
  /** Times θ_local went non-finite and was replaced by θ_global. */
  recoveries: number;
}

export interface RoundInFlight {
  open: RoundOpenMessage;
  /** The round's codec, built once at its open. */
  codec: Codec;
  /** Encoded Δ per shard, once contributed. */
  payloads: Uint8Array[] | null;
  weight: number;
  contributionStep: number;
  committedAt: number | null;
  /** When its round-open arrived (clock ms). */
  openedAt: number;
}

export interface WorkerRoundsOptions {
  member: Member;
  config: RunConfig;
  fragments: Fragment[];
  replica: ReplicaNode;
  counters: RoundCounters;
  /** Per fragment, error feedback for the run's codec; empty when the run has none. */
  feedback: ErrorFeedback[];
}

export class WorkerRounds {
  /** Tokens trained since the last contribution to each fragment (the next contribution's weight). */
  readonly tokensSince: number[];
  /** Rounds contributed to, until merged or aborted (one per fragment). */
  private readonly rounds = new Map<number, RoundInFlight>();
  /** Rounds opened for this worker whose contribution is due at the next step boundary. */
  private readonly pendingOpens = new Map<number, RoundInFlight>();

  constructor(private readonly options: WorkerRoundsOptions) {
    this.tokensSince = options.fragments.map(() => 0);
  }

  /** `tokens` more trained into every fragment. */
  trained(tokens: number): void {
    for (let p = 0; p < this.tokensSince.length; p++) this.tokensSince[p] = (this.tokensSince[p] as number) + tokens;
  }

  /** Rounds of this worker are in flight (opened or contributed, not merged or aborted). */
  get busy(): boolean {
    return this.pendingOpens.size > 0 || this.rounds.size > 0;
  }

  /** A round-open naming this worker: it contributes at the next step boundary. */
  open(open: RoundOpenMessage, codec: Codec): void {
    this.pendingOpens.set(open.fragment, {
      open,
      codec,
      payloads: null,
      weight: 0,
      contributionStep: 0,
      committedAt: null,
      openedAt: this.options.member.clock.now(),
    });
  }

  /**
   * The round (fragment, round) of this worker's, contributed or still pending (opened mid-step,
   * taken up at the next boundary): a reassigned shard's contribution goes to the new owner.
   */
  find(fragment: number, round: number): RoundInFlight | undefined {
    return [this.rounds.get(fragment), this.pendingOpens.get(fragment)].find((r) => r?.open.round === round);
  }

  /** The owner of shard k of a round this worker contributed to; undefined for any other round. */
  ownerOf(fragment: number, round: number, shard: number): PeerId | undefined {
    const inFlight = this.rounds.get(fragment);
    return inFlight?.open.round === round ? inFlight.open.shards[shard]?.owner : undefined;
  }

  /**
   * Whether the inner loop must wait (docs/design.md: only when a fragment's next round would
   * start while its last one is still open): a round contributed to, not yet committed, H inner
   * steps after the contribution. τ = 0 is DiLoCo without overlap: the worker waits for every
   * round at once.
   */
  blocking(): boolean {
    const { overlap, innerSteps } = this.options.config.diloco;
    const patience = overlap === 0 ? 0 : innerSteps;
    const step = this.options.counters.innerStep;
    const contributed = [...this.rounds.values()].filter((r) => r.payloads !== null);
    return (
      contributed.some((r) => r.committedAt === null && step >= r.contributionStep + patience) ||
      (overlap === 0 && contributed.length > 0)
    );
  }

  /** The replica adopted (fragment, round): it merges when due. */
  committed(p: number, round: number): void {
    const inFlight = this.rounds.get(p);
    if (inFlight?.open.round !== round) return;
    inFlight.committedAt = this.options.counters.innerStep;
    if (this.options.feedback[p]?.pending) this.options.feedback[p]?.commit();
  }

  aborted(p: number, round: number): void {
    if (this.pendingOpens.get(p)?.open.round === round) this.pendingOpens.delete(p);
    if (this.rounds.get(p)?.open.round === round) this.drop(p);
  }

  /** Fragment p's θ_global here is stale: its rounds cannot be contributed to or merged. */
  diverged(p: number): void {
    this.drop(p);
    this.pendingOpens.delete(p); // named in a round whose base it lacks: it cannot contribute
  }

  /** The coordinator is gone: rounds not committed never will be (committed ones still merge). */
  dropUncommitted(): void {
    for (const [p, round] of this.rounds) {
      if (round.committedAt === null) this.drop(p);
    }
    this.pendingOpens.clear();
  }

  /** Merges finished rounds and sends due contributions; runs between inner steps. */
  async atBoundary(trainer: Trainer): Promise<void> {
    const { member, replica, config } = this.options;
    const { clock } = member;
    let params: Float32Array | null = null;
    let merged = false;
    const step = this.options.counters.innerStep;
    // A round neither committed nor aborted long after the coordinator's own deadline (its abort
    // never reached this worker): give it up rather than wait on it forever.
    const now = clock.now();
    for (const [p, round] of this.rounds) {
      if (round.committedAt !== null || now - round.openedAt <= 2 * round.open.deadlineMs + 1_000) continue;
      this.drop(p);
      replica.state.abort(p, round.open.round);
    }
    for (const [p, round] of this.rounds) {
      const due = round.committedAt !== null && step >= round.contributionStep + config.diloco.overlap;
      const forced = round.committedAt !== null && this.pendingOpens.has(p);
      if (!due && !forced) continue;
      params ??= await clock.track(trainer.getParams());
      this.merge(params, p, config.diloco.alpha);
      merged = true;
      this.rounds.delete(p);
    }
    for (const [p, round] of this.pendingOpens) {
      if (this.rounds.has(p)) {
        this.options.counters.stalls++; // the previous round of p is still open: contribute later
        continue;
      }
      this.pendingOpens.delete(p);
      params ??= await clock.track(trainer.getParams());
      if (this.contribute(params, round)) {
        this.rounds.set(p, round);
        continue;
      }
      await this.recover(trainer);
      return;
    }
    if (params && merged) await clock.track(trainer.setParams(params));
  }

  /** Sends shard k of a round's kept Δ to `to` (its owner and checker, or a reassigned owner). */
  sendShard(round: RoundInFlight, k: number, to: PeerId[]): void {
    const shard = round.open.shards[k];
    const payload = round.payloads?.[k];
    if (!shard || !payload) return;
    void this.options.member.broadcast(to, {
      kind: 'contribution',
      fragment: round.open.fragment,
      round: round.open.round,
      shard: k,
      codec: round.codec.name,
      weight: round.weight,
      payload,
    });
  }

  /** Forgets fragment p's round in flight, which will not commit: its error feedback is discarded. */
  private drop(p: number): void {
    this.rounds.delete(p);
    if (this.options.feedback[p]?.pending) this.options.feedback[p]?.discard();
  }

  private merge(params: Float32Array, p: number, alpha: number): void {
    const fragment = this.options.fragments[p] as Fragment;
    const global = this.options.replica.state.fragment(p).theta;
    const local = gatherFragment(params, fragment);
    for (let i = 0; i < local.length; i++) {
      local[i] = alpha * (local[i] as number) + (1 - alpha) * (global[i] as number);
    }
    scatterFragment(local, fragment, params);
    this.options.counters.merges++;
  }

  /**
   * Sends Δ = θ_global[p] − θ_local[p] to the round's owners and checkers. False, sending nothing,
   * when θ_local is not finite: the caller puts θ_global back in its place.
   */
  private contribute(params: Float32Array, round: RoundInFlight): boolean {
    const { counters } = this.options;
    const p = round.open.fragment;
    const fragment = this.options.fragments[p] as Fragment;
    const global = this.options.replica.state.fragment(p).theta;
    const delta = gatherFragment(params, fragment);
    let largest = 0;
    for (let i = 0; i < delta.length; i++) {
      const value = (global[i] as number) - (delta[i] as number);
      delta[i] = value;
      if (!(Math.abs(value) <= largest)) largest = Math.abs(value); // NaN lands here too
    }
    if (!Number.isFinite(largest)) return false;
    // Owners refuse a Δ beyond the bound; one this large means θ_local trained alone for long
    // (a lost coordinator, α near 1): scale it into range rather than be refused every round.
    const limit = contributionBound(this.options.config) / 2;
    if (largest > limit) {
      const scale = limit / largest;
      for (let i = 0; i < delta.length; i++) delta[i] = (delta[i] as number) * scale;
      counters.clampedContributions++;
    }
    const { codec } = round;
    const feedback = this.options.feedback[p];
    const sameCodec = feedback?.codec.name === codec.name && feedback.codec.blockSize === codec.blockSize;
    const encoded = feedback && sameCodec && !feedback.pending ? feedback.encode(delta) : codec.encode(delta);
    round.payloads = round.open.shards.map((shard) => encodedSlice(codec, encoded, shard.start, shard.end));
    round.weight = Math.max(1, this.tokensSince[p] as number);
    round.contributionStep = counters.innerStep;
    this.tokensSince[p] = 0;
    counters.contributions++;
    for (const [k, shard] of round.open.shards.entries()) {
      this.sendShard(round, k, shard.checker === undefined ? [shard.owner] : [shard.owner, shard.checker]);
    }
    return true;
  }

  /** θ_local went non-finite: θ_global in its place and fresh AdamW moments, instead of a crash. */
  private async recover(trainer: Trainer): Promise<void> {
    const params = this.options.replica.state.params(new Float32Array(trainer.layout.size));
    const { clock } = this.options.member;
    await clock.track(trainer.setParams(params));
    const size = trainer.layout.size;
    await clock.track(trainer.setOptimizerState({ m: new Float32Array(size), v: new Float32Array(size), step: 0 }));
    this.options.counters.recoveries++;
  }
}
