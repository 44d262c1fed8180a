/**
 * A worker's engine in a pipeline-parallel room: one stage of its replica group, as a Trainer,
 * so the worker's rounds, merges and heartbeats run unchanged (docs/pipeline.md). Its step is the
 * group's step: micro-batches' activations come from the previous stage and go to the next, their
 * gradients come back, in the run's schedule (1F1B or GPipe); then the first and last stages swap
 * their tied wte gradients, every stage sends the others its Σg², and each applies AdamW with the
 * same clip factor. Parameters cross the Trainer boundary in the global layout: the stage's own
 * range is real, the rest zeros (rounds only ever read and write the stage's fragments).
 *
 * Whatever a group member sends is checked like any stranger's message before anything of it is
 * kept (pipe-checks.ts): the sender must hold the slot the message comes from, in this group's
 * current version; sizes must match the run's shapes; values must be finite and targets tokens;
 * and one peer never has more bytes of a kind waiting here than two steps of it.
 * A message that fails is refused, counted and answered with a `rejected`; bad values from the
 * expected neighbour also end the step in progress with PipelineInterrupted (nothing is applied:
 * AdamW runs only once every stage's norm is in).
 *
 * A message of a newer version of the group than the roster has shown this stage is held until
 * the roster comes, under the same checks as far as they can be made before it: only activations
 * and the wte (an honest group sends nothing else before every stage has the new roster), from the
 * member that holds the sending stage now (or anyone, where that slot is empty), a version at most
 * VERSION_WINDOW past the newest the roster shows, one step of each kind per peer, of that peer's
 * newest version only. Each new roster checks what is held again, from the start.
 *
 * The group's step numbers come from its first stage; the others adopt them from the first
 * micro-batch's activations. Traffic of an older step or an older version of the group is
 * dropped. The first stage sends the last the wte it holds at the start of every step where it
 * may have changed (a merge, a new member, an interrupted step), or an empty wte message saying
 * it did not, so the copies never drift.
 */
import {
  type Batch,
  buildLayout,
  buildStageLayout,
  gatherStage,
  microBatchOf,
  type OptimizerState,
  type ParamLayout,
  type PipelineSchedule,
  pipelineGradScale,
  type StageLayout,
  type StageSpec,
  type StageTrainer,
  scatterStage,
  scheduleOrder,
  splitStages,
  type TrainConfig,
  type Trainer,
  tiedGradSum,
  tiedValues,
} from '@shoal/model';
import type { PeerId, PipelineConfig, PipelineSlot, PipeMessage, RosterMessage, RunConfig } from '@shoal/protocol';
import type { Member } from '../member.ts';
import {
  budgetBytes,
  type PipeProblem,
  sendersOf,
  shapeProblem,
  VERSION_WINDOW,
  valuesProblem,
} from './pipe-checks.ts';
import { bytesPerValue, readValues, writeValues } from './wire-values.ts';

/** The group changed or a stage stopped answering: the step was abandoned, nothing applied. */
export class PipelineInterrupted extends Error {
  override name = 'PipelineInterrupted';
}

/** What a stage uses of its worker's Member. */
export type StageMember = Pick<Member, 'self' | 'clock' | 'on' | 'onPeerDown' | 'send' | 'refuse' | 'rejectBack'>;

export interface MeshStageOptions {
  member: StageMember;
  config: RunConfig;
  coordinator: PeerId;
  /** Builds the stage's engine (CPU or WebGPU) once the coordinator has placed this worker. */
  createStage(spec: StageSpec, params: Float32Array, o: { microBatch: number; slots: number }): Promise<StageTrainer>;
  /** How long a stage waits for a group member's message before giving the step up, ms. */
  timeoutMs?: number;
  /** The coordinator's latest roster, if one came before this stage was built. */
  roster?: RosterMessage | null;
  /**
   * θ_global now (the worker's replica), for a stage the coordinator moves this worker to: its
   * θ_local there starts from the room's, as a newcomer's would.
   */
  globalParams?: () => Float32Array;
  /** The coordinator placed this worker in `stage` (first, or another than before). */
  onStage?: (stage: number) => void;
}

