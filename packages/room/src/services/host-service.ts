/**
 * The host as a service (docs/design.md, "The host is a replica"): what `shoal host` and the
 * dashboard's room worker both run around a Host. It serves the room's text, records the room
 * view, evaluates θ_global whenever it moved (and at once at start, published as soon as it is
 * known, so the chart has its first point before any round), writes a checkpoint whenever it moved
 * (and at start, at a status change and on the way out), and samples the view for publication on a
 * timer. When the room's step reaches the schedule's total steps the run stops by itself
 * (status 'stopped', ended by 'schedule': no new rounds, a last checkpoint and evaluation, and
 * the volunteers, told by the status, leave).
 *
 * It has no I/O of its own: the member (and its transport), the evaluation engine, the checkpoint
 * storage and the timers come in, and the view, the evaluations and the errors go out through
 * callbacks. `shoal host` gives it Node files and a CPU engine; the dashboard IndexedDB and
 * messages to its page; the tests fakes.
 *
 *   const service = await HostService.create({ member, config, corpus, storage, timers, … });
 *   // announce the room, then:
 *   service.start();
 *   // …
 *   await service.stop();
 */
import { type Batch, type Corpus, validationBatches } from '@shoal/data';
import type { Trainer } from '@shoal/model';
import type { RoomEnd, RoomStatus, RoomViewPoint, RoomViewUpdate, RunConfig } from '@shoal/protocol';
import type { CoordinatorEvent, Member } from '@shoal/swarm';
import { Host, serveCorpus } from '@shoal/swarm';
import { type KeptView, keptOf } from '../kept-view.ts';
import {
  encodeRoomCheckpoint,
  type RoomCheckpoint,
  RoomCheckpointSaver,
  roomCheckpointOf,
} from '../room-checkpoint.ts';
import { type RoomView, RoomViewRecorder } from '../room-view.ts';

export { scheduleStep } from '../room-figures.ts';
export { HOST_DEFAULTS, innerStepsFor } from './host-defaults.ts';

/** Something done every `ms` until the returned function is called (setInterval, or a fake). */
export interface Timers {
  every(ms: number, callback: () => void): () => void;
}

/** The wall clock's intervals. */
export const wallTimers: Timers = {
  every(ms, callback) {
    const timer = setInterval(callback, ms);
    return () => clearInterval(timer);
  },
};

/** A checkpoint's two files (room-checkpoint.ts), as bytes. */
export type RoomCheckpointFiles = ReturnType<typeof encodeRoomCheckpoint>;

/** Where a host's checkpoints go: files beside each other, an IndexedDB record, a test's map. */
export interface HostStorage {
  /** Writes the pair; `checkpoint` is the snapshot they were encoded from (for its counters). */
  save(files: RoomCheckpointFiles, checkpoint: RoomCheckpoint): Promise<void>;
}

/** What the service needs of an evaluation engine (a Trainer; θ_global is swapped into it). */
export type Evaluator = Pick<Trainer, 'setParams' | 'evaluate' | 'destroy'>;

export interface HostServiceOptions {
  member: Member;
  config: RunConfig;
  /** The room's text: served to volunteers who ask for it (none in a dataset room). */
  corpus?: Corpus;
  /** A saved run to take up again (its config is `config`). */
  saved?: RoomCheckpoint | null;
  /** θ_global to start a new run from (a checkpoint the host picked); the seeded init when null. */
  params?: Float32Array | null;
  deadlineMs: number;
  /** Appended to an unreachable member's reason in the roster. */
  unreachableHint?: string;
  roomId: string;
  hostKind: RoomViewUpdate['hostKind'];
  status: RoomStatus;
  /** The evaluation engine, made once with θ_global; later θ_global values are swapped in. */
  createEvaluator(config: RunConfig, params: Float32Array): Evaluator;
  /** Fixed validation batches (evalBatchesFor). */
  evalBatches: Batch[];
  evalEveryMs: number;
  /** Sample the room view and hand it to `onView` this often. */
  publishEveryMs: number;
  timers: Timers;
  /** Null: no checkpoints. */
  storage: HostStorage | null;
  /** The coordinator's events, after the room view has recorded them. */
  onEvent?(event: CoordinatorEvent): void;
  /** The view since the previous one, and the room's schedule step (roomStep). */
  onView(update: RoomViewUpdate, step: number): void;
  /** θ_global moved and was evaluated (null: its loss was not finite). */
  onEvaluated?(evalLoss: number | null): void;
  /** The run stopped by itself (the schedule ended); the view says so too (endedBy). */
  onEnded?(reason: RoomEnd): void;
  onError(error: unknown, during: 'evaluation' | 'checkpoint'): void;
}

/** The host's figures now, as `shoal host` prints them every --metrics-every-ms. */
export interface HostMetrics {
  /** The room's step on the learning-rate schedule (the room view's). */
  step: number;
  tokens: number;
  /** The members' mean training loss (null before any reported one). */
  trainLoss: number | null;
  evalLoss: number | null;
  tokensPerSecond: number;
  bytesSent: number;
  bytesReceived: number;
  members: number;
}

