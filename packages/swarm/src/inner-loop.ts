/**
 * A worker's inner loop: AdamW steps on its engine, one after another, with the step-boundary
 * work of its rounds (merges, due contributions) between them. It waits only while a round blocks
 * it (a fragment's next contribution first merges its previous round), and no longer than a few
 * heartbeats for an overdue round that does not come. A WebGPU engine keeps a few steps queued
 * while the round work runs (step-pipeline.ts); every other engine has each step awaited.
 */
import { learningRate } from '@shoal/gpu';
import type { Trainer } from '@shoal/model';
import type { RoundOpenMessage, RunConfig } from '@shoal/protocol';
import { PipelineInterrupted } from './pipeline/mesh-stage.ts';
import { DEFAULT_PIPELINE_DEPTH, type StepPipeline, stepPipelineFor } from './step-pipeline.ts';
import type { WorkerMetrics, WorkerOptions } from './worker-options.ts';
import type { WorkerRounds } from './worker-rounds.ts';

/** How long a worker waits for an overdue round before training on, in heartbeat periods. */
const OVERDUE_PATIENCE_HEARTBEATS = 3;

/** What a worker trains with once it is synced: its engine, the run's config, its rounds. */
export interface Training {
  trainer: Trainer;
  config: RunConfig;
  rounds: WorkerRounds;
}

/** What the inner loop reads of its worker, and what it asks of it. */
export interface LoopWorker {
  options: Pick<WorkerOptions, 'member' | 'nextBatch' | 'sleepAfterStepMs' | 'pipelineDepth'>;
  metrics: WorkerMetrics;
  /** Its engine, config and rounds once it is synced; null while it cannot train. */
  training(): Training | null;
  stopped(): boolean;
  paused(): boolean;
  /** Whether it takes part in rounds now, so that it waits for an overdue one. */
  awaitsRounds(): boolean;
  /** When its last heartbeat went out. */
  lastHeartbeat(): number;
  heartbeat(): void;
  /** The step-boundary work of its rounds: merges and due contributions. */
  atBoundary(): Promise<void>;
}

export class InnerLoop {
  /** The engine's queued steps, where it keeps some (a WebGPU engine; built at the first step). */
  private pipeline: StepPipeline | null | undefined;
  /** A late joiner's offset into the room's learning-rate schedule (set at its first round-open). */
  private scheduleOffset = 0;
  private lateJoiner = false;

  constructor(private readonly worker: LoopWorker) {}

  /** It joins a room under way (late, or again): the next round it takes part in places it in the schedule. */
  joinedLate(): void {
    this.lateJoiner = true;
  }

  /**
   * At a round it takes part in, after joining late: it continues the room's learning-rate
   * schedule, at the room's tokens per participant.
   */
  placeInSchedule(open: RoundOpenMessage, config: RunConfig): void {
    if (!this.lateJoiner) return;
    const perStep = config.train.batchSize * config.train.seqLen * open.participants.length;
    this.scheduleOffset = Math.max(0, Math.round(open.roomTokens / perStep) - this.worker.metrics.innerStep);
    this.lateJoiner = false;
  }

  /** The inner schedule's step: this worker's steps, offset for a late joiner. */
  private scheduleStep(): number {
    return this.worker.metrics.innerStep + this.scheduleOffset;
  }

  /** Steps until the worker stops or `until()` says so. */
  async run(until: () => boolean): Promise<void> {
    const { worker } = this;
    const { member } = worker.options;
    while (!worker.stopped() && !until()) {
      const training = worker.training();
      if (!training) {
        await member.clock.sleep(50);
        continue;
      }
      const { trainer, config, rounds } = training;
      if (worker.paused() || trainer.waiting) {
        // No training, but still a member: due contributions go out, rounds merge, heartbeats flow.
        await worker.atBoundary();
        if (member.clock.now() - worker.lastHeartbeat() >= config.heartbeatMs) worker.heartbeat();
        await member.clock.sleep(50);
        continue;
      }
      const pipeline = this.pipelineFor(trainer);
      if (pipeline) {
        await pipeline.step({
          boundary: (overlap) => rounds.atBoundary(trainer, overlap),
          waitForRounds: () => this.waitForRounds(config, rounds),
          next: async () => ({
            batch: await worker.options.nextBatch(),
            lr: learningRate(this.scheduleStep(), config.train),
          }),
          counted: (elapsedMs) => this.stepped(config, rounds, elapsedMs),
          restAfter: (stepMs) => worker.options.sleepAfterStepMs?.(stepMs) ?? 0,
          sleep: (ms) => member.clock.sleep(ms),
        });
        continue;
      }
      await worker.atBoundary();
      await this.waitForRounds(config, rounds);
      const started = member.clock.now();
      const lr = learningRate(this.scheduleStep(), config.train);
      let loss: number;
      try {
        // a pipeline stage's step waits on its group over the network, and tracks its own compute
        const step = trainer.step(await worker.options.nextBatch(), lr);
        loss = await (trainer.distributed ? step : member.clock.track(step));
      } catch (error) {
        if (!(error instanceof PipelineInterrupted)) throw error;
        await member.clock.sleep(50); // the group changed or stalled: nothing was applied; again
        continue;
      }
      // On a real clock at least a zero-length sleep, so timers, the mesh and signals get served
      // between steps of a synchronous (CPU) engine.
      await member.clock.sleep(worker.options.sleepAfterStepMs?.(member.clock.now() - started) ?? 0);
      this.stepped(config, rounds, member.clock.now() - started, loss);
    }
    await this.pipeline?.drain();
  }