/** Counts of the group's traffic, for the heartbeat's and the bench's figures. */
export interface PipeCounters {
  steps: number;
  interrupted: number;
  /** Messages refused (wrong sender, size, version, values, over the peer's budget). */
  refused: number;
  /** Messages dropped as stale: of an older step or version, or of a version that went elsewhere. */
  stale: number;
  activationBytesSent: number;
  /** Time this stage waited for its neighbours during steps, ms (the bubble, plus the links). */
  waitedMs: number;
  busyMs: number;
}

type Kind = PipeMessage['what'];

/** A message kept for a later step, and who sent it (its bytes count against that peer). */
interface Held {
  from: PeerId;
  message: PipeMessage;
}

interface Waiter {
  accept(message: PipeMessage): boolean;
  resolve(message: PipeMessage): void;
  reject(error: Error): void;
}

const DEFAULT_TIMEOUT_MS = 60_000;

export class MeshStageTrainer implements Trainer {
  readonly backend: 'cpu' | 'webgpu' = 'cpu';
  readonly layout: ParamLayout;
  readonly train: TrainConfig;
  /** Its step waits on the network: the worker must not hold a simulated clock still over it. */
  readonly distributed = true;
  readonly counters: PipeCounters = {
    steps: 0,
    interrupted: 0,
    refused: 0,
    stale: 0,
    activationBytesSent: 0,
    waitedMs: 0,
    busyMs: 0,
  };
  private readonly pipeline: PipelineConfig;
  private readonly specs: StageSpec[];
  private slot: PipelineSlot | null = null;
  /** Who holds each stage of this worker's group (from the roster), for its current version. */
  private peers: (PeerId | null)[] = [];
  private rosterEpoch = -1;
  /** The stage it was last placed in (its replica follows that stage's fragments). */
  private stageChosen: number | null = null;
  /** Why the coordinator has not placed it (the roster's reason), or ''. */
  private unplaced = '';
  private stage: StageTrainer | null = null;
  private stageLayout: StageLayout | null = null;
  private starting: Promise<void> | null = null;
  /** Parameters before the stage exists (the global layout). */
  private pending: Float32Array;
  /** The first stage: its wte may differ from the last stage's copy. */
  private wteDirty = true;
  /** The first stage's step numbers (never reused); the others' current step. */
  private stepNumber = 0;
  /** A later stage: the last step it completed (it adopts no older one). */
  private lastStep = -1;
  private readonly queues = new Map<string, Held[]>();
  /** Messages of a newer version of the group than the roster has shown this worker yet. */
  private future: Held[] = [];
  /** The newest group version the latest roster shows (versions grow across the room's groups). */
  private newestVersion = -1;
  /** Messages whose values were checked (a held one is not scanned again on every roster). */
  private readonly valuesChecked = new WeakSet<PipeMessage>();
  /** Bad values from the expected neighbour while no step waited on it: the next take ends the step. */
  private spoiled: string | null = null;
  private waiter: { key: string; waiter: Waiter } | null = null;
  private readonly timeoutMs: number;
  private readonly offs: (() => void)[] = [];
  private destroyed = false;
  /** The worker stopped: no step waits on the group any more. */
  private stopped = false;
  /** Its stage's engine could not be built (the worker stops with it). */
  private failure: Error | null = null;
  /** The group's version when the step in progress started. */
  private stepVersion = -1;

  constructor(
    private readonly options: MeshStageOptions,
    params: Float32Array,
  ) {
    const { config, member } = options;
    if (!config.pipeline) throw new Error('a mesh stage needs a run with a pipeline');
    this.pipeline = config.pipeline;
    this.train = config.train;
    this.layout = buildLayout(config.model);
    this.specs = splitStages(config.model.nLayer, this.pipeline.stages);
    this.pending = params.slice();
    this.timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.offs.push(
      member.on('roster', (from, roster) => {
        if (from === options.coordinator) this.onRoster(roster);
      }),
      member.on('pipe', (from, message) => this.onPipe(from, message)),
    );
    member.onPeerDown((peer) => {
      if (this.peers.includes(peer)) this.interrupt(`stage ${this.peers.indexOf(peer)} (${peer}) went down`);
    });
    if (options.roster) this.onRoster(options.roster);
  }

