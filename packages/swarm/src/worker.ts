/**
 * A training worker: the inner AdamW loop on its engine (inner-loop.ts), its membership of the
 * room (hello, welcome, heartbeats, a host that goes away and comes back), and its parts in every
 * round it is named in (docs/design.md, "The algorithm", "Rounds…", "The collective"):
 * - as a contributor it sends its Δ and merges committed rounds (worker-rounds.ts);
 * - as a shard owner or checker it collects, aggregates and sends the result (shard-duty.ts);
 * - as a replica it applies the outer step tentatively, reports the hash and adopts on commit
 *   (replica-node.ts).
 * Each round's codec is built once, at its open, and serves all three.
 * Inner steps never wait for the network, except that a fragment's next contribution first
 * merges its previous round (at most one round in flight per fragment).
 */
import { buildFragments, createFragmentHasher } from '@shoal/diloco';
import { buildLayout, initParameters, type StepQueueStats, type Trainer } from '@shoal/model';
import {
  type FragmentState,
  MAX_REJECTION_REASONS,
  type PeerId,
  type RosterMessage,
  type RoundOpenMessage,
  type RunConfig,
} from '@shoal/protocol';
import { InnerLoop } from './inner-loop.ts';
import { ReplicaState } from './replica.ts';
import { type ReplicaEvents, ReplicaNode } from './replica-node.ts';
import { roundCodec } from './round-codec.ts';
import { roundSlack } from './round-patience.ts';
import { ShardDuties } from './shard-duty.ts';
import type { WorkerMetrics, WorkerOptions } from './worker-options.ts';
import { heartbeatOf, helloOf } from './worker-reports.ts';
import { WorkerRounds } from './worker-rounds.ts';
import { followStage, meshStageFor } from './worker-stage.ts';

export type { WorkerMetrics, WorkerOptions } from './worker-options.ts';

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
  /** Its inner loop: steps on its engine, and the round work between them. */
  private readonly loop: InnerLoop;
  /** Its rounds as a contributor (created with the run's config). */
  private rounds: WorkerRounds | null = null;
  /** Peers that said leave (until they come up again): not waited for as participants. */
  private readonly departed = new Set<PeerId>();
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
    this.loop = new InnerLoop({
      options,
      metrics: this.metrics,
      training: () => {
        const { trainer, config, rounds } = this;
        return this.synced && trainer && config && rounds ? { trainer, config, rounds } : null;
      },
      stopped: () => this.stopped,
      paused: () => this.paused,
      awaitsRounds: () => this.awaitsRounds(),
      lastHeartbeat: () => this.lastHeartbeat,
      heartbeat: () => this.heartbeat(),
      atBoundary: () => this.atBoundary(),
    });
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
    const { member, coordinator, capabilities } = this.options;
    await member.send(coordinator, helloOf(capabilities, this.replica, this.metrics.innerStep));
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
    this.loop.joinedLate(); // re-read the room's schedule position at the next round
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
  run(until: () => boolean = () => false): Promise<void> {
    return this.loop.run(until);
  }

  /** How busy the engine's step queue has been since its first queued step (a WebGPU engine's only). */
  get queue(): StepQueueStats | null {
    return this.trainer?.queue?.stats() ?? null;
  }

  /** Whether this worker takes part in rounds now, so that it waits for an overdue one. */
  private awaitsRounds(): boolean {
    return this.synced && !this.coordinatorLost && !this.paused && this.pendingSync.size === 0;
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
    const { config, rounds, duties, metrics, rejectedContributions } = this;
    const data = this.options.dataPositions?.();
    void member.send(
      this.options.coordinator,
      heartbeatOf({ member, metrics, config, rounds, duties, rejectedContributions, data }),
    );
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
      this.trainer = meshStageFor(this.options, config, init, this.roster, () => this.replica);
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
    if (stage !== null) followStage(this.replica, config, stage);
    this.rounds = new WorkerRounds({ member, config, fragments, replica: this.replica, counters: this.metrics });
    for (const f of welcomed) this.replica.trust(f.fragment, f.hash, f.round);
    if (stateFrom) {
      this.loop.joinedLate();
      this.replica.fetch(stateFrom, [...pendingSync]);
    } else {
      // with the room from its start: fragment p's first round is due at H + ⌊p·H/P⌋ steps
      const { innerSteps: H, fragments: P } = config.diloco;
      this.rounds.arm(fragments.map((f) => Math.floor((f.index * H) / P)));
      await synced();
    }
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
    const { config, rounds } = this;
    if (!config || !rounds) return;
    this.loop.placeInSchedule(open, config);
    rounds.open(open, codec, roundSlack(open, self, config.diloco));
  }

  /** The step-boundary work of its rounds: merges and due contributions. */
  private async atBoundary(): Promise<void> {
    if (this.trainer && this.rounds) await this.rounds.atBoundary(this.trainer);
  }
}
