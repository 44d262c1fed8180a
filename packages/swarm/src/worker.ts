/**
 * A training worker: the inner AdamW loop on its engine, its membership of the room (hello,
 * welcome, heartbeats, a host that goes away and comes back), and its parts in every round it is
 * named in (docs/design.md, "The algorithm", "Rounds…", "The collective"):
 * - as a contributor it sends its Δ and merges committed rounds (worker-rounds.ts);
 * - as a shard owner or checker it collects, aggregates and sends the result (shard-duty.ts);
 * - as a replica it applies the outer step tentatively, reports the hash and adopts on commit
 *   (replica-node.ts).
 * Each round's codec is built once, at its open, and serves all three.
 * Inner steps never wait for the network, except that a fragment's next contribution first
 * merges its previous round (at most one round in flight per fragment).
 */
import { buildFragments, createCodec, createFragmentHasher, ErrorFeedback } from '@shoal/diloco';
import { learningRate } from '@shoal/gpu';
import {
  type Batch,
  buildLayout,
  CpuStageTrainer,
  initParameters,
  type StageSpec,
  type StageTrainer,
  type StepQueueStats,
  type Trainer,
} from '@shoal/model';
import {
  type Capabilities,
  type FragmentState,
  MAX_REJECTION_REASONS,
  type PeerId,
  type RosterMessage,
  type RoundOpenMessage,
  type RunConfig,
  type ShardPosition,
} from '@shoal/protocol';
import type { Member } from './member.ts';
import { fragmentStages } from './pipeline/groups.ts';
import { MeshStageTrainer, PipelineInterrupted } from './pipeline/mesh-stage.ts';
import { ReplicaState, type VectorInterner } from './replica.ts';
import { type ReplicaEvents, ReplicaNode } from './replica-node.ts';
import { median } from './roster.ts';
import { roundCodec } from './round-codec.ts';
import type { RoundMemo } from './round-memo.ts';
import { ShardDuties } from './shard-duty.ts';
import { DEFAULT_PIPELINE_DEPTH, type StepPipeline, stepPipelineFor } from './step-pipeline.ts';
import { type RoundCounters, WorkerRounds } from './worker-rounds.ts';

export interface WorkerOptions {
  member: Member;
  coordinator: PeerId;
  capabilities: Capabilities;
  /** Builds the engine once the run's config is known (from the welcome). */
  createTrainer(config: RunConfig, params: Float32Array): Promise<Trainer>;
  /**
   * Readies what the run needs besides the engine (its text, the batch stream) in a
   * pipeline-parallel room, where createTrainer is not called: the worker builds its stage itself.
   */
  prepare?(config: RunConfig): Promise<void>;
  /**
   * In a pipeline-parallel room, builds the engine of the stage the coordinator places this worker
   * in (default: the CPU stage).
   */
  createStage?(
    config: RunConfig,
    spec: StageSpec,
    params: Float32Array,
    o: { microBatch: number; slots: number },
  ): Promise<StageTrainer>;
  /**
   * This worker's batches (its own seed of the corpus, or its shards of a dataset: a promise while
   * a shard is still on its way).
   */
  nextBatch(): Batch | Promise<Batch>;
  /** A dataset room: where it stands in the shards it drew from since the last heartbeat. */
  dataPositions?(): ShardPosition[] | undefined;
  /**
   * How long the clock sleeps after each inner step, ms, given the step's measured time: the
   * modelled compute time of a step in the simulator, a rest that keeps a volunteer's engine under
   * its duty cycle, 0 (or omitted) for a worker that trains flat out.
   */
  sleepAfterStepMs?: (measuredStepMs: number) => number;
  /**
   * Steps a WebGPU engine keeps queued while round work runs (step-pipeline.ts; default
   * DEFAULT_PIPELINE_DEPTH); 1 awaits each step's loss. Other engines await every step.
   */
  pipelineDepth?: number;
  /** Shares its replica's vectors with the other replicas of this process (the simulator). */
  vectors?: VectorInterner;
  /** Shares its replica's and its shard duties' work with the others of this process (the simulator). */
  memo?: RoundMemo;
  /**
   * The run's seeded init (initParameters) where the workers of one process share one (the
   * simulator): read, never written. Made here when omitted.
   */
  initialParams?(config: RunConfig): Float32Array;
}

