/**
 * A mesh stage's link to its replica group: where the roster places it and who holds the other
 * stages, the group members' pipe messages checked and queued for the step that takes them, and
 * what it sends them.
 *
 * Whatever a group member sends is checked like any stranger's message before anything of it is
 * kept (pipe-checks.ts): the sender must hold the slot the message comes from, in this group's
 * current version; sizes must match the run's shapes; values must be finite and targets tokens;
 * and one peer never has more bytes of a kind waiting here than two steps of it.
 * A message that fails is refused, counted and answered with a `rejected`; bad values from the
 * expected neighbour also end the step in progress with PipelineInterrupted.
 *
 * A message of a newer version of the group than the roster has shown this stage is held until
 * the roster comes, under the same checks as far as they can be made before it: only activations
 * and the wte (an honest group sends nothing else before every stage has the new roster), from the
 * member that holds the sending stage now (or anyone, where that slot is empty), a version at most
 * VERSION_WINDOW past the newest the roster shows, one step of each kind per peer, of that peer's
 * newest version only. Each new roster checks what is held again, from the start.
 *
 * Traffic of an older step or an older version of the group is dropped.
 */
import type { PeerId, PipelineSlot, PipeMessage, RosterMessage, RunConfig } from '@shoal/protocol';
import type { Member } from '../member.ts';
import {
  budgetBytes,
  currentSender,
  futureSender,
  type PipeProblem,
  queueProblem,
  shapeProblem,
  valuesProblem,
} from './pipe-checks.ts';
import { bytesPerValue, readValues, writeValues } from './wire-values.ts';

/** The group changed or a stage stopped answering: the step was abandoned, nothing applied. */
export class PipelineInterrupted extends Error {
  override name = 'PipelineInterrupted';
}

/** What a stage uses of its worker's Member. */
export type StageMember = Pick<Member, 'self' | 'clock' | 'on' | 'onPeerDown' | 'send' | 'refuse' | 'rejectBack'>;

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

export type PipeKind = PipeMessage['what'];

/** Where a roster places this worker: its slot (null: none) and who holds each stage of its group. */
export interface Placement {
  mine: PipelineSlot | null;
  peers: (PeerId | null)[];
}

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

export interface GroupLinkOptions {
  member: StageMember;
  config: RunConfig;
  /** How long a step waits for a group member's message before giving up, ms. */
  timeoutMs: number;
  counters: PipeCounters;
}

export class GroupLink {
  private readonly stages: number;
  private readonly micros: number;
  private slot: PipelineSlot | null = null;
  /** Who holds each stage of this worker's group (from the roster), for its current version. */
  private peers: (PeerId | null)[] = [];
  private rosterEpoch = -1;
  /** Why the coordinator has not placed it (the roster's reason), or ''. */
  private unplaced = '';
  /** A later stage: the last step it completed (it adopts no older one). */
  lastStep = -1;
  /** The group's version when the step in progress started. */
  private stepVersion = -1;
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
  /** The worker stopped: no step waits on the group any more. */
  private stopped = false;

  constructor(private readonly options: GroupLinkOptions) {
    const pipeline = options.config.pipeline;
    if (!pipeline) throw new Error('a mesh stage needs a run with a pipeline');
    this.stages = pipeline.stages;
    this.micros = pipeline.micros;
  }

  /** Its place: group, stage, version; null until the coordinator has placed it. */
  get place(): PipelineSlot | null {
    return this.slot;
  }

  /** Why its group cannot step now (no place yet, a stage of it empty), or null. */
  get waiting(): string | null {
    if (!this.slot) return this.unplaced || 'waiting for the coordinator to place it in a group';
    const missing = this.peers.flatMap((p, s) => (p === null ? [s] : []));
    if (missing.length > 0) return `waiting for stage ${missing.join(', ')} of group ${this.slot.group}`;
    return null;
  }

  /** Whether `peer` holds a stage of its group. */
  holds(peer: PeerId): boolean {
    return this.peers.includes(peer);
  }