  /** Its place: group, stage, version; null until the coordinator has placed it. */
  get place(): PipelineSlot | null {
    return this.slot;
  }

  /** The stage it is placed in, or null until the coordinator has placed it. */
  get pipelineStage(): number | null {
    return this.slot?.stage ?? null;
  }

  /** Payload bytes of the group's messages it holds for later steps (queued or of a newer version). */
  get heldBytes(): number {
    let bytes = 0;
    for (const queue of this.queues.values()) for (const { message } of queue) bytes += message.payload.byteLength;
    for (const { message } of this.future) bytes += message.payload.byteLength;
    return bytes;
  }

  /** Payload bytes it holds that `peer` sent. */
  heldBytesFrom(peer: PeerId): number {
    let bytes = 0;
    for (const queue of this.queues.values()) {
      for (const held of queue) if (held.from === peer) bytes += held.message.payload.byteLength;
    }
    for (const held of this.future) if (held.from === peer) bytes += held.message.payload.byteLength;
    return bytes;
  }

  /** Why it cannot step now (no place yet, its group incomplete, its engine starting), or null. */
  get waiting(): string | null {
    if (this.failure) return null; // the next step throws it
    if (!this.slot) return this.unplaced || 'waiting for the coordinator to place it in a group';
    const missing = this.peers.flatMap((p, s) => (p === null ? [s] : []));
    if (missing.length > 0) return `waiting for stage ${missing.join(', ')} of group ${this.slot.group}`;
    if (!this.stage) return 'starting its stage';
    return null;
  }

  private onRoster(roster: RosterMessage): void {
    if (roster.epoch <= this.rosterEpoch) return;
    this.rosterEpoch = roster.epoch;
    const self = this.options.member.self;
    const me = roster.members.find((m) => m.peer === self);
    const mine = me?.pipeline ?? null;
    this.unplaced = me && !mine ? me.reason : '';
    const peers: (PeerId | null)[] = new Array(this.pipeline.stages).fill(null);
    this.newestVersion = Math.max(this.newestVersion, ...roster.members.map((m) => m.pipeline?.version ?? -1));
    if (mine) {
      for (const m of roster.members) {
        if (m.pipeline?.group === mine.group && m.pipeline.version === mine.version) peers[m.pipeline.stage] = m.peer;
      }
    }
    const changed = mine?.group !== this.slot?.group || mine?.version !== this.slot?.version;
    // (against the engine's stage: a worker dropped and placed again passes through no place at all)
    if (mine && this.stageLayout && mine.stage !== this.stageLayout.stage.index) {
      // a new stage (placed again after a link failure or a host restart): its engine is built
      // again, from θ_global, since θ_local of the old stage says nothing of the new one's blocks
      this.interrupt('this worker moved to another stage');
      if (this.options.globalParams) this.pending = this.options.globalParams();
      this.stage?.destroy();
      this.stage = null;
      this.stageLayout = null;
    }
    const newStage = mine !== null && mine.stage !== this.stageChosen;
    if (newStage) this.stageChosen = mine.stage;
    this.slot = mine;
    this.peers = peers;
    if (changed) {
      this.interrupt(mine ? `group ${mine.group} is now version ${mine.version}` : 'this worker lost its place');
      this.wteDirty = true;
      // a new formation numbers its steps afresh (its first stage may be new): versions keep the
      // old traffic out, so any step of the new version is the next one
      this.lastStep = -1;
      this.spoiled = null;
      // traffic of the group as it was is dropped; a newer version's waits for its turn
      for (const [key, queue] of this.queues) {
        this.queues.set(
          key,
          queue.filter(({ message: m }) => mine && m.group === mine.group && m.version >= mine.version),
        );
      }
    }
    this.ensureStage();
    if (newStage && mine) this.options.onStage?.(mine.stage);
    // what was held for a newer version is checked again, against this roster, from the start
    const future = this.future;
    this.future = [];
    for (const { from, message } of future) this.onPipe(from, message);
  }

