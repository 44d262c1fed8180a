/**
 * A training worker: the inner AdamW loop on its engine, and its part in every round it is named
 * in (ARCHITECTURE.md, "The algorithm", "Rounds…", "The collective"):
 * - at its next inner-step boundary after a round-open naming it, it sends Δ = θ_global[p] −
 *   θ_local[p], encoded once and cut into the round's shards, to each shard's owner, weighted by
 *   the tokens it trained since its last contribution to p; it keeps the encoded shards until
 *   the round ends, so a reassigned owner can be served again;
 * - it owns one shard: collects, aggregates and sends the result to every replica;
 * - as a replica it applies the outer step tentatively, reports the hash and adopts on commit;
 * - it merges θ_local[p] ← α·θ_local[p] + (1 − α)·θ_global[p] at the first inner step at or after
 *   its contribution step + τ at which the round has committed.
 * Inner steps never wait for the network, except that a fragment's next contribution first
 * merges its previous round (at most one round in flight per fragment).
 */
import {
  buildFragments,
  type Codec,
  createCodec,
  createFragmentHasher,
  ErrorFeedback,
  type Fragment,
  gatherFragment,
  scatterFragment,
} from '@shoal/diloco';
import { learningRate } from '@shoal/gpu';
import { type Batch, buildLayout, initParameters, type Trainer } from '@shoal/model';
import {
  type Capabilities,
  type FragmentState,
  MAX_REJECTION_REASONS,
  type PeerId,
  type RoundOpenMessage,
  type RunConfig,
} from '@shoal/protocol';
import { contributionBound } from './config.ts';
import type { Member } from './member.ts';
import { ReplicaState } from './replica.ts';
import { type ReplicaEvents, ReplicaNode } from './replica-node.ts';
import { ShardDuties } from './shard-duty.ts';

export interface WorkerOptions {
  member: Member;
  coordinator: PeerId;
  capabilities: Capabilities;
  /** Builds the engine once the run's config is known (from the welcome). */
  createTrainer(config: RunConfig, params: Float32Array): Promise<Trainer>;
  /** This worker's batches (its own seed or shard of the corpus). */
  nextBatch(): Batch;
  /** Modelled compute time of one inner step (the simulator); omitted on real hardware. */
  stepMs?: () => number;
}

interface RoundInFlight {
  open: RoundOpenMessage;
  participant: boolean;
  /** Encoded Δ per shard, once contributed. */
  payloads: Uint8Array[] | null;
  weight: number;
  contributionStep: number;
  committedAt: number | null;
  /** When its round-open arrived (clock ms). */
  openedAt: number;
}

export interface WorkerMetrics {
  innerStep: number;
  tokens: number;
  loss: number | null;
  tokensPerSecond: number;
  stalls: number;
  /** Time spent waiting on the network instead of training (τ = 0 only), ms. */
  stalledMs: number;
  contributions: number;
  merges: number;
  /** Contributions scaled down into the owners' bound (contributionBound). */
  clampedContributions: number;
  /** Times θ_local went non-finite and was replaced by θ_global. */
  recoveries: number;
}

export class Worker {
  readonly metrics: WorkerMetrics = {
    innerStep: 0,
    tokens: 0,
    loss: null,
    tokensPerSecond: 0,
    stalls: 0,
    stalledMs: 0,
    contributions: 0,
    merges: 0,
    clampedContributions: 0,
    recoveries: 0,
  };
  config: RunConfig | null = null;
  replica: ReplicaNode | null = null;
  private trainer: Trainer | null = null;
  private fragments: Fragment[] = [];
  private tokensSince: number[] = [];
  /** Rounds this worker contributed to, until merged or aborted (one per fragment). */
  private readonly rounds = new Map<number, RoundInFlight>();
  /** Rounds opened for this worker whose contribution is due at the next step boundary. */
  private readonly pendingOpens = new Map<number, RoundInFlight>();
  /** Peers that said leave (until they come up again): not waited for as participants. */
  private readonly departed = new Set<PeerId>();
  /** A late joiner's offset into the room's learning-rate schedule (set at its first round-open). */
  private scheduleOffset = 0;
  private lateJoiner = false;
  /** The shards this worker aggregates as owner or checker (created with the run's config). */
  private duties: ShardDuties | null = null;
  private feedback: ErrorFeedback[] = [];
  /** Fragments whose θ_global is being fetched (joining late, diverged, a host that came back). */
  private readonly pendingSync = new Set<number>();
  /** The coordinator is down: rounds cannot commit until it comes back and welcomes this worker again. */
  private coordinatorLost = false;
  /** Why the loop stopped by itself, if it did. */
  stopReason: string | null = null;
  /**
   * This worker's contributions that shard owners refused, by reason (from their `rejected`
   * answers): the host sees no owner's refusals, so the heartbeat carries them to its dashboard.
   */
  readonly rejectedContributions = new Map<string, number>();
  private codec: Codec | null = null;
  private synced = false;
  private stopped = false;
  private paused = false;
  private lastHeartbeat = Number.NEGATIVE_INFINITY;
  private welcome: Promise<void>;