export interface WorkerMetrics extends RoundCounters {
  tokens: number;
  loss: number | null;
  /** Tokens of its last inner step over the step's wall time (the sleep after it included). */
  tokensPerSecond: number;
  /** Time spent waiting on the network instead of training (a due merge or a due round), ms. */
  stalledMs: number;
  /** Times it stopped waiting for an overdue round that did not come, and trained on. */
  overdueExcused: number;
}

/** Step times within this ratio count as one pace (no slack between them). */
const EQUAL_PACE = 1.25;
/** How long a worker waits for an overdue round before training on, in heartbeat periods. */
const OVERDUE_PATIENCE_HEARTBEATS = 3;
/** How long a worker waits for the welcome before it says hello again, ms. */
const HELLO_AGAIN_MS = 2_000;

export class Worker {
  readonly metrics: WorkerMetrics = {
    innerStep: 0,
    tokens: 0,
    loss: null,
    tokensPerSecond: 0,
    stalls: 0,
    stalledMs: 0,
    overdueExcused: 0,
    contributions: 0,
    merges: 0,
    clampedContributions: 0,
    recoveries: 0,
  };
  config: RunConfig | null = null;
  replica: ReplicaNode | null = null;
  private trainer: Trainer | null = null;
  /** The engine's queued steps, where it keeps some (a WebGPU engine; built at the first step). */
  private pipeline: StepPipeline | null | undefined;
  /** Its rounds as a contributor (created with the run's config). */
  private rounds: WorkerRounds | null = null;
  /** Peers that said leave (until they come up again): not waited for as participants. */
  private readonly departed = new Set<PeerId>();
  /** A late joiner's offset into the room's learning-rate schedule (set at its first round-open). */
  private scheduleOffset = 0;
  private lateJoiner = false;
  /** The shards this worker aggregates as owner or checker (created with the run's config). */
  private duties: ShardDuties | null = null;
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
  private synced = false;
  private stopped = false;
  /** The coordinator's latest roster (a pipeline stage built later starts from it). */
  private roster: RosterMessage | null = null;
  private paused = false;
  private lastHeartbeat = Number.NEGATIVE_INFINITY;
  private welcome: Promise<void>;
  /** Rejects when the welcome's run cannot start here (its text or its engine failed). */
  private setupFailed: Promise<never>;