/**
 * A resumed room's history (the server's kept view for watch links): the charts, the round
 * timeline, each peer's rounds and the room's tokens go on from it, so nothing goes back.
 */
export interface ViewHistory {
  /** Epoch ms when the run started. */
  startedAt: number;
  /** The last chart point. */
  continueFrom: RoomViewPoint | null;
  /** Its rounds, each peer's committed rounds and the best evaluation. */
  kept?: KeptView | null;
  /**
   * The room's tokens it showed: more than the checkpoint's when the volunteers trained on after
   * the last save (they keep those steps in θ_local), so the room's tokens do not go back.
   */
  tokens?: number;
  /** The rounds it counted, committed and aborted: counts that never go back either. */
  rounds?: { committed: number; aborted: number };
}

/** The history a resumed host goes on from, read off the view the server kept (readKeptView). */
export function viewHistoryOf(view: RoomView): ViewHistory {
  return {
    startedAt: view.startedAt,
    continueFrom: view.points.at(-1) ?? null,
    kept: keptOf(view),
    tokens: view.metrics.tokens,
    rounds: { committed: view.metrics.roundsCommitted, aborted: view.metrics.roundsAborted },
  };
}

/** Validation batches of the room's text for evaluating θ_global: `count` batches of the run's shape. */
export function evalBatchesFor(corpus: Corpus, config: RunConfig, count: number): Batch[] {
  return validationBatches(corpus.validation, {
    batchSize: config.train.batchSize,
    seqLen: config.train.seqLen,
    count,
  });
}

export class HostService {
  private evalLoss: number | null = null;
  /** The fragment hashes θ_global was last evaluated at ('' before the first). */
  private evaluatedHashes = '';
  /** Evaluations run one after another; errors end here (onError). */
  private evaluating: Promise<void> = Promise.resolve();
  private saver: RoomCheckpointSaver | null = null;
  /** The room view, from start() on; the coordinator's events before it wait in `early`. */
  private view: RoomViewRecorder | null = null;
  private status: RoomStatus;
  private stopTimers: (() => void)[] = [];
  private stopping: Promise<void> | null = null;
  /** No evaluation has been published yet: the first is, as soon as it is known. */
  private firstEvaluation = true;

  private constructor(
    readonly host: Host,
    private readonly evaluator: Evaluator,
    private readonly options: HostServiceOptions,
    private readonly early: CoordinatorEvent[],
  ) {
    this.status = options.status;
  }

  /**
   * The host on `member` (its coordinator in `status`) and its evaluation engine; nothing is
   * recorded, written or timed until start(). Throws when a saved run does not hold together
   * (Host.create).
   */
  static async create(options: HostServiceOptions): Promise<HostService> {
    const { member, config, saved, params } = options;
    // before the coordinator welcomes anyone: a volunteer may ask for the text at once
    if (options.corpus) serveCorpus(member, options.corpus.bytes);
    // the coordinator's events before the view is recorded wait for it
    let service: HostService | null = null;
    const early: CoordinatorEvent[] = [];
    const host = await Host.create({
      member,
      config,
      deadlineMs: options.deadlineMs,
      unreachableHint: options.unreachableHint,
      onEvent: (event) => {
        if (service?.view) service.view.onEvent(event);
        else early.push(event);
        options.onEvent?.(event);
      },
      ...(saved ? { params: saved.params, momentum: saved.momentum, resume: saved.state } : params ? { params } : {}),
    });
    service = new HostService(host, options.createEvaluator(config, host.params()), options, early);
    service.applyStatus(options.status);
    return service;
  }

  /** The room view (start() records it). */
  get recorder(): RoomViewRecorder {
    if (!this.view) throw new Error('the room view is recorded from start() on');
    return this.view;
  }

  /**
   * The room view (going on from `history`, a resumed room's), checkpoints (now: a resume point
   * before the first commit, and a resumed run's state rewritten without the credentials an old
   * one carried; then at every round the replica adopts), the first evaluation, and the timers.
   */
  start(history: ViewHistory | null = null): void {
    const { storage, timers } = this.options;
    const { coordinator } = this.host;
    if (history?.tokens !== undefined) coordinator.carryTokens(history.tokens);
    // rounds committed after the last save were undone by the restart, but they happened
    coordinator.committedRounds = Math.max(coordinator.committedRounds, history?.rounds?.committed ?? 0);
    coordinator.abortedRounds = Math.max(coordinator.abortedRounds, history?.rounds?.aborted ?? 0);
    coordinator.carryStep(history?.kept?.step ?? history?.continueFrom?.step ?? 0);
    this.view = new RoomViewRecorder({
      host: this.host,
      roomId: this.options.roomId,
      hostKind: this.options.hostKind,
      ...(history && { startedAt: history.startedAt, continueFrom: history.continueFrom, kept: history.kept ?? null }),
      // one token a byte: the training split's length (a dataset room's is not known here)
      textTokens: this.options.corpus?.train.length ?? null,
    });
    for (const event of this.early.splice(0)) this.view.onEvent(event);
    this.view.setStatus(this.status);
    if (storage) {
      this.saver = new RoomCheckpointSaver(
        this.host,
        (checkpoint) => storage.save(encodeRoomCheckpoint(checkpoint), checkpoint),
        (error) => this.options.onError(error, 'checkpoint'),
      );
      this.saver.request(true);
    }
    this.evaluateSoon();
    this.stopTimers = [
      timers.every(this.options.evalEveryMs, () => this.evaluateSoon()),
      timers.every(this.options.publishEveryMs, () => this.publish()),
    ];
  }