  constructor(private readonly options: WorkerOptions) {
    const { member } = options;
    let resolveWelcome = () => {};
    this.welcome = new Promise((resolve) => {
      resolveWelcome = resolve;
    });
    member.on('welcome', (from, message) => {
      if (from !== options.coordinator) return;
      if (this.config) return this.onWelcomeBack(message.config, message.stateFrom, message.fragments);
      void this.start(message.config, message.stateFrom, message.fragments).then(resolveWelcome);
    });
    member.on('round-open', (from, message) => this.onOpen(from, message));
    member.on('contribution', (from, message) => {
      if (this.duties) this.duties.onContribution(from, message);
      else member.refuse(from, 'contribution', 'not-owner', 'this worker has not joined the run yet');
    });
    member.on('reassign', (from, message) => {
      if (from !== options.coordinator) {
        member.refuse(from, 'reassign', 'not-coordinator', `${from} does not coordinate this room`);
        return;
      }
      // the round may still be pending here (opened mid-step, taken up at the next boundary): its
      // contribution must then go to the new owner, and a new owner that is this worker must collect
      const round = [this.rounds.get(message.fragment), this.pendingOpens.get(message.fragment)].find(
        (r) => r?.open.round === message.round,
      );
      if (!round) return;
      round.open.shards[message.shard] = {
        ...(round.open.shards[message.shard] as RoundOpenMessage['shards'][number]),
        owner: message.owner,
      };
      if (message.owner === member.self) this.duties?.take(round.open, message.shard, 'owner', message.deadlineMs);
      if (round.payloads) this.sendShard(round, message.shard, [message.owner]);
    });
    member.onPeerDown((peer) => {
      if (peer === options.coordinator) return this.onCoordinatorLost();
      this.dropParticipant(peer);
    });
    // A worker that leaves on purpose (a closed tab) says so before its link goes down, which can
    // take a while: its shards are not waited for from then on.
    member.on('leave', (from) => {
      if (from === options.coordinator) return;
      this.departed.add(from);
      this.dropParticipant(from);
    });
    // The coordinator dropped this worker (its link failed for a moment): as after a restart,
    // its rounds are gone; say hello again.
    member.on('rejected', (from, message) => {
      if (from !== options.coordinator || message.about !== 'heartbeat' || message.reason !== 'not-member') return;
      if (!this.config || this.coordinatorLost) return;
      this.onCoordinatorLost();
      void this.hello();
    });
    member.on('rejected', (from, message) => {
      if (message.about !== 'contribution') return;
      // Only an owner of that shard of a round this worker sent to may say so: a stranger's
      // claim would otherwise put refusals on this worker's record.
      const round = this.rounds.get(message.fragment ?? -1);
      const owner = round?.open.round === message.round ? round?.open.shards[message.shard ?? -1]?.owner : undefined;
      if (owner !== from) return;
      const counts = this.rejectedContributions;
      if (counts.has(message.reason) || counts.size < MAX_REJECTION_REASONS) {
        counts.set(message.reason, (counts.get(message.reason) ?? 0) + 1);
      }
    });
    // A host that restarts (`shoal host --resume`, a reloaded dashboard) comes back as the same
    // peer: say hello again with what this replica holds, and carry on from its welcome.
    member.onPeerUp((peer) => {
      this.departed.delete(peer);
      if (peer === options.coordinator && this.coordinatorLost && this.config) void this.hello();
    });
  }

