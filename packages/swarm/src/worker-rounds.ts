/**
 * A worker's part in the rounds it is named in (docs/design.md, "The algorithm", "Rounds…",
 * "The collective", "Bounded staleness"):
 * - where fragment p's round is due (H steps after its last contribution) it keeps θ_local[p]
 *   and trains on; at its next inner-step boundary after a round-open naming it, it sends Δ =
 *   θ_global[p] − θ_local[p] (the kept one, or the current one if the open came first), encoded
 *   once with the round's codec and cut into the round's shards, to each shard's owner and
 *   checker, weighted by the tokens trained into it; it keeps the encoded shards until the round
 *   ends, so a reassigned owner can be served again;
 * - it merges θ_local[p] ← α·θ_local[p] + (1 − α)·θ_global[p] at its contribution step + τ, and
 *   waits there for the commit (Streaming DiLoCo's blocking receive);
 * - where p's next round is due and the last one has still not opened, it waits for the open.
 * In a room of unequal workers each wait is stretched by a slack from the round-open's step times
 * (a faster worker waits later), and the second is given up after a while (a coordinator that
 * opens nothing). So a round carries H steps of training and merges τ steps late whatever the
 * link's speed: the loss follows H, τ and α, not the network.
 * At most one round in flight per fragment: a fragment's next contribution waits for the merge
 * of its previous round.
 */
import { type Codec, deltaInPlace, encodedSlice, type Fragment, mergeInPlace, vectorPool } from '@shoal/diloco';
import type { Trainer } from '@shoal/model';
import type { PeerId, RoundOpenMessage, RunConfig } from '@shoal/protocol';
import { BoundaryParams } from './boundary-params.ts';
import { contributionBound } from './config.ts';
import { ContributionEncoder } from './contribution-encoder.ts';
import type { Member } from './member.ts';
import type { ReplicaNode } from './replica-node.ts';
import { mergePatience, RoundDurations, tauPatience } from './round-patience.ts';
import type { RoundCounters } from './worker-options.ts';

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
  /** Steps past contribution + τ it may train before waiting for the commit (roundSlack, round-patience.ts). */
  mergeSlack: number;
  /**
   * With the one-step delay, θ_local[p] as it was contributed: the commit's update reaches
   * θ_local as θ_global[p] − this, so the steps trained since are kept.
   */
  base: Float32Array | null;
}

export interface WorkerRoundsOptions {
  member: Member;
  config: RunConfig;
  fragments: Fragment[];
  replica: ReplicaNode;
  counters: RoundCounters;
}

export class WorkerRounds {
  /** Tokens trained since the last contribution to each fragment (the next contribution's weight). */
  readonly tokensSince: number[];
  /** Rounds contributed to, until merged or aborted (one per fragment). */
  private readonly rounds = new Map<number, RoundInFlight>();
  /** Rounds opened for this worker whose contribution is due at the next step boundary. */
  private readonly pendingOpens = new Map<number, RoundInFlight>();
  /**
   * Per fragment, the step of this worker's last contribution to it, while the next round is
   * awaited there (see overdue); undefined before its first round, and once the wait was given up.
   */
  private readonly lastContribution: (number | undefined)[] = [];
  /**
   * Per fragment, θ_local[p] as it stood where its round was due, with the tokens trained into it,
   * until the round opens: the contribution is taken from it, so that what a round carries does
   * not depend on how long the open took to arrive (the worker trains on meanwhile).
   */
  private readonly snapshots = new Map<number, { step: number; theta: Float32Array; tokens: number }>();
  /** Per fragment, the steps past its next due round, and past a due merge, it may train (from each open). */
  private readonly roundSlack: number[] = [];
  private readonly mergeSlack: number[] = [];
  /** How long its last rounds took from open to commit. */
  private readonly durations = new RoundDurations();
  /** Encodes its Δ for each round, with the error feedback it keeps across rounds. */
  private readonly encoder: ContributionEncoder;

  constructor(private readonly options: WorkerRoundsOptions) {
    this.tokensSince = options.fragments.map(() => 0);
    this.encoder = new ContributionEncoder(options);
  }

  /** Per fragment, its last low-rank contribution's error at each rank of the ladder (heartbeats). */
  get lowRankErrors(): number[][] {
    return this.encoder.lowRankErrors;
  }

