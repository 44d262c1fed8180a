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
  MAX_REJECTION_REASONS,
  type PeerId,
  type RoundOpenMessage,
  type RunConfig,
} from '@shoal/protocol';
import type { Member } from './member.ts';
import { ShardCollector } from './owner.ts';
import { ReplicaState } from './replica.ts';
import { ReplicaNode } from './replica-node.ts';

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
  private readonly collectors = new Map<string, { collector: ShardCollector; cancel: () => void }>();
  private readonly early: {
    from: PeerId;
    fragment: number;
    round: number;
    shard: number;
    weight: number;
    payload: Uint8Array;
  }[] = [];
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
      if (this.config) return this.onWelcomeBack(message.config, message.stateFrom);
      void this.start(message.config, message.stateFrom, message.fragments.length).then(resolveWelcome);
    });
    member.on('round-open', (from, message) => this.onOpen(from, message));
    member.on('contribution', (from, message) => this.onContribution(from, message));
    member.on('reassign', (from, message) => {
      if (from !== options.coordinator) return;
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
      if (message.owner === member.self) this.own(round.open, message.shard, message.deadlineMs);
      if (round.payloads) this.sendShard(round, message.shard);
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
    for (const { cancel } of this.collectors.values()) cancel();
    this.collectors.clear();
    this.early.length = 0;
    this.replica?.state.abortAll();
  }

  /** A participant that is gone (down or left): the shards this worker collects stop waiting for it. */
  private dropParticipant(peer: PeerId): void {
    for (const { collector } of this.collectors.values()) {
      collector.drop(peer);
      this.maybeFinishShard(collector);
    }
  }

  /** Forgets fragment p's round in flight, which will not commit: its error feedback is discarded. */
  private dropRound(p: number): void {
    this.rounds.delete(p);
    if (this.feedback[p]?.pending) this.feedback[p]?.discard();
  }

  /** The welcome of a host that came back: the same run, and θ_global to fetch if it moved. */
  private onWelcomeBack(config: RunConfig, stateFrom: PeerId | null): void {
    if (!this.coordinatorLost) return; // a repeated welcome
    this.coordinatorLost = false;
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
    for (const { cancel } of this.collectors.values()) cancel();
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

  private async start(config: RunConfig, stateFrom: PeerId | null, fragmentCount: number): Promise<void> {
    const { member } = this.options;
    this.config = config;
    const layout = buildLayout(config.model);
    this.fragments = buildFragments(layout, config.diloco.fragments, config.diloco.fragmentMode);
    if (this.fragments.length !== fragmentCount) throw new Error('the welcome disagrees with the fragment count');
    this.tokensSince = this.fragments.map(() => 0);
    const init = initParameters(layout, config.train.seed);
    const hasher = await member.clock.track(createFragmentHasher(config.diloco.hashAlgorithm));
    const state = new ReplicaState(this.fragments, init, hasher, {
      lr: config.diloco.outerLr,
      momentum: config.diloco.outerMomentum,
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
    this.replica = new ReplicaNode(member, state, () => this.options.coordinator, {
      committed: (p, round) => {
        const inFlight = this.rounds.get(p);
        if (inFlight && inFlight.open.round === round) {
          inFlight.committedAt = this.metrics.innerStep;
          if (this.feedback[p]?.pending) this.feedback[p]?.commit();
        }
      },
      aborted: (p, round) => {
        if (this.pendingOpens.get(p)?.open.round === round) this.pendingOpens.delete(p);
        if (this.rounds.get(p)?.open.round === round) this.dropRound(p);
      },
      diverged: (p) => {
        this.dropRound(p);
        this.pendingOpens.delete(p); // named in a round whose base it lacks: it cannot contribute
        pendingSync.add(p);
        this.synced = false;
      },
      synced: (p) => {
        pendingSync.delete(p);
        if (pendingSync.size === 0) void synced();
      },
    });
    if (stateFrom) {
      this.lateJoiner = true;
      this.replica.fetch(stateFrom, [...pendingSync]);
    } else {
      await synced();
    }
  }

  private onOpen(from: PeerId, open: RoundOpenMessage): void {
    if (from !== this.options.coordinator) return;
    const participant = open.participants.includes(this.options.member.self);
    if (!participant) return;
    // A shard it owns is aggregated whatever this replica holds (aggregation needs no θ_global):
    // a named owner that stayed away would leave every replica without that shard's result.
    for (const [k, shard] of open.shards.entries()) {
      if (shard.owner === this.options.member.self) this.own(open, k, open.deadlineMs);
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
      this.contribute(params, round);
      this.rounds.set(p, round);
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

  private contribute(params: Float32Array, round: RoundInFlight): void {
    const p = round.open.fragment;
    const fragment = this.fragments[p] as Fragment;
    const global = this.replica?.state.fragment(p).theta as Float32Array;
    const delta = gatherFragment(params, fragment);
    for (let i = 0; i < delta.length; i++) delta[i] = (global[i] as number) - (delta[i] as number);
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
    for (let k = 0; k < round.open.shards.length; k++) this.sendShard(round, k);
  }

  private sendShard(round: RoundInFlight, k: number): void {
    const shard = round.open.shards[k];
    const payload = round.payloads?.[k];
    if (!shard || !payload) return;
    void this.options.member.send(shard.owner, {
      kind: 'contribution',
      fragment: round.open.fragment,
      round: round.open.round,
      shard: k,
      codec: round.open.codec,
      weight: round.weight,
      payload,
    });
  }

  /** Takes on shard k of a round: collect, aggregate at completion or deadline, send the result. */
  private own(open: RoundOpenMessage, k: number, deadlineMs: number): void {
    const key = `${open.fragment}:${open.round}:${k}`;
    if (this.collectors.has(key) || !this.config) return;
    const shard = open.shards[k] as RoundOpenMessage['shards'][number];
    const collector = new ShardCollector({
      fragment: open.fragment,
      round: open.round,
      shard: k,
      length: shard.end - shard.start,
      codec: createCodec(open.codec, { blockSize: open.blockSize }),
      participants: open.participants,
      rule: this.config.diloco.aggregation,
      maxWeight: open.maxWeight,
    });
    // A participant already down (a shard reassigned after its owner crashed) is not waited for:
    // the peer-down that drops it from collectors came before this one existed.
    const up = new Set(this.options.member.transport.peers());
    for (const peer of open.participants) {
      if (peer !== this.options.member.self && (!up.has(peer) || this.departed.has(peer))) collector.drop(peer);
    }
    const cancel = this.options.member.clock.setTimer(deadlineMs, () => this.finishShard(collector));
    this.collectors.set(key, { collector, cancel });
    for (const entry of this.early.filter(
      (e) => e.fragment === open.fragment && e.round === open.round && e.shard === k,
    )) {
      this.early.splice(this.early.indexOf(entry), 1);
      collector.add(entry.from, entry.weight, entry.payload);
    }
    this.maybeFinishShard(collector);
  }

  private onContribution(
    from: PeerId,
    message: { fragment: number; round: number; shard: number; weight: number; payload: Uint8Array },
  ): void {
    const key = `${message.fragment}:${message.round}:${message.shard}`;
    const entry = this.collectors.get(key);
    if (!entry) {
      if (this.early.length < 1024) this.early.push({ from, ...message });
      else this.options.member.refuse(from, 'contribution', 'unknown-round', key);
      return;
    }
    const outcome = entry.collector.add(from, message.weight, message.payload);
    if (!outcome.accepted) {
      const { fragment, round, shard } = message;
      this.options.member.rejectBack(from, 'contribution', outcome.reason, outcome.message, { fragment, round, shard });
    }
    this.maybeFinishShard(entry.collector);
  }

  private maybeFinishShard(collector: ShardCollector): void {
    if (collector.isComplete()) this.finishShard(collector);
  }

  private finishShard(collector: ShardCollector): void {
    const { fragment, round, shard } = collector.job;
    const key = `${fragment}:${round}:${shard}`;
    const entry = this.collectors.get(key);
    if (!entry || entry.collector !== collector) return;
    this.collectors.delete(key);
    entry.cancel();
    const result = collector.finish();

    const replicas = [this.options.coordinator, ...this.options.member.transport.peers()];
    void this.options.member.broadcast([...replicas, this.options.member.self], {
      kind: 'shard-result',
      fragment,
      round,
      shard,
      codec: collector.job.codec.name,
      verdicts: result.verdicts,
      payload: result.payload,
    });
  }
}