  private async hello(): Promise<void> {
    // A stopped worker is leaving: a heartbeat's late refusal must not make it a member again.
    if (this.stopped) return;
    await this.options.member.send(this.options.coordinator, {
      kind: 'hello',
      role: 'worker',
      client: 'shoal-swarm 0.1.0',
      capabilities: this.options.capabilities,
      holds: this.replica?.state.fragments.map((f, fragment) => ({ fragment, round: f.round, hash: f.hash })) ?? [],
      innerStep: this.metrics.innerStep,
    });
  }

  /**
   * The coordinator went away: no round in flight can commit any more. Committed rounds still
   * merge; the others are dropped (their error feedback discarded) and training goes on alone
   * until the host comes back.
   */
  private onCoordinatorLost(): void {
    this.coordinatorLost = true;
    for (const [p, round] of this.rounds) {
      if (round.committedAt === null) this.dropRound(p);
    }
    this.pendingOpens.clear();
    this.duties?.clear();
    this.replica?.state.abortAll();
  }

  /** A participant that is gone (down or left): the shards this worker collects stop waiting for it. */
  private dropParticipant(peer: PeerId): void {
    this.duties?.drop(peer);
  }

  /** Forgets fragment p's round in flight, which will not commit: its error feedback is discarded. */
  private dropRound(p: number): void {
    this.rounds.delete(p);
    if (this.feedback[p]?.pending) this.feedback[p]?.discard();
  }

  /** The welcome of a host that came back: the same run, and θ_global to fetch if it moved. */
  private onWelcomeBack(config: RunConfig, stateFrom: PeerId | null, fragments: FragmentState[]): void {
    if (!this.coordinatorLost) return; // a repeated welcome
    this.coordinatorLost = false;
    for (const f of fragments) this.replica?.trust(f.fragment, f.hash, f.round);
    if (JSON.stringify(config) !== JSON.stringify(this.config)) {
      this.stopReason = "the host came back with another run's config";
      this.stop();
      return;
    }
    this.lateJoiner = true; // re-read the room's schedule position at the next round
    if (stateFrom && this.replica) {
      this.synced = false;
      for (const f of this.fragments) this.pendingSync.add(f.index);
      this.replica.fetch(stateFrom, [...this.pendingSync]);
    }
  }

  /** Says hello and waits for the welcome (and for the state, when joining late). */
  async join(): Promise<void> {
    await this.options.member.waitForPeer(this.options.coordinator);
    await this.hello();
    await this.welcome;
  }

  /** Resolves at the coordinator's welcome (and the state, when joining late). */
  get welcomed(): Promise<void> {
    return this.welcome;
  }

  get isSynced(): boolean {
    return this.synced;
  }

  stop(): void {
    this.stopped = true;
  }

  /** Pauses the inner loop after the step in progress (the worker stays a member and a replica). */
  pause(): void {
    this.paused = true;
  }

  resume(): void {
    this.paused = false;
  }

  get isPaused(): boolean {
    return this.paused;
  }

  /** The inner loop, until stop() or `until()` says so. */
  async run(until: () => boolean = () => false): Promise<void> {
    const { member } = this.options;
    while (!this.stopped && !until()) {
      if (!this.synced || !this.trainer || !this.config) {
        await member.clock.sleep(50);
        continue;
      }
      if (this.paused) {
        // No training, but still a member: due contributions go out, rounds merge, heartbeats flow.
        await this.atBoundary();
        if (member.clock.now() - this.lastHeartbeat >= this.config.heartbeatMs) this.heartbeat();
        await member.clock.sleep(50);
        continue;
      }
      await this.atBoundary();
      await this.waitForRounds();
      const { train } = this.config;
      const started = member.clock.now();
      const lr = learningRate(this.scheduleStep(), train);
      const loss = await member.clock.track(this.trainer.step(this.options.nextBatch(), lr));
      // The modelled compute time; on a real clock at least a zero-length sleep, so timers, the
      // mesh and signals get served between steps of a synchronous (CPU) engine.
      await member.clock.sleep(this.options.stepMs?.() ?? 0);
      const tokens = train.batchSize * train.seqLen;
      this.metrics.innerStep++;
      this.metrics.tokens += tokens;
      // NaN (a dry run, or a diverged step) is reported as unknown: the wire carries finite numbers only.
      this.metrics.loss = Number.isFinite(loss) ? loss : null;
      const elapsed = member.clock.now() - started;
      if (elapsed > 0) this.metrics.tokensPerSecond = (tokens * 1000) / elapsed;
      for (let p = 0; p < this.tokensSince.length; p++) this.tokensSince[p] = (this.tokensSince[p] as number) + tokens;
      // Progress also every H/5 steps: the coordinator opens rounds from it, and fast steps would
      // otherwise cross several H between two timed heartbeats.
      const everySteps = Math.max(1, Math.floor(this.config.diloco.innerSteps / 5));
      const due = member.clock.now() - this.lastHeartbeat >= this.config.heartbeatMs;
      if (due || this.metrics.innerStep % everySteps === 0) this.heartbeat();
    }
  }