  /** The room's status: no new rounds unless running; saved as the room stands. */
  setStatus(status: RoomStatus): void {
    this.applyStatus(status);
    this.saver?.request(true);
  }

  /**
   * Samples the room view and hands it, with the schedule step, to `onView`; first stops a running
   * room whose step reached the schedule's total steps.
   */
  publish(): void {
    if (this.status === 'running' && this.roomStep() >= this.host.config.train.totalSteps) this.endSchedule();
    this.recorder.sample();
    this.options.onView(this.recorder.update(), this.roomStep());
  }

  /** The room's step on the learning-rate schedule (Coordinator.step). */
  roomStep(): number {
    return this.host.coordinator.step();
  }

  /** θ_global's fragment hashes, joined: they name θ_global (equal keys, equal parameters). */
  paramsKey(): string {
    return this.host
      .fragmentStates()
      .map((f) => f.hash)
      .join();
  }

  /** θ_global and the run state now, as the checkpoint's two files (a download). */
  files(): RoomCheckpointFiles {
    return encodeRoomCheckpoint(roomCheckpointOf(this.host));
  }

  /** The room's figures now, the room view's (RoomViewRecorder.metrics); from start() on. */
  metrics(): HostMetrics {
    const { step, tokens, trainLoss, evalLoss, tokensPerSecond, bytesSent, bytesReceived } = this.recorder.metrics();
    const members = this.host.coordinator.members.size;
    return { step, tokens, trainLoss, evalLoss, tokensPerSecond, bytesSent, bytesReceived, members };
  }

  /**
   * Stops: the timers and the coordinator's (no round deadline keeps a process alive), a last
   * checkpoint, which does not wait for an evaluation in progress, then a last view with status
   * 'stopped'. Nothing here waits on the network. Idempotent.
   */
  stop(): Promise<void> {
    this.stopping ??= (async () => {
      for (const cancel of this.stopTimers) cancel();
      this.host.close();
      this.saver?.request(true);
      await this.evaluating;
      if (this.view) {
        // a run the schedule ended stays ended by it
        if (this.status !== 'stopped') this.view.setStatus('stopped');
        this.publish();
        this.view.close();
      }
      await this.saver?.settled();
      this.saver?.close();
      this.evaluator.destroy();
    })();
    return this.stopping;
  }

  /**
   * The learning-rate schedule ended: past it the rate stays at its minimum and a room trains on
   * for nothing (the validation loss rises as the model overfits its text). Stopped, saved, and
   * θ_global evaluated one last time; rounds in flight still finish.
   */
  private endSchedule(): void {
    this.applyStatus('stopped', 'schedule');
    this.saver?.request(true);
    this.evaluateSoon();
    this.options.onEnded?.('schedule');
  }

  private applyStatus(status: RoomStatus, endedBy: RoomEnd = 'host'): void {
    this.status = status;
    this.host.coordinator.paused = status !== 'running';
    this.view?.setStatus(status, endedBy);
    if (status === 'running') this.host.coordinator.maybeOpenRounds();
  }

  private evaluateSoon(): void {
    this.evaluating = this.evaluating
      .then(() => this.evaluate())
      .catch((error) => this.options.onError(error, 'evaluation'));
  }

  /** Validation loss of θ_global, unless θ_global has not moved since the last one. */
  private async evaluate(): Promise<void> {
    const hashes = this.paramsKey();
    if (hashes === this.evaluatedHashes || this.stopping) return;
    this.evaluatedHashes = hashes;
    await this.evaluator.setParams(this.host.params());
    const loss = await this.evaluator.evaluate(this.options.evalBatches);
    this.evalLoss = Number.isFinite(loss) ? loss : null;
    this.view?.setEvalLoss(this.evalLoss);
    this.options.onEvaluated?.(this.evalLoss);
    // the first evaluation is θ_global at the start: the chart's first point, before any round
    if (this.firstEvaluation && this.view && !this.stopping) {
      this.firstEvaluation = false;
      this.publish();
    }
  }
}