  constructor(private readonly options: WorkerOptions) {
    const { member } = options;
    let resolveWelcome = () => {};
    this.welcome = new Promise((resolve) => {
      resolveWelcome = resolve;
    });
    let failSetup: (error: unknown) => void = () => {};
    this.setupFailed = new Promise<never>((_, reject) => {
      failSetup = reject;
    });
    // join() reports it; a worker that nobody joins has nobody to tell
    this.setupFailed.catch(() => {});
    member.on('welcome', (from, message) => {
      if (from !== options.coordinator) return;
      if (this.config) return this.onWelcomeBack(message.config, message.stateFrom, message.fragments);
      void this.start(message.config, message.stateFrom, message.fragments).then(resolveWelcome, failSetup);
    });
    member.on('round-open', (from, message) => this.onOpen(from, message));
    member.on('roster', (from, message) => {
      if (from === options.coordinator && message.epoch > (this.roster?.epoch ?? -1)) this.roster = message;
    });
    member.on('contribution', (from, message) => {
      if (this.duties) this.duties.onContribution(from, message);
      else member.refuse(from, 'contribution', 'not-owner', 'this worker has not joined the run yet');
    });
    member.on('reassign', (from, message) => {
      if (from !== options.coordinator) {
        member.refuse(from, 'reassign', 'not-coordinator', `${from} does not coordinate this room`);
        return;
      }
      // its contribution goes to the new owner, and a new owner that is this worker collects
      const round = this.rounds?.find(message.fragment, message.round);
      if (!round) return;
      round.open.shards[message.shard] = {
        ...(round.open.shards[message.shard] as RoundOpenMessage['shards'][number]),
        owner: message.owner,
      };
      if (message.owner === member.self) {
        this.duties?.take(round.open, round.codec, message.shard, 'owner', message.deadlineMs);
      }
      this.rounds?.sendShard(round, message.shard, [message.owner]);
    });
    member.onPeerDown((peer) => {
      if (peer === options.coordinator) return this.onCoordinatorLost();
      this.duties?.drop(peer); // the shards it collects stop waiting for it
    });
    // A worker that leaves on purpose (a closed tab) says so before its link goes down, which can
    // take a while: its shards are not waited for from then on.
    member.on('leave', (from) => {
      if (from === options.coordinator) return;
      this.departed.add(from);
      this.duties?.drop(from);
    });
    // The coordinator dropped this worker (its link failed for a moment): as after a restart,
    // its rounds are gone; say hello again. One that came back and still does not know this
    // worker never had its hello: a restarted host drops what arrives while it is still setting
    // up (its link is up before its coordinator listens), so each refused heartbeat says it again.
    member.on('rejected', (from, message) => {
      if (from !== options.coordinator || message.about !== 'heartbeat' || message.reason !== 'not-member') return;
      if (!this.config) return;
      if (!this.coordinatorLost) this.onCoordinatorLost();
      void this.hello();
    });
    member.on('rejected', (from, message) => {
      if (message.about !== 'contribution') return;
      // Only an owner of that shard of a round this worker sent to may say so: a stranger's
      // claim would otherwise put refusals on this worker's record.
      const owner = this.rounds?.ownerOf(message.fragment ?? -1, message.round ?? -1, message.shard ?? -1);
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
      // a pipeline stage holds its stage's fragments only
      holds:
        this.replica?.state.fragments.flatMap((f, fragment) =>
          this.replica?.state.follows(fragment) ? [{ fragment, round: f.round, hash: f.hash }] : [],
        ) ?? [],
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
    this.rounds?.dropUncommitted();
    this.duties?.clear();
    this.replica?.state.abortAll();
  }

  /**
   * A welcome to a worker already running: the answer to a hello during the run, or the welcome
   * of a host that came back (the same run, and θ_global to fetch if it moved).
   */
  private onWelcomeBack(config: RunConfig, stateFrom: PeerId | null, fragments: FragmentState[]): void {
    if (!this.coordinatorLost) {
      this.catchUp(stateFrom, fragments);
      return;
    }
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
      for (const f of this.replica.fragments) this.pendingSync.add(f.index);
      this.replica.fetch(stateFrom, [...this.pendingSync]);
    }
  }

  /**
   * The coordinator found this replica's holds behind (stateFrom set): fetch each fragment it names
   * at a newer state. A commit that reached this worker while its replica was being built was lost,
   * and it would otherwise train on, sure it is synced, until a round's base showed otherwise.
   */
  private catchUp(stateFrom: PeerId | null, fragments: FragmentState[]): void {
    const replica = this.replica;
    if (!stateFrom || !replica) return;
    for (const { fragment: p, round, hash } of fragments) {
      if (p >= replica.state.fragments.length) continue;
      replica.trust(p, hash, round);
      const held = replica.state.fragment(p);
      const behind = round > held.round || (round === held.round && hash !== held.hash);
      // a round it has open is on its way here (its results or its commit still arriving)
      const coming = replica.state.isOpen(p, round);
      if (behind && !coming && replica.state.follows(p) && !replica.fetching.has(p)) replica.resync(p);
    }
  }

  /**
   * Says hello and waits for the welcome (and for the state, when joining late); rejects when the
   * welcome's run cannot start here (the text or the engine failed).
   */
  async join(): Promise<void> {
    const { member, coordinator } = this.options;
    await member.waitForPeer(coordinator);
    await this.hello();
    // A host still setting up (its link is up before its coordinator listens) drops the hello:
    // say it again until a welcome comes.
    const again = () => {
      if (this.config || this.stopped) return;
      void this.hello();
      member.clock.setTimer(HELLO_AGAIN_MS, again);
    };
    member.clock.setTimer(HELLO_AGAIN_MS, again);
    await Promise.race([this.welcome, this.setupFailed]);
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
    // a pipeline stage waiting on its group would otherwise wait out its timeout
    this.trainer?.stop?.();
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
      if (!this.synced || !this.trainer || !this.config || !this.rounds) {
        await member.clock.sleep(50);
        continue;
      }
      if (this.paused || this.trainer.waiting) {
        // No training, but still a member: due contributions go out, rounds merge, heartbeats flow.
        await this.atBoundary();
        if (member.clock.now() - this.lastHeartbeat >= this.config.heartbeatMs) this.heartbeat();
        await member.clock.sleep(50);
        continue;
      }
      const pipeline = this.pipelineFor(this.trainer);
      if (pipeline) {
        const { trainer, rounds, config } = this;
        await pipeline.step({
          boundary: (overlap) => rounds.atBoundary(trainer, overlap),
          waitForRounds: () => this.waitForRounds(),
          next: async () => ({
            batch: await this.options.nextBatch(),
            lr: learningRate(this.scheduleStep(), config.train),
          }),
          counted: (elapsedMs) => this.stepped(config, rounds, elapsedMs),
          restAfter: (stepMs) => this.options.sleepAfterStepMs?.(stepMs) ?? 0,
          sleep: (ms) => member.clock.sleep(ms),
        });
        continue;
      }
      await this.atBoundary();
      await this.waitForRounds();
      const { train } = this.config;
      const started = member.clock.now();
      const lr = learningRate(this.scheduleStep(), train);
      let loss: number;
      try {
        // a pipeline stage's step waits on its group over the network, and tracks its own compute
        const step = this.trainer.step(await this.options.nextBatch(), lr);
        loss = await (this.trainer.distributed ? step : member.clock.track(step));
      } catch (error) {
        if (!(error instanceof PipelineInterrupted)) throw error;
        await member.clock.sleep(50); // the group changed or stalled: nothing was applied; again
        continue;
      }
      // On a real clock at least a zero-length sleep, so timers, the mesh and signals get served
      // between steps of a synchronous (CPU) engine.
      await member.clock.sleep(this.options.sleepAfterStepMs?.(member.clock.now() - started) ?? 0);
      this.stepped(this.config, this.rounds, member.clock.now() - started, loss);
    }
    await this.pipeline?.drain();
  }