  /**
   * Counts an inner step, trained or queued on the engine: metrics (with its loss, where known),
   * the tokens each fragment's next contribution weighs, heartbeats.
   */
  private stepped(config: RunConfig, rounds: WorkerRounds, elapsedMs: number, loss?: number): void {
    const { metrics } = this.worker;
    const tokens = config.train.batchSize * config.train.seqLen;
    metrics.innerStep++;
    metrics.tokens += tokens;
    if (loss !== undefined) this.noteLoss(loss);
    if (elapsedMs > 0) metrics.tokensPerSecond = (tokens * 1000) / elapsedMs;
    rounds.trained(tokens);
    // Progress also every H/5 steps: the coordinator opens rounds from it, and fast steps would
    // otherwise cross several H between two timed heartbeats.
    const everySteps = Math.max(1, Math.floor(config.diloco.innerSteps / 5));
    const due = this.worker.options.member.clock.now() - this.worker.lastHeartbeat() >= config.heartbeatMs;
    if (due || metrics.innerStep % everySteps === 0) this.worker.heartbeat();
  }

  /** NaN (a dry run, or a diverged step) is reported as unknown: the wire carries finite numbers only. */
  private noteLoss(loss: number): void {
    this.worker.metrics.loss = Number.isFinite(loss) ? loss : null;
  }

  /** The engine's step pipeline, built at the first step; null where each step is awaited. */
  private pipelineFor(trainer: Trainer): StepPipeline | null {
    if (trainer.distributed) return null;
    if (this.pipeline === undefined) {
      trainer.queue?.reset(); // the queue's figures count from the first step, pipelined or not
      const depth = this.worker.options.pipelineDepth ?? DEFAULT_PIPELINE_DEPTH;
      this.pipeline = stepPipelineFor(trainer, depth, (loss) => this.noteLoss(loss));
    }
    return this.pipeline;
  }

  /** Waits while a round blocks the inner loop (WorkerRounds.blocking): the simulator's lost compute time. */
  private async waitForRounds(config: RunConfig, rounds: WorkerRounds): Promise<void> {
    const { worker } = this;
    const { clock } = worker.options.member;
    const { heartbeatMs } = config;
    let waited = false;
    let overdueSince: number | null = null;
    while (!worker.stopped()) {
      const late = worker.awaitsRounds() ? rounds.overdue() : [];
      if (late.length === 0) overdueSince = null;
      else if (overdueSince === null) overdueSince = clock.now();
      else if (clock.now() - overdueSince > OVERDUE_PATIENCE_HEARTBEATS * heartbeatMs) {
        // no round came: the coordinator is paused, or waits on others; train on, and wait again
        // from the next contribution (for every fragment: a coordinator that opens none of these
        // opens none of the others)
        rounds.excuseAll();
        worker.metrics.overdueExcused++;
        continue;
      }
      if (late.length === 0 && !rounds.blocking()) break;
      // the coordinator opens rounds from the steps heartbeats report: report an overdue one at
      // once, and stay seen (and counted) through a long wait
      if ((late.length > 0 && !waited) || clock.now() - worker.lastHeartbeat() >= heartbeatMs) worker.heartbeat();
      await clock.sleep(5);
      worker.metrics.stalledMs += 5;
      waited = true;
      await worker.atBoundary();
    }
    if (waited) worker.metrics.stalls++;
  }
}