  /**
   * When the inner loop must wait for the network (ARCHITECTURE.md: only when a fragment's next
   * round would start while its last one is still open): a round this worker contributed to,
   * not yet resolved, H inner steps after the contribution. τ = 0 is DiLoCo without overlap: the
   * worker waits for every round at once. The wait is the simulator's lost compute time.
   */
  private async waitForRounds(): Promise<void> {
    const { clock } = this.options.member;
    const { overlap, innerSteps } = (this.config as RunConfig).diloco;
    const patience = overlap === 0 ? 0 : innerSteps;
    const blocking = () =>
      [...this.rounds.values()].some(
        (r) => r.payloads !== null && r.committedAt === null && this.metrics.innerStep >= r.contributionStep + patience,
      ) ||
      (overlap === 0 && [...this.rounds.values()].some((r) => r.payloads !== null));
    let waited = false;
    while (!this.stopped && blocking()) {
      await clock.sleep(5);
      this.metrics.stalledMs += 5;
      waited = true;
      await this.atBoundary();
    }
    if (waited) this.metrics.stalls++;
  }

  /**
   * Runs the step-boundary work (merges, due contributions) without training: the simulator's
   * final sync, after the inner loop has stopped. True while rounds of this worker are in flight.
   */
  async boundary(): Promise<boolean> {
    await this.atBoundary();
    return this.pendingOpens.size > 0 || this.rounds.size > 0;
  }

  /** θ_local, for evaluation and tests. */
  async params(): Promise<Float32Array> {
    if (!this.trainer) throw new Error('the worker has not started');
    return this.options.member.clock.track(this.trainer.getParams());
  }

  destroy(): void {
    this.trainer?.destroy();
    this.duties?.clear();
  }

  private heartbeat(): void {
    const { member } = this.options;
    this.lastHeartbeat = member.clock.now();
    void member.send(this.options.coordinator, {
      kind: 'heartbeat',
      innerStep: this.metrics.innerStep,
      tokensSinceContribution: this.tokensSince,
      loss: this.metrics.loss,
      tokensPerSecond: this.metrics.tokensPerSecond,
      bytesSent: member.bytesSent,
      bytesReceived: member.bytesReceived,
      stalls: this.metrics.stalls,
      reachable: member.transport.peers(),
      rejectedContributions: Object.fromEntries(this.rejectedContributions),
    });
  }

  /** The inner schedule's step: this worker's steps, offset for a late joiner (see onOpen). */
  private scheduleStep(): number {
    return this.metrics.innerStep + this.scheduleOffset;
  }