  /**
   * Counts an inner step, trained or queued on the engine: metrics (with its loss, where known),
   * the tokens each fragment's next contribution weighs, heartbeats.
   */
  private stepped(config: RunConfig, rounds: WorkerRounds, elapsedMs: number, loss?: number): void {
    const tokens = config.train.batchSize * config.train.seqLen;
    this.metrics.innerStep++;
    this.metrics.tokens += tokens;
    if (loss !== undefined) this.noteLoss(loss);
    if (elapsedMs > 0) this.metrics.tokensPerSecond = (tokens * 1000) / elapsedMs;
    rounds.trained(tokens);
    // Progress also every H/5 steps: the coordinator opens rounds from it, and fast steps would
    // otherwise cross several H between two timed heartbeats.
    const everySteps = Math.max(1, Math.floor(config.diloco.innerSteps / 5));
    const due = this.options.member.clock.now() - this.lastHeartbeat >= config.heartbeatMs;
    if (due || this.metrics.innerStep % everySteps === 0) this.heartbeat();
  }

  /** NaN (a dry run, or a diverged step) is reported as unknown: the wire carries finite numbers only. */
  private noteLoss(loss: number): void {
    this.metrics.loss = Number.isFinite(loss) ? loss : null;
  }

  /** The engine's step pipeline, built at the first step; null where each step is awaited. */
  private pipelineFor(trainer: Trainer): StepPipeline | null {
    if (trainer.distributed) return null;
    if (this.pipeline === undefined) {
      trainer.queue?.reset(); // the queue's figures count from the first step, pipelined or not
      const depth = this.options.pipelineDepth ?? DEFAULT_PIPELINE_DEPTH;
      this.pipeline = stepPipelineFor(trainer, depth, (loss) => this.noteLoss(loss));
    }
    return this.pipeline;
  }

  /** How busy the engine's step queue has been since its first queued step (a WebGPU engine's only). */
  get queue(): StepQueueStats | null {
    return this.trainer?.queue?.stats() ?? null;
  }

  /** Waits while a round blocks the inner loop (WorkerRounds.blocking): the simulator's lost compute time. */
  private async waitForRounds(): Promise<void> {
    const { clock } = this.options.member;
    const heartbeatMs = this.config?.heartbeatMs ?? 1000;
    let waited = false;
    let overdueSince: number | null = null;
    while (!this.stopped && this.rounds) {
      const late = this.awaitsRounds() ? this.rounds.overdue() : [];
      if (late.length === 0) overdueSince = null;
      else if (overdueSince === null) overdueSince = clock.now();
      else if (clock.now() - overdueSince > OVERDUE_PATIENCE_HEARTBEATS * heartbeatMs) {
        // no round came: the coordinator is paused, or waits on others; train on, and wait again
        // from the next contribution (for every fragment: a coordinator that opens none of these
        // opens none of the others)
        this.rounds.excuseAll();
        this.metrics.overdueExcused++;
        continue;
      }
      if (late.length === 0 && !this.rounds.blocking()) break;
      // the coordinator opens rounds from the steps heartbeats report: report an overdue one at
      // once, and stay seen (and counted) through a long wait
      if ((late.length > 0 && !waited) || clock.now() - this.lastHeartbeat >= heartbeatMs) this.heartbeat();
      await clock.sleep(5);
      this.metrics.stalledMs += 5;
      waited = true;
      await this.atBoundary();
    }
    if (waited) this.metrics.stalls++;
  }