  /** Builds the engine of the stage it is placed in, when it has none (or one of another stage). */
  private ensureStage(): void {
    if (!this.slot || this.stage || this.starting || this.failure) return;
    const index = this.slot.stage;
    this.starting = this.startStage(index).catch((error: unknown) => {
      this.failure = new Error(`could not build stage ${index}'s engine: ${(error as Error).message}`);
    });
  }

  private async startStage(index: number): Promise<void> {
    let restart = false;
    try {
      const spec = this.specs[index] as StageSpec;
      const layout = buildStageLayout(this.options.config.model, spec);
      const S = this.pipeline.stages;
      const M = this.pipeline.micros;
      const slots = this.pipeline.schedule === 'gpipe' ? M : Math.min(S - index, M);
      const microBatch = this.train.batchSize / M;
      const stage = await this.options.createStage(spec, gatherStage(layout, this.pending), { microBatch, slots });
      if (this.destroyed || this.slot?.stage !== index) {
        stage.destroy();
        restart = !this.destroyed; // moved again while this one was being built
        return;
      }
      // parameters set while the engine was being built (a sync) replace the ones it started from
      await stage.setParams(gatherStage(layout, this.pending));
      this.stage = stage;
      this.stageLayout = layout;
    } finally {
      this.starting = null;
      if (restart) this.ensureStage();
    }
  }

  private key(kind: Kind, from: number): string {
    return `${kind}:${from}`;
  }

  /** Checks a group member's message; queues it for the step that takes it, or refuses it. */
  private onPipe(from: PeerId, message: PipeMessage): void {
    const refuse = ({ reason, detail }: PipeProblem) => {
      this.counters.refused++;
      this.options.member.rejectBack(from, 'pipe', reason, detail);
    };
    const slot = this.slot;
    if (!slot || message.group !== slot.group) {
      refuse({ reason: 'not-participant', detail: `${from} is not in this worker's group` });
      return;
    }
    // of the group as it was, or of a version the roster shows went to another group (or was
    // passed over: versions are handed out in order, so the roster came after it)
    if (message.version < slot.version || (message.version > slot.version && message.version <= this.newestVersion)) {
      this.counters.stale++;
      return;
    }
    const future = message.version > slot.version;
    const sender = future ? this.futureSender(from, message) : this.currentSender(from, message);
    if (typeof sender !== 'number') {
      refuse(sender);
      return;
    }
    const problem = shapeProblem(this.options.config, message) ?? this.checkValues(message);
    if (problem) {
      refuse(problem);
      // the neighbour the step needs sent garbage: the step cannot go on (nothing is applied)
      if (!future && problem.reason !== 'size') this.spoil(`stage ${sender}: ${problem.detail}`);
      return;
    }
    const key = this.key(message.what, sender);
    const waiting = this.waiter;
    if (!future && waiting && waiting.key === key && waiting.waiter.accept(message)) {
      this.waiter = null;
      waiting.waiter.resolve(message);
      return;
    }
    const over = future ? this.keepFuture(from, message) : this.budgetProblem(from, message, key);
    if (over) {
      refuse(over);
      return;
    }
    if (future) {
      this.future.push({ from, message });
      return;
    }
    const queue = this.queues.get(key) ?? [];
    queue.push({ from, message });
    this.queues.set(key, queue);
  }

  /** In the group's current version: the stage `from` holds, when it sends this stage `message`'s kind. */
  private currentSender(from: PeerId, message: PipeMessage): number | PipeProblem {
    const s = (this.slot as PipelineSlot).stage;
    const sender = this.peers.indexOf(from);
    if (sender < 0) return { reason: 'not-participant', detail: `${from} holds no stage of this group` };
    if (!sendersOf(message.what, s, this.pipeline.stages).includes(sender)) {
      return { reason: 'not-participant', detail: `stage ${sender} does not send ${message.what} to stage ${s}` };
    }
    return sender;
  }