  private async start(config: RunConfig, stateFrom: PeerId | null, welcomed: FragmentState[]): Promise<void> {
    const { member } = this.options;
    this.config = config;
    const layout = buildLayout(config.model);
    this.fragments = buildFragments(layout, config.diloco.fragments, config.diloco.fragmentMode);
    if (this.fragments.length !== welcomed.length) throw new Error('the welcome disagrees with the fragment count');
    this.tokensSince = this.fragments.map(() => 0);
    const init = initParameters(layout, config.train.seed);
    const hasher = await member.clock.track(createFragmentHasher(config.diloco.hashAlgorithm));
    const state = new ReplicaState(
      this.fragments,
      init,
      hasher,
      { lr: config.diloco.outerLr, momentum: config.diloco.outerMomentum },
      undefined,
      contributionBound(config),
    );
    this.duties = new ShardDuties({
      member,
      hasher,
      config,
      replicas: () => [this.options.coordinator, ...member.transport.peers()],
      departed: () => this.departed,
    });
    this.codec = createCodec(config.diloco.codec, { blockSize: config.diloco.codecBlockSize });
    if (config.diloco.errorFeedback) {
      this.feedback = this.fragments.map((f) => new ErrorFeedback(this.codec as Codec, f.size));
    }
    const pendingSync = this.pendingSync;
    for (const f of stateFrom ? this.fragments : []) pendingSync.add(f.index);
    const synced = async () => {
      const params = state.params(new Float32Array(layout.size));
      if (this.trainer) await member.clock.track(this.trainer.setParams(params));
      else this.trainer = await member.clock.track(this.options.createTrainer(config, params));
      // A fragment that diverged meanwhile (a commit overtook its transfer) is being fetched again:
      // its own `synced` call says hello, with holds the coordinator can accept.
      if (pendingSync.size > 0) return;
      this.synced = true;
      await this.hello();
    };
    this.replica = new ReplicaNode(member, state, {
      coordinator: () => this.options.coordinator,
      events: this.replicaEvents(pendingSync, synced),
    });
    for (const f of welcomed) this.replica.trust(f.fragment, f.hash, f.round);
    if (stateFrom) {
      this.lateJoiner = true;
      this.replica.fetch(stateFrom, [...pendingSync]);
    } else {
      await synced();
    }
  }

  /** How the worker follows its replica: merges, aborts, resyncs. */
  private replicaEvents(pendingSync: Set<number>, synced: () => Promise<void>): ReplicaEvents {
    return {
      opened: (open) => this.duties?.noteOpened(open.fragment, open.round),
      committed: (p, round) => {
        this.duties?.endRound(p, round);
        const inFlight = this.rounds.get(p);
        if (inFlight && inFlight.open.round === round) {
          inFlight.committedAt = this.metrics.innerStep;
          if (this.feedback[p]?.pending) this.feedback[p]?.commit();
        }
      },
      aborted: (p, round) => {
        this.duties?.endRound(p, round);
        if (this.pendingOpens.get(p)?.open.round === round) this.pendingOpens.delete(p);
        if (this.rounds.get(p)?.open.round === round) this.dropRound(p);
      },
      diverged: (p) => {
        this.dropRound(p);
        this.pendingOpens.delete(p); // named in a round whose base it lacks: it cannot contribute
        pendingSync.add(p);
        // say so (a hello with the stale holds makes it 'syncing'), so the coordinator names it in
        // no round it cannot contribute to, and does not bench it for one
        this.synced = false;
        void this.hello();
      },
      synced: (p) => {
        pendingSync.delete(p);
        if (pendingSync.size === 0) void synced();
      },
    };
  }

  private onOpen(from: PeerId, open: RoundOpenMessage): void {
    if (from !== this.options.coordinator) return;
    const participant = open.participants.includes(this.options.member.self);
    if (!participant) return;
    // A shard it owns is aggregated whatever this replica holds (aggregation needs no θ_global):
    // a named owner that stayed away would leave every replica without that shard's result.
    const self = this.options.member.self;
    for (const [k, shard] of open.shards.entries()) {
      if (shard.owner === self) this.duties?.take(open, k, 'owner', open.deadlineMs);
      else if (shard.checker === self) this.duties?.take(open, k, 'checker', open.deadlineMs);
    }
    if (!this.synced) return; // fetching θ_global: it contributes from its next round
    if (this.lateJoiner && this.config) {
      // A late joiner continues the room's learning-rate schedule: the room's tokens per participant.
      const perStep = this.config.train.batchSize * this.config.train.seqLen * open.participants.length;
      this.scheduleOffset = Math.max(0, Math.round(open.roomTokens / perStep) - this.metrics.innerStep);
      this.lateJoiner = false;
    }
    this.pendingOpens.set(open.fragment, {
      open,
      participant,
      payloads: null,
      weight: 0,
      contributionStep: 0,
      committedAt: null,
      openedAt: this.options.member.clock.now(),
    });
  }