  /** Whether this worker takes part in rounds now, so that it waits for an overdue one. */
  private awaitsRounds(): boolean {
    return this.synced && !this.coordinatorLost && !this.paused && this.pendingSync.size === 0;
  }

  /**
   * The slacks, in steps, from a round-open's step times (docs/design.md, "Bounded staleness"):
   * a worker ρ times as fast as the median participant trains H·(ρ − 1) steps past a due round
   * before waiting for it (at most H·(weightCapFactor − 1)); one faster than the slowest
   * participant trains past its due merge by that one's step in its own steps (the slowest
   * contributes at its next step boundary, so the round commits that much later). Both are 0 in a
   * room of equals (within 25%): there a merge lands exactly τ steps after its contribution and a
   * round carries exactly H steps.
   */
  private slacksFrom(open: RoundOpenMessage, self: number): { merge: number; round: number } {
    const times = open.stepMs;
    const mine = times?.[self];
    if (!times || !mine || !this.config) return { merge: 0, round: 0 };
    const { innerSteps: H, weightCapFactor } = this.config.diloco;
    const aboveMedian = median(times) / mine;
    const aboveSlowest = Math.max(...times) / mine;
    const round = aboveMedian < EQUAL_PACE ? 0 : Math.round(H * Math.min(weightCapFactor - 1, aboveMedian - 1));
    const merge = aboveSlowest < EQUAL_PACE ? 0 : Math.min(H, Math.ceil(aboveSlowest));
    return { merge, round };
  }