  /**
   * In a newer version than the roster has shown (its roster is on the way): the stage an act or
   * wte comes from, when `from` holds it now or it is empty; any other kind comes only from a
   * stage that has taken this one's part in that version, which needs this stage to know it.
   */
  private futureSender(from: PeerId, message: PipeMessage): number | PipeProblem {
    const s = (this.slot as PipelineSlot).stage;
    const { version, what } = message;
    if (version > this.newestVersion + VERSION_WINDOW) {
      return {
        reason: 'version',
        detail: `version ${version} is more than ${VERSION_WINDOW} past the newest this worker knows (${this.newestVersion})`,
      };
    }
    const senders = what === 'act' || what === 'wte' ? sendersOf(what, s, this.pipeline.stages) : [];
    const sender = senders[0];
    if (sender === undefined) {
      return { reason: 'version', detail: `${what} of version ${version}, which this worker has no roster for` };
    }
    const holder = this.peers[sender] ?? null;
    if (holder !== null && holder !== from) {
      return {
        reason: 'not-participant',
        detail: `${from} does not hold stage ${sender} of this group (${holder} does)`,
      };
    }
    return sender;
  }

  private checkValues(message: PipeMessage): PipeProblem | null {
    if (this.valuesChecked.has(message)) return null;
    const problem = valuesProblem(this.options.config, message);
    if (!problem) this.valuesChecked.add(message);
    return problem;
  }

  /**
   * Whether keeping `message` would take its queue (one kind from one stage: one peer) past two
   * steps of that kind (budgetBytes), or past two steps of messages: an honest neighbour is at
   * most a step ahead, so a flood is refused, not kept.
   */
  private budgetProblem(from: PeerId, message: PipeMessage, key: string): PipeProblem | null {
    const queue = this.queues.get(key) ?? [];
    const budget = budgetBytes(this.options.config, message.what);
    const held = queue.reduce((sum, h) => sum + h.message.payload.byteLength, 0);
    if (held + message.payload.byteLength > budget) {
      return {
        reason: 'quota',
        detail: `${from} has ${held} bytes of ${message.what} waiting here; its budget is ${budget}`,
      };
    }
    if (queue.length >= 2 * this.pipeline.micros + 4) {
      return { reason: 'quota', detail: `more than a step of ${message.what} queued` };
    }
    return null;
  }

  /**
   * Before keeping a newer version's message: what the peer sent of older versions is dropped
   * (it has moved on, so no step can take them: its queued messages of the current version too),
   * a message older than what it holds is refused, and it keeps at most one step's bytes of a
   * version this stage does not know yet. So a peer never has more than its budget here.
   */
  private keepFuture(from: PeerId, message: PipeMessage): PipeProblem | null {
    const theirs = this.future.filter((h) => h.from === from);
    if (theirs.some((h) => h.message.version > message.version)) {
      return { reason: 'version', detail: `version ${message.version} after ${from}'s newer ones` };
    }
    const same = theirs.filter((h) => h.message.version === message.version && h.message.what === message.what);
    const step = budgetBytes(this.options.config, message.what) / 2;
    const held = same.reduce((sum, h) => sum + h.message.payload.byteLength, 0);
    if (held + message.payload.byteLength > step || same.length >= 2 * this.pipeline.micros + 4) {
      return {
        reason: 'quota',
        detail: `${from} has ${held} bytes of ${message.what} waiting for version ${message.version}; one step is ${step}`,
      };
    }
    const before = this.future.length;
    this.future = this.future.filter((h) => h.from !== from || h.message.version === message.version);
    this.counters.stale += before - this.future.length;
    for (const [key, queue] of this.queues) {
      const kept = queue.filter((h) => h.from !== from);
      this.counters.stale += queue.length - kept.length;
      this.queues.set(key, kept);
    }
    return null;
  }

  /** Ends the step waiting on the group now, or else the next one to take a message. */
  private spoil(why: string): void {
    if (this.waiter) this.interrupt(why);
    else this.spoiled = why;
  }

  /** Stops for good: the step in progress ends, and no other starts. */
  stop(): void {
    this.stopped = true;
    this.interrupt('the worker stopped');
  }