  /** Its stage in the group `peer` holds, or -1. */
  stageOf(peer: PeerId): number {
    return this.peers.indexOf(peer);
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

  /**
   * Where a coordinator's roster newer than the last places this worker (null for an older one),
   * before it takes that place (moveTo).
   */
  read(roster: RosterMessage): Placement | null {
    if (roster.epoch <= this.rosterEpoch) return null;
    this.rosterEpoch = roster.epoch;
    const self = this.options.member.self;
    const me = roster.members.find((m) => m.peer === self);
    const mine = me?.pipeline ?? null;
    this.unplaced = me && !mine ? me.reason : '';
    const peers: (PeerId | null)[] = new Array(this.stages).fill(null);
    this.newestVersion = Math.max(this.newestVersion, ...roster.members.map((m) => m.pipeline?.version ?? -1));
    if (mine) {
      for (const m of roster.members) {
        if (m.pipeline?.group === mine.group && m.pipeline.version === mine.version) peers[m.pipeline.stage] = m.peer;
      }
    }
    return { mine, peers };
  }

  /**
   * Takes the place a roster gave it. In another group or version, the step in progress ends, its
   * step numbers start afresh and the group's traffic as it was is dropped. True when it changed.
   */
  moveTo({ mine, peers }: Placement): boolean {
    const changed = mine?.group !== this.slot?.group || mine?.version !== this.slot?.version;
    this.slot = mine;
    this.peers = peers;
    if (!changed) return false;
    this.interrupt(mine ? `group ${mine.group} is now version ${mine.version}` : 'this worker lost its place');
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
    return true;
  }

  /** What was held for a newer version, checked again against the latest roster, from the start. */
  recheckHeld(): void {
    const future = this.future;
    this.future = [];
    for (const { from, message } of future) this.onPipe(from, message);
  }

  private key(kind: PipeKind, from: number): string {
    return `${kind}:${from}`;
  }

  /** Checks a group member's message; queues it for the step that takes it, or refuses it. */
  onPipe(from: PeerId, message: PipeMessage): void {
    const refuse = ({ reason, detail }: PipeProblem) => {
      this.options.counters.refused++;
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
      this.options.counters.stale++;
      return;
    }
    const future = message.version > slot.version;
    const view = { slot, peers: this.peers, stages: this.stages, newestVersion: this.newestVersion };
    const sender = future ? futureSender(view, from, message) : currentSender(view, from, message);
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
    const queued = (this.queues.get(key) ?? []).map((h) => h.message);
    const over = future ? this.keepFuture(from, message) : queueProblem(this.options.config, from, message, queued);
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

  private checkValues(message: PipeMessage): PipeProblem | null {
    if (this.valuesChecked.has(message)) return null;
    const problem = valuesProblem(this.options.config, message);
    if (!problem) this.valuesChecked.add(message);
    return problem;
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
    if (held + message.payload.byteLength > step || same.length >= 2 * this.micros + 4) {
      return {
        reason: 'quota',
        detail: `${from} has ${held} bytes of ${message.what} waiting for version ${message.version}; one step is ${step}`,
      };
    }
    const before = this.future.length;
    this.future = this.future.filter((h) => h.from !== from || h.message.version === message.version);
    this.options.counters.stale += before - this.future.length;
    for (const [key, queue] of this.queues) {
      const kept = queue.filter((h) => h.from !== from);
      this.options.counters.stale += queue.length - kept.length;
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
  interrupt(why: string): void {
    const waiting = this.waiter;
    this.waiter = null;
    waiting?.waiter.reject(new PipelineInterrupted(why));
  }

  /** A step starts in the group's current version: a message of another ends it. */
  beginStep(version: number): void {
    this.stepVersion = version;
  }

  /**
   * The next message of `kind` from stage `from` that `accept` takes. Messages of an older step
   * are dropped; one of a newer step means the group went on without this stage (interrupted).
   */
  take(kind: PipeKind, from: number, step: number | null, micro: number): Promise<PipeMessage> {
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
      this.options.counters.stale++;
    }
    return this.wait(key, kind, from, matches);
  }

  /** Waits for the message `matches` takes under `key`, until the timeout. */
  private wait(key: string, kind: PipeKind, from: number, matches: (m: PipeMessage) => boolean): Promise<PipeMessage> {
    const { clock } = this.options.member;
    const { timeoutMs } = this.options;
    return new Promise<PipeMessage>((resolve, reject) => {
      const cancel = clock.setTimer(timeoutMs, () => {
        if (this.waiter?.key !== key) return;
        this.waiter = null;
        reject(new PipelineInterrupted(`stage ${from} sent no ${kind} for ${timeoutMs / 1000} s`));
      });
      this.waiter = {
        key,
        waiter: {
          accept: (m) => {
            if (m.version !== this.slot?.version) return false;
            if (matches(m)) return true;
            this.options.counters.stale++;
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

  /** Sends stage `stage` of its group a message of its current version. */
  send(stage: number, body: Omit<PipeMessage, 'kind' | 'group' | 'version'>): void {
    const peer = this.peers[stage];
    const slot = this.slot;
    if (!peer || !slot) throw new PipelineInterrupted(`stage ${stage} of the group is empty`);
    const message = { kind: 'pipe', group: slot.group, version: slot.version, ...body } as PipeMessage;
    if (body.what === 'act' || body.what === 'grad')
      this.options.counters.activationBytesSent += message.payload.length;
    this.options.member.send(peer, message).catch(() => this.interrupt(`sending to stage ${stage} failed`));
  }

  /** Sends `values` (and an act's `targets`) to stage `stage`, encoded as `dtype`. */
  sendValues(
    stage: number,
    what: PipeKind,
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
}

/** A pipe message's values and targets (onPipe checked them: finite, tokens). */
export function decodePipe(message: PipeMessage): { values: Float32Array; targets: Int32Array | null } {
  const values = readValues(message.payload, 0, message.values, message.dtype);
  if (message.targets === 0) return { values, targets: null };
  const start = message.values * bytesPerValue(message.dtype);
  const targets = new Int32Array(message.payload.slice(start, start + 4 * message.targets).buffer);
  return { values, targets };
}