  /**
   * Runs the step-boundary work (merges, due contributions) without training: the simulator's
   * final sync, after the inner loop has stopped. True while rounds of this worker are in flight.
   */
  async boundary(): Promise<boolean> {
    await this.atBoundary();
    return this.rounds?.busy ?? false;
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
    const data = this.options.dataPositions?.();
    const waitingFor = this.duties?.waitingFor() ?? [];
    void member.send(this.options.coordinator, {
      kind: 'heartbeat',
      innerStep: this.metrics.innerStep,
      tokensSinceContribution: this.rounds?.unsentTokens() ?? [],
      loss: this.metrics.loss,
      tokensPerSecond: this.metrics.tokensPerSecond,
      bytesSent: member.bytesSent,
      bytesReceived: member.bytesReceived,
      stalls: this.metrics.stalls,
      reachable: member.transport.peers(),
      rejectedContributions: Object.fromEntries(this.rejectedContributions),
      ...(this.config?.diloco.lowRank && this.rounds ? { lowRankErrors: this.rounds.lowRankErrors } : {}),
      ...(data ? { data } : {}),
      ...(waitingFor.length > 0 ? { waitingFor } : {}),
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
    const fragments = buildFragments(layout, config.diloco.fragments, config.diloco.fragmentMode);
    if (fragments.length !== welcomed.length) throw new Error('the welcome disagrees with the fragment count');
    const init = this.options.initialParams?.(config) ?? initParameters(layout, config.train.seed);
    // a stage hears the roster from the start: the coordinator places it before it has synced
    if (config.pipeline) {
      await this.options.prepare?.(config);
      this.trainer = this.meshStage(config, init);
    }
    const hasher = await member.clock.track(createFragmentHasher(config.diloco.hashAlgorithm));
    const state = ReplicaState.forRun(config, {
      fragments,
      params: init,
      hasher,
      vectors: this.options.vectors,
      memo: this.options.memo,
    });
    this.duties = new ShardDuties({
      member,
      hasher,
      config,
      replicas: () => [this.options.coordinator, ...member.transport.peers()],
      departed: () => this.departed,
      memo: this.options.memo,
    });
    const pendingSync = this.pendingSync;
    for (const f of stateFrom ? fragments : []) pendingSync.add(f.index);
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
    // placed before its replica existed: the replica follows that stage from now on
    const stage = this.trainer?.pipelineStage ?? null;
    if (stage !== null) this.followStage(config, stage);
    // Error feedback is kept for the run's codec (every round's, as the coordinator opens them).
    const runCodec = createCodec(config.diloco.codec, { blockSize: config.diloco.codecBlockSize });
    const feedback = config.diloco.errorFeedback ? fragments.map((f) => new ErrorFeedback(runCodec, f.size)) : [];
    this.rounds = new WorkerRounds({
      member,
      config,
      fragments,
      replica: this.replica,
      counters: this.metrics,
      feedback,
    });
    for (const f of welcomed) this.replica.trust(f.fragment, f.hash, f.round);
    if (stateFrom) {
      this.lateJoiner = true;
      this.replica.fetch(stateFrom, [...pendingSync]);
    } else {
      // with the room from its start: fragment p's first round is due at H + ⌊p·H/P⌋ steps
      const { innerSteps: H, fragments: P } = config.diloco;
      this.rounds.arm(fragments.map((f) => Math.floor((f.index * H) / P)));
      await synced();
    }
  }

  /** A pipeline-parallel room's engine: the stage of its group the coordinator places it in. */
  private meshStage(config: RunConfig, params: Float32Array): MeshStageTrainer {
    const { createStage } = this.options;
    return new MeshStageTrainer(
      {
        member: this.options.member,
        config,
        coordinator: this.options.coordinator,
        roster: this.roster,
        onStage: (stage) => this.followStage(config, stage),
        globalParams: () => {
          const layout = buildLayout(config.model);
          const out = new Float32Array(layout.size);
          return this.replica ? this.replica.state.params(out) : initParameters(layout, config.train.seed);
        },
        createStage: (spec, local, o) =>
          createStage
            ? createStage(config, spec, local, o)
            : Promise.resolve(new CpuStageTrainer(config.train, spec, local, config.model, o)),
      },
      params,
    );
  }

  /**
   * A pipeline stage's replica follows its stage's fragments only: the others' θ_global and m are
   * released (8 bytes a parameter), and a stage it moves to has its fragments fetched again.
   */
  private followStage(config: RunConfig, stage: number): void {
    const replica = this.replica;
    if (!replica || !config.pipeline) return;
    const { model, diloco, pipeline } = config;
    const stages = fragmentStages(model, diloco.fragments, diloco.fragmentMode, pipeline.stages);
    const own = new Set(stages.flatMap((s, p) => (s === stage ? [p] : [])));
    for (const p of replica.state.follow(own)) replica.resync(p);
  }

  /** How the worker follows its replica: merges, aborts, resyncs. */
  private replicaEvents(pendingSync: Set<number>, synced: () => Promise<void>): ReplicaEvents {
    return {
      opened: (open) => this.duties?.noteOpened(open.fragment, open.round),
      committed: (p, round) => {
        this.duties?.endRound(p, round);
        this.rounds?.committed(p, round);
      },
      aborted: (p, round) => {
        this.duties?.endRound(p, round);
        this.rounds?.aborted(p, round);
      },
      diverged: (p) => {
        this.rounds?.diverged(p);
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
    const self = open.participants.indexOf(this.options.member.self);
    if (self < 0) {
      this.rounds?.excuse(open.fragment); // left out of it (benched, unreachable): nothing to wait for
      return;
    }
    const codec = roundCodec(open);
    // A shard it owns is aggregated whatever this replica holds (aggregation needs no θ_global):
    // a named owner that stayed away would leave every replica without that shard's result.
    this.duties?.takeNamed(open, codec);
    if (!this.synced) return; // fetching θ_global: it contributes from its next round
    if (this.lateJoiner && this.config) {
      // A late joiner continues the room's learning-rate schedule: the room's tokens per participant.
      const perStep = this.config.train.batchSize * this.config.train.seqLen * open.participants.length;
      this.scheduleOffset = Math.max(0, Math.round(open.roomTokens / perStep) - this.metrics.innerStep);
      this.lateJoiner = false;
    }
    this.rounds?.open(open, codec, this.slacksFrom(open, self));
  }

  /** The step-boundary work of its rounds: merges and due contributions. */
  private async atBoundary(): Promise<void> {
    if (this.trainer && this.rounds) await this.rounds.atBoundary(this.trainer);
  }
}