  /** Ends the step in progress, if any (a changed group, a neighbour gone). */
  private interrupt(why: string): void {
    const waiting = this.waiter;
    this.waiter = null;
    waiting?.waiter.reject(new PipelineInterrupted(why));
  }

  /**
   * The next message of `kind` from stage `from` that `accept` takes. Messages of an older step
   * are dropped; one of a newer step means the group went on without this stage (interrupted).
   */
  private take(kind: Kind, from: number, step: number | null, micro: number): Promise<PipeMessage> {
    if (this.stopped) return Promise.reject(new PipelineInterrupted('the worker stopped'));
    if (this.slot?.version !== this.stepVersion) {
      return Promise.reject(new PipelineInterrupted(`the group changed during step ${step}`));
    }
    if (this.spoiled) {
      const why = this.spoiled;
      this.spoiled = null;
      return Promise.reject(new PipelineInterrupted(why));
    }
    const key = this.key(kind, from);
    const queue = this.queues.get(key) ?? [];
    this.queues.set(key, queue);
    // with no step yet (a later stage's first activations), the next step after its last
    const matches = (m: PipeMessage) => (step === null ? m.step > this.lastStep : m.step === step) && m.micro === micro;
    const version = this.slot?.version;
    while (queue.length > 0) {
      const head = (queue[0] as Held).message;
      if (head.version !== version) break; // a newer version's, for later
      if (matches(head)) return Promise.resolve((queue.shift() as Held).message);
      if (step !== null && head.step > step) {
        return Promise.reject(new PipelineInterrupted(`stage ${from} is on step ${head.step}, this one on ${step}`));
      }
      queue.shift();
      this.counters.stale++;
    }
    const { clock } = this.options.member;
    return new Promise<PipeMessage>((resolve, reject) => {
      const cancel = clock.setTimer(this.timeoutMs, () => {
        if (this.waiter?.key !== key) return;
        this.waiter = null;
        reject(new PipelineInterrupted(`stage ${from} sent no ${kind} for ${this.timeoutMs / 1000} s`));
      });
      this.waiter = {
        key,
        waiter: {
          accept: (m) => {
            if (m.version !== this.slot?.version) return false;
            if (matches(m)) return true;
            this.counters.stale++;
            return false;
          },
          resolve: (m) => {
            cancel();
            resolve(m);
          },
          reject: (error) => {
            cancel();
            reject(error);
          },
        },
      };
    });
  }

  private send(stage: number, body: Omit<PipeMessage, 'kind' | 'group' | 'version'>): void {
    const peer = this.peers[stage];
    const slot = this.slot;
    if (!peer || !slot) throw new PipelineInterrupted(`stage ${stage} of the group is empty`);
    const message = { kind: 'pipe', group: slot.group, version: slot.version, ...body } as PipeMessage;
    if (body.what === 'act' || body.what === 'grad') this.counters.activationBytesSent += message.payload.length;
    this.options.member.send(peer, message).catch(() => this.interrupt(`sending to stage ${stage} failed`));
  }

  private sendValues(
    stage: number,
    what: Kind,
    step: number,
    micro: number,
    values: Float32Array,
    dtype: 'f32' | 'bf16',
    targets: Int32Array | null = null,
  ): void {
    const n = targets?.length ?? 0;
    const payload = new Uint8Array(values.length * bytesPerValue(dtype) + 4 * n);
    const end = writeValues(values, dtype, payload, 0);
    if (targets) payload.set(new Uint8Array(targets.buffer, targets.byteOffset, targets.byteLength), end);
    this.send(stage, { what, step, micro, dtype, values: values.length, targets: n, payload });
  }

  /** Its values and targets (onPipe checked them: finite, tokens). */
  private decode(message: PipeMessage): { values: Float32Array; targets: Int32Array | null } {
    const values = readValues(message.payload, 0, message.values, message.dtype);
    if (message.targets === 0) return { values, targets: null };
    const start = message.values * bytesPerValue(message.dtype);
    const targets = new Int32Array(message.payload.slice(start, start + 4 * message.targets).buffer);
    return { values, targets };
  }