  /** Merges finished rounds and sends due contributions; runs between inner steps. */
  private async atBoundary(): Promise<void> {
    const trainer = this.trainer;
    const replica = this.replica;
    const config = this.config;
    if (!trainer || !replica || !config) return;
    let params: Float32Array | null = null;
    let merged = false;
    const step = this.metrics.innerStep;
    // A round neither committed nor aborted long after the coordinator's own deadline (its abort
    // never reached this worker): give it up rather than wait on it forever.
    const now = this.options.member.clock.now();
    for (const [p, round] of this.rounds) {
      if (round.committedAt !== null || now - round.openedAt <= 2 * round.open.deadlineMs + 1_000) continue;
      this.dropRound(p);
      replica.state.abort(p, round.open.round);
    }
    for (const [p, round] of this.rounds) {
      const due = round.committedAt !== null && step >= round.contributionStep + config.diloco.overlap;
      const forced = round.committedAt !== null && this.pendingOpens.has(p);
      if (!due && !forced) continue;
      params ??= await this.options.member.clock.track(trainer.getParams());
      this.merge(params, p, config.diloco.alpha);
      merged = true;
      this.rounds.delete(p);
    }
    for (const [p, round] of this.pendingOpens) {
      if (this.rounds.has(p)) {
        this.metrics.stalls++; // the previous round of p is still open: contribute later
        continue;
      }
      this.pendingOpens.delete(p);
      params ??= await this.options.member.clock.track(trainer.getParams());
      if (this.contribute(params, round)) {
        this.rounds.set(p, round);
        continue;
      }
      await this.recover(trainer);
      return;
    }
    if (params && merged) await this.options.member.clock.track(trainer.setParams(params));
  }

  private merge(params: Float32Array, p: number, alpha: number): void {
    const fragment = this.fragments[p] as Fragment;
    const global = this.replica?.state.fragment(p).theta as Float32Array;
    const local = gatherFragment(params, fragment);
    for (let i = 0; i < local.length; i++) {
      local[i] = alpha * (local[i] as number) + (1 - alpha) * (global[i] as number);
    }
    scatterFragment(local, fragment, params);
    this.metrics.merges++;
  }

  /**
   * Sends Δ = θ_global[p] − θ_local[p] to the round's owners and checkers. False, sending nothing,
   * when θ_local is not finite: the caller puts θ_global back in its place.
   */
  private contribute(params: Float32Array, round: RoundInFlight): boolean {
    const p = round.open.fragment;
    const fragment = this.fragments[p] as Fragment;
    const global = this.replica?.state.fragment(p).theta as Float32Array;
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
    const limit = contributionBound(this.config as RunConfig) / 2;
    if (largest > limit) {
      const scale = limit / largest;
      for (let i = 0; i < delta.length; i++) delta[i] = (delta[i] as number) * scale;
      this.metrics.clampedContributions++;
    }
    const codec = createCodec(round.open.codec, { blockSize: round.open.blockSize });
    const feedback = this.feedback[p];
    const encoded =
      feedback && feedback.pending === false && codec.name === this.codec?.name
        ? feedback.encode(delta)
        : codec.encode(delta);
    round.payloads = round.open.shards.map((shard) =>
      encoded.subarray(codec.encodedSize(shard.start), codec.encodedSize(shard.end)),
    );
    round.weight = Math.max(1, this.tokensSince[p] as number);
    round.contributionStep = this.metrics.innerStep;
    this.tokensSince[p] = 0;
    this.metrics.contributions++;
    for (const [k, shard] of round.open.shards.entries()) {
      this.sendShard(round, k, shard.checker === undefined ? [shard.owner] : [shard.owner, shard.checker]);
    }
    return true;
  }

  /** θ_local went non-finite: θ_global in its place and fresh AdamW moments, instead of a crash. */
  private async recover(trainer: Trainer): Promise<void> {
    const replica = this.replica as ReplicaNode;
    const params = replica.state.params(new Float32Array(trainer.layout.size));
    const clock = this.options.member.clock;
    await clock.track(trainer.setParams(params));
    const size = trainer.layout.size;
    await clock.track(trainer.setOptimizerState({ m: new Float32Array(size), v: new Float32Array(size), step: 0 }));
    this.metrics.recoveries++;
  }

  private sendShard(round: RoundInFlight, k: number, to: PeerId[]): void {
    const shard = round.open.shards[k];
    const payload = round.payloads?.[k];
    if (!shard || !payload) return;
    void this.options.member.broadcast(to, {
      kind: 'contribution',
      fragment: round.open.fragment,
      round: round.open.round,
      shard: k,
      codec: round.open.codec,
      weight: round.weight,
      payload,
    });
  }
}