  /** The one-step delay (DiLoCoX): merges are corrections, waited for only where the next round is due. */
  private get delayed(): boolean {
    return this.options.config.diloco.overlapRounds === 1;
  }

  /** `tokens` more trained into every fragment. */
  trained(tokens: number): void {
    for (let p = 0; p < this.tokensSince.length; p++) this.tokensSince[p] = (this.tokensSince[p] as number) + tokens;
  }

  /** Rounds of this worker are in flight (opened or contributed, not merged or aborted). */
  get busy(): boolean {
    return this.pendingOpens.size > 0 || this.rounds.size > 0;
  }

  /**
   * A round-open naming this worker: it contributes at the next step boundary. `slack`: steps past
   * its due merge, and past the fragment's next due round, it may train before waiting.
   */
  open(open: RoundOpenMessage, codec: Codec, slack = { merge: 0, round: 0 }): void {
    this.roundSlack[open.fragment] = slack.round;
    this.mergeSlack[open.fragment] = slack.merge;
    this.pendingOpens.set(open.fragment, {
      open,
      codec,
      payloads: null,
      weight: 0,
      contributionStep: 0,
      committedAt: null,
      openedAt: this.options.member.clock.now(),
      mergeSlack: slack.merge,
      base: null,
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
   * Whether the inner loop must wait for a merge: a round contributed to and not committed τ +
   * its slack inner steps after the contribution, when its merge is due (and never later than H
   * steps after it, when the fragment's next round would start). τ = 0 is DiLoCo without
   * overlap: the worker waits for every round at once.
   */
  blocking(): boolean {
    const { overlap, innerSteps } = this.options.config.diloco;
    const step = this.options.counters.innerStep;
    const contributed = [...this.rounds.values()].filter((r) => r.payloads !== null);
    const now = this.options.member.clock.now();
    return (
      contributed.some(
        (r) =>
          r.committedAt === null &&
          (step >= r.contributionStep + innerSteps ||
            (step >= r.contributionStep + mergePatience(this.options.config.diloco, r.mergeSlack) &&
              !this.durations.stuck(r.openedAt, now))),
      ) ||
      (overlap === 0 && contributed.length > 0)
    );
  }

  /**
   * The fragments whose round is overdue here: due (H steps, plus the slack of its last round,
   * after this worker's last contribution to them), kept, and not opened τ steps later (where its
   * merge would be due without the one-step delay). Without this wait a worker whose steps are fast next to the network
   * would train on alone, and its rounds, fewer and further apart, would each carry many rounds'
   * worth of steps.
   */
  overdue(): number[] {
    const step = this.options.counters.innerStep;
    const late: number[] = [];
    for (const [p, snapshot] of this.snapshots) {
      // τ (and its slack) after the due round, in either merge mode: an open is a small message,
      // so a bound this tight keeps the rounds where the steps put them on any link
      const due = snapshot.step + tauPatience(this.options.config.diloco, this.mergeSlack[p] ?? 0);
      if (!this.pendingOpens.has(p) && step >= due) late.push(p);
    }
    return late;
  }

  /** Where fragment p's next round is due (Infinity when this worker does not wait for it). */
  private dueStep(p: number): number {
    const last = this.lastContribution[p];
    if (last === undefined) return Number.POSITIVE_INFINITY;
    return last + this.options.config.diloco.innerSteps + (this.roundSlack[p] ?? 0);
  }

  /**
   * Sets when each fragment's first round is due, for a worker that starts with the room: at
   * H + offsets[p] steps, the room's first grid point of p (see Coordinator).
   */
  arm(offsets: number[]): void {
    for (const [p, offset] of offsets.entries()) this.lastContribution[p] = this.options.counters.innerStep + offset;
  }

  /** Stops waiting for any fragment's next round (a coordinator that opens none). */
  excuseAll(): void {
    this.lastContribution.length = 0;
    for (const p of [...this.snapshots.keys()]) this.forgetSnapshot(p);
  }

  /** Tokens trained into each fragment and not yet contributed (a snapshot's included): heartbeats carry them. */
  unsentTokens(): number[] {
    return this.tokensSince.map((tokens, p) => tokens + (this.snapshots.get(p)?.tokens ?? 0));
  }

  /** Forgets fragment p's snapshot (its θ_global moved under it), its tokens back in the next one. */
  private forgetSnapshot(p: number): void {
    const snapshot = this.snapshots.get(p);
    if (!snapshot) return;
    this.tokensSince[p] = (this.tokensSince[p] as number) + snapshot.tokens;
    this.snapshots.delete(p);
    vectorPool.give(snapshot.theta);
  }

  /** Stops waiting for fragment p's next round (none came): the wait resumes after its next contribution. */
  excuse(p: number): void {
    this.lastContribution[p] = undefined;
    this.forgetSnapshot(p);
  }

  /** The replica adopted (fragment, round): it merges when due. */
  committed(p: number, round: number): void {
    const inFlight = this.rounds.get(p);
    if (inFlight?.open.round !== round) return;
    inFlight.committedAt = this.options.counters.innerStep;
    this.durations.record(this.options.member.clock.now() - inFlight.openedAt);
    this.encoder.committed(p);
  }

  aborted(p: number, round: number): void {
    if (this.pendingOpens.get(p)?.open.round === round) this.pendingOpens.delete(p);
    if (this.rounds.get(p)?.open.round === round) this.drop(p);
  }

  /** Fragment p's θ_global here is stale: its rounds cannot be contributed to or merged. */
  diverged(p: number): void {
    this.drop(p);
    this.excuse(p);
    this.pendingOpens.delete(p); // named in a round whose base it lacks: it cannot contribute
  }

  /** The coordinator is gone: rounds not committed never will be (committed ones still merge). */
  dropUncommitted(): void {
    for (const [p, round] of this.rounds) {
      if (round.committedAt === null) this.drop(p);
    }
    this.pendingOpens.clear();
    this.excuseAll();
  }

  /**
   * Merges finished rounds and sends due contributions; runs between inner steps. Every read of
   * θ_local past the merges is queued before any is awaited, and then `overlap`, when given, is
   * called if the loop will not wait here: a GPU engine's next step may be queued from then on,
   * behind those reads, while the rest (Δ, its encoding, the sends) runs. A merge is written before
   * `overlap` is called, so the step after it trains on the merged θ_local.
   */
  async atBoundary(trainer: Trainer, overlap?: () => void): Promise<void> {
    const { member, replica, config, fragments } = this.options;
    const { clock } = member;
    const params = new BoundaryParams(trainer, clock);
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
      // with the one-step delay a round merges H steps after its contribution, where p's next round
      // is due (one round late): its correction keeps the steps trained since
      const merging = this.delayed ? config.diloco.innerSteps : config.diloco.overlap;
      const due = round.committedAt !== null && step >= round.contributionStep + merging;
      const forced = round.committedAt !== null && this.pendingOpens.has(p);
      if (!due && !forced) continue;
      const fragment = fragments[p] as Fragment;
      const local = await params.read(fragment);
      this.merge(local, p, config.diloco.alpha, round.base);
      await params.write(fragment, local);
      vectorPool.give(local);
      this.rounds.delete(p);
    }
    // a fragment whose round is due here: its θ_local is kept for the contribution, and the next
    // round is due H steps on
    const keeping = [...fragments.keys()].filter(
      (p) => !(this.snapshots.has(p) || this.pendingOpens.has(p) || this.rounds.has(p) || step < this.dueStep(p)),
    );
    const contributing: RoundInFlight[] = [];
    for (const [p, round] of this.pendingOpens) {
      // the previous round of p is still open, or (low-rank) this replica has not opened this one
      // yet, so its projection is not known: contribute later
      const unprojected = round.open.lowRank && !replica.state.projection(p, round.open.round);
      if (this.rounds.has(p) || unprojected) {
        this.options.counters.stalls++;
        continue;
      }
      this.pendingOpens.delete(p);
      contributing.push(round);
    }
    const kept = keeping.map((p) => params.read(fragments[p] as Fragment));
    // a kept θ_local is the contribution: no read of the engine's parameters for it
    const locals = contributing.map((round) => {
      const p = round.open.fragment;
      return this.snapshots.has(p) ? null : params.read(fragments[p] as Fragment);
    });
    // (a merge held back for a whole-model write would land behind the next step)
    if (overlap && !params.unflushed && !this.waitsAfter(keeping, contributing)) overlap();
    for (const [i, p] of keeping.entries()) {
      const theta = await (kept[i] as Promise<Float32Array>);
      this.snapshots.set(p, { step, theta, tokens: this.tokensSince[p] as number });
      this.tokensSince[p] = 0;
      this.lastContribution[p] = step;
    }
    for (const [i, round] of contributing.entries()) {
      const local = await locals[i];
      if (this.contribute(local ?? null, round)) {
        this.rounds.set(round.open.fragment, round);
        continue;
      }
      // θ_local is not finite: the rounds not contributed yet wait for the next boundary (a step
      // queued already, after `overlap`, trained on it: the recovery overwrites what it did)
      for (const later of contributing.slice(i + 1)) this.pendingOpens.set(later.open.fragment, later);
      await Promise.allSettled(locals);
      await this.recover(trainer);
      return;
    }
    await params.flush();
  }

  /**
   * Whether the inner loop will wait for a round before its next step once this boundary has kept
   * θ_local for `keeping` and contributed to `contributing` (see blocking and overdue): then no
   * step may be queued past it. Errs towards waiting (a stuck round still counts).
   */
  private waitsAfter(keeping: number[], contributing: RoundInFlight[]): boolean {
    const step = this.options.counters.innerStep;
    if (this.blocking() || this.overdue().length > 0) return true;
    if (contributing.length > 0 && this.options.config.diloco.overlap === 0) return true;
    const { diloco } = this.options.config;
    if (keeping.some((p) => tauPatience(diloco, this.mergeSlack[p] ?? 0) === 0)) return true;
    return contributing.some((round) => {
      const from = this.snapshots.get(round.open.fragment)?.step ?? step;
      return step >= from + mergePatience(diloco, round.mergeSlack);
    });
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
    this.encoder.discarded(p);
  }

  /**
   * θ_local[p] ← α·θ_local[p] + (1 − α)·θ_global[p]; with the one-step delay (a `base`, θ_local[p]
   * as contributed) θ_local[p] += (1 − α)·(θ_global[p] − base): the round's outer update replaces
   * this worker's own contributed steps, and the steps trained since the contribution are kept.
   */
  private merge(local: Float32Array, p: number, alpha: number, base: Float32Array | null): void {
    mergeInPlace(local, this.options.replica.state.fragment(p).theta, alpha, base);
    this.options.counters.merges++;
  }

  /**
   * Sends Δ = θ_global[p] − θ_local[p] to the round's owners and checkers, θ_local[p] the one kept
   * where the round was due or else taken from `params` (null only when one was kept). False,
   * sending nothing, when θ_local is not finite: the caller puts θ_global back in its place.
   */
  private contribute(local: Float32Array | null, round: RoundInFlight): boolean {
    const { counters } = this.options;
    const p = round.open.fragment;
    const global = this.options.replica.state.fragment(p).theta;
    const snapshot = this.snapshots.get(p);
    this.snapshots.delete(p);
    const delta = snapshot ? snapshot.theta : local;
    if (!delta) throw new Error(`fragment ${p}: no θ_local to contribute`);
    round.base = this.delayed ? delta.slice() : null;
    // Owners refuse a Δ beyond the bound; one this large means θ_local trained alone for long
    // (a lost coordinator, α near 1): it is scaled into range rather than refused every round.
    const outcome = deltaInPlace(global, delta, contributionBound(this.options.config) / 2);
    if (outcome === 'non-finite') {
      vectorPool.give(delta);
      return false;
    }
    if (outcome === 'clamped') counters.clampedContributions++;
    const { codec } = round;
    const encoded = this.encoder.encode(round, delta);
    // the low-rank codecs may keep what they were given; the dense ones copy it into the encoding
    if (!this.options.config.diloco.lowRank && !round.open.lowRank) vectorPool.give(delta);
    round.payloads = round.open.shards.map((shard) => encodedSlice(codec, encoded, shard.start, shard.end));
    if (snapshot) {
      round.weight = Math.max(1, snapshot.tokens);
      round.contributionStep = snapshot.step;
    } else {
      round.weight = Math.max(1, this.tokensSince[p] as number);
      round.contributionStep = counters.innerStep;
      this.lastContribution[p] = counters.innerStep;
      this.tokensSince[p] = 0;
    }
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