  /** Runs the stage's work, timed as busy (and held on a simulated clock). */
  private async busy<T>(work: () => Promise<T>): Promise<T> {
    const { clock } = this.options.member;
    const started = clock.now();
    const result = await clock.track(work());
    this.counters.busyMs += clock.now() - started;
    return result;
  }

  private async waited<T>(message: Promise<T>): Promise<T> {
    const { clock } = this.options.member;
    const started = clock.now();
    try {
      return await message;
    } finally {
      this.counters.waitedMs += clock.now() - started;
    }
  }

  async step(batch: Batch, lr: number): Promise<number> {
    if (this.failure) throw this.failure;
    const stage = this.stage;
    const slot = this.slot;
    const why = this.waiting;
    if (why || !stage || !slot || this.stageLayout?.stage.index !== slot.stage) {
      throw new PipelineInterrupted(why ?? 'its stage is being built');
    }
    try {
      const { loss, step } = await this.groupStep(stage, slot, this.stageLayout, batch, lr);
      this.counters.steps++;
      this.lastStep = step;
      return loss;
    } catch (error) {
      if (!(error instanceof PipelineInterrupted)) throw error;
      this.counters.interrupted++;
      this.wteDirty = true;
      throw error;
    }
  }

  private async groupStep(
    stage: StageTrainer,
    slot: PipelineSlot,
    layout: StageLayout,
    batch: Batch,
    lr: number,
  ): Promise<{ loss: number; step: number }> {
    const S = this.pipeline.stages;
    const M = this.pipeline.micros;
    const s = slot.stage;
    const dtype = this.pipeline.activations;
    this.stepVersion = slot.version;
    const slots = stage.slots;
    let step: number | null = s === 0 ? ++this.stepNumber : null;
    let loss = 0;
    let backwards = 0;
    const targets = new Map<number, Int32Array>();
    for (const op of scheduleOrder(this.pipeline.schedule as PipelineSchedule, S, M)[s] ?? []) {
      const m = op.micro;
      if (op.kind === 'F') {
        let input: Int32Array | Float32Array;
        let micro: Batch | null = null;
        if (s === 0) {
          micro = microBatchOf(batch, m, M);
          input = micro.inputs;
          if (m === 0) await this.sendWte(stage, layout, step as number);
        } else {
          const message = await this.waited(this.take('act', s - 1, step, m));
          step ??= message.step;
          const decoded = this.decode(message);
          input = decoded.values;
          targets.set(m, decoded.targets as Int32Array);
          if (s === S - 1 && m === 0) await this.receiveWte(stage, layout, step);
        }
        const y = micro ? micro.targets : (targets.get(m) as Int32Array);
        const out = await this.busy(() => stage.forward(m % slots, input, s === S - 1 ? y : null));
        if (typeof out === 'number') loss += out;
        else this.sendValues(s + 1, 'act', step as number, m, out, dtype, y);
      } else {
        const d = s === S - 1 ? null : this.decode(await this.waited(this.take('grad', s + 1, step, m))).values;
        const dInput = await this.busy(() => stage.backward(m % slots, d, backwards++ > 0));
        if (dInput) this.sendValues(s - 1, 'grad', step as number, m, dInput, dtype);
      }
    }
    const k = step as number;
    if (S > 1 && (s === 0 || s === S - 1)) {
      const other = s === 0 ? S - 1 : 0;
      const mine = (await this.busy(() => stage.tiedGrad())) as Float32Array;
      this.sendValues(other, 'tied', k, 0, mine, 'f32');
      const theirs = this.decode(await this.waited(this.take('tied', other, k, 0))).values;
      const sum = s === 0 ? tiedGradSum(mine, theirs) : tiedGradSum(theirs, mine);
      await this.busy(() => stage.setTiedGrad(sum));
    }
    const own = await this.busy(() => stage.gradSumSquares());
    const meanLoss = s === S - 1 ? loss / M : Number.NaN;
    for (let t = 0; t < S; t++) {
      if (t === s) continue;
      this.send(t, {
        what: 'norm',
        step: k,
        micro: 0,
        dtype: 'f32',
        values: 0,
        targets: 0,
        sumSquares: own,
        ...(Number.isFinite(meanLoss) ? { loss: meanLoss } : {}),
        payload: new Uint8Array(0),
      });
    }
    let total = 0;
    let groupLoss = meanLoss;
    for (let t = 0; t < S; t++) {
      if (t === s) {
        total += own;
        continue;
      }
      const norm = await this.waited(this.take('norm', t, k, 0));
      total += norm.sumSquares ?? 0;
      if (t === S - 1 && norm.loss !== undefined) groupLoss = norm.loss;
    }
    await this.busy(() => stage.update(lr, pipelineGradScale(total, M, this.train.gradClip)));
    return { loss: groupLoss, step: k };
  }

  /** The first stage, at a step's start: its wte to the last stage when it may have changed. */
  private async sendWte(stage: StageTrainer, layout: StageLayout, step: number): Promise<void> {
    const S = this.pipeline.stages;
    if (S < 2) return;
    const dirty = this.wteDirty;
    this.wteDirty = false;
    const empty = { what: 'wte' as const, step, micro: 0, dtype: 'f32' as const, targets: 0 };
    if (!dirty) {
      this.send(S - 1, { ...empty, values: 0, payload: new Uint8Array(0) });
      return;
    }
    const local = await this.busy(() => stage.getParams());
    this.sendValues(S - 1, 'wte', step, 0, tiedValues(layout, local) as Float32Array, 'f32');
  }

  /** The last stage, at a step's start: the first stage's wte into its copy, when it sent one. */
  private async receiveWte(stage: StageTrainer, layout: StageLayout, step: number): Promise<void> {
    const message = await this.waited(this.take('wte', 0, step, 0));
    if (message.values === 0) return;
    const wte = this.decode(message).values;
    await this.busy(async () => {
      const local = await stage.getParams();
      (tiedValues(layout, local) as Float32Array).set(wte);
      await stage.setParams(local);
    });
  }

  async evaluate(): Promise<number> {
    throw new Error('a pipeline stage cannot evaluate alone: the host evaluates θ_global');
  }

  async getParams(): Promise<Float32Array> {
    if (!this.stage || !this.stageLayout) return this.pending.slice();
    const global = new Float32Array(this.layout.size);
    scatterStage(this.stageLayout, await this.stage.getParams(), global);
    return global;
  }

  async setParams(params: Float32Array): Promise<void> {
    if (params.length !== this.layout.size) {
      throw new RangeError(`params have ${params.length} values, the model needs ${this.layout.size}`);
    }
    if (!this.stage || !this.stageLayout) {
      this.pending = params.slice();
      return;
    }
    const local = gatherStage(this.stageLayout, params);
    const tied = this.stageLayout.tiedCopy ? tiedValues(this.stageLayout, local) : null;
    // the last stage's wte copy is the first stage's to set (sendWte), not θ_global's
    if (tied) tied.set(tiedValues(this.stageLayout, await this.stage.getParams()) as Float32Array);
    await this.stage.setParams(local);
    this.wteDirty = true;
  }

  async getOptimizerState(): Promise<OptimizerState> {
    const m = new Float32Array(this.layout.size);
    const v = new Float32Array(this.layout.size);
    if (!this.stage || !this.stageLayout) return { m, v, step: 0 };
    const state = await this.stage.getOptimizerState();
    scatterStage(this.stageLayout, state.m, m);
    scatterStage(this.stageLayout, state.v, v);
    return { m, v, step: state.step };
  }

  async setOptimizerState(state: OptimizerState): Promise<void> {
    if (!this.stage || !this.stageLayout) return;
    const { m, v, step } = state;
    await this.stage.setOptimizerState({
      m: gatherStage(this.stageLayout, m),
      v: gatherStage(this.stageLayout, v),
      step,
    });
  }

  destroy(): void {
    this.destroyed = true;
    this.stop();
    for (const off of this.offs) off();
    this.stage?.destroy();
  }
}
