/**
 * A pipeline of S stages as S worker threads (bench/pipeline-stage.ts), for bench/pipeline.ts:
 * neighbours pass activations and gradients over MessagePorts of their own, and the main thread
 * does what the stages' small all-reduce would (sum the tied wte gradients of the first and last
 * stage, sum Σg² over the stages, hand every stage the same clip factor), in the order
 * PipelineTrainer does it, so an f32 run gives PipelineTrainer's losses bit for bit.
 */
import { MessageChannel, type MessagePort, Worker } from 'node:worker_threads';
import type { GptConfig } from '../packages/model/src/config.ts';
import { type PipelineSchedule, scheduleOrder } from '../packages/model/src/pipeline/schedule.ts';
import { pipelineGradScale } from '../packages/model/src/pipeline/stage-trainer.ts';
import { buildStageLayout, gatherStage, splitStages } from '../packages/model/src/pipeline/stages.ts';
import type { Batch } from '../packages/model/src/train/trainer.ts';
import type { TrainConfig } from '../packages/model/src/train-config.ts';
import type { ActivationType, StageReply, StageRequest, StageTimes, StageWorkerData } from './pipeline-stage.ts';

export interface ThreadedPipelineOptions {
  config: GptConfig;
  train: TrainConfig;
  /** The whole model's parameters; each stage gets its slice. */
  params: Float32Array;
  stages: number;
  micros: number;
  schedule: PipelineSchedule;
  activations: ActivationType;
}

export interface ThreadedStep {
  loss: number;
  /** From handing out the batch to the last stage's AdamW, in the main thread. */
  stepMs: number;
  times: StageTimes[];
  /** Activation and gradient bytes the stages put on their links this step. */
  sentBytes: number;
  peakInFlight: number[];
}

/** One worker with at most one request outstanding (a stage answers each request once, in order). */
class StageThread {
  private pending: { resolve: (reply: StageReply) => void; reject: (error: Error) => void } | null = null;
  private failure: Error | null = null;

  constructor(readonly worker: Worker) {
    worker.on('message', (reply: StageReply) => {
      const pending = this.pending;
      this.pending = null;
      pending?.resolve(reply);
    });
    const fail = (error: Error) => {
      this.failure = error;
      this.pending?.reject(error);
      this.pending = null;
    };
    worker.on('error', fail);
    worker.on('exit', (code) => fail(new Error(`stage worker exited with code ${code}`)));
  }

  request<T extends StageReply['type']>(message: StageRequest, expect: T): Promise<Extract<StageReply, { type: T }>> {
    if (this.failure) return Promise.reject(this.failure);
    if (this.pending) return Promise.reject(new Error('a stage request is already outstanding'));
    return new Promise((resolve, reject) => {
      this.pending = {
        resolve: (reply) =>
          reply.type === expect
            ? resolve(reply as Extract<StageReply, { type: T }>)
            : reject(new Error(`expected ${expect}, got ${reply.type}`)),
        reject,
      };
      this.worker.postMessage(message);
    });
  }
}

export class ThreadedPipeline {
  private constructor(
    private readonly threads: StageThread[],
    private readonly train: TrainConfig,
    private readonly micros: number,
  ) {}

  static create(o: ThreadedPipelineOptions): ThreadedPipeline {
    const specs = splitStages(o.config.nLayer, o.stages);
    const orders = scheduleOrder(o.schedule, o.stages, o.micros);
    // links[s] joins stage s (port1) to stage s + 1 (port2).
    const links = specs.slice(1).map(() => new MessageChannel());
    const threads = specs.map((spec, s) => {
      const prev = links[s - 1]?.port2;
      const next = links[s]?.port1;
      const ports = [prev, next].filter((port): port is MessagePort => port !== undefined);
      const data: StageWorkerData = {
        config: o.config,
        train: o.train,
        spec,
        params: gatherStage(buildStageLayout(o.config, spec), o.params),
        microBatch: o.train.batchSize / o.micros,
        micros: o.micros,
        order: orders[s] ?? [],
        activations: o.activations,
        ...(prev ? { prev } : {}),
        ...(next ? { next } : {}),
      };
      // execArgv [] : the entry registers tsx itself (see pipeline-worker.mjs).
      const worker = new Worker(new URL('./pipeline-worker.mjs', import.meta.url), {
        workerData: data,
        transferList: ports,
        execArgv: [],
      });
      return new StageThread(worker);
    });
    return new ThreadedPipeline(threads, o.train, o.micros);
  }

  async step(batch: Batch, lr: number): Promise<ThreadedStep> {
    const { threads } = this;
    const S = threads.length;
    const start = performance.now();
    const { inputs, targets } = batch;
    const opsDone = await Promise.all(threads.map((t) => t.request({ type: 'step', inputs, targets }, 'ops-done')));
    // first + last, in that order, onto both: PipelineTrainer's tie.
    let tied: Float32Array | null = null;
    if (S > 1) {
      const a = opsDone[0]?.tiedGrad;
      const b = opsDone[S - 1]?.tiedGrad;
      if (!a || !b) throw new Error('the first and last stages sent no tied gradient');
      for (let i = 0; i < a.length; i++) a[i] = (a[i] as number) + (b[i] as number);
      tied = a;
    }
    const sums = await Promise.all(
      threads.map((t, s) => t.request({ type: 'tied', grad: s === 0 || s === S - 1 ? tied : null }, 'sum-squares')),
    );
    let sum = 0;
    for (const reply of sums) sum += reply.sumSquares;
    const gradScale = pipelineGradScale(sum, this.micros, this.train.gradClip);
    const updated = await Promise.all(threads.map((t) => t.request({ type: 'update', lr, gradScale }, 'updated')));
    const stepMs = performance.now() - start;
    return {
      loss: updated[S - 1]?.loss ?? Number.NaN,
      stepMs,
      times: updated.map((u) => u.times),
      sentBytes: updated.reduce((total, u) => total + u.sentBytes, 0),
      peakInFlight: updated.map((u) => u.peakInFlight),
    };
  }

  /** Mean loss over `batches`, forward only. */
  async evaluate(batches: Batch[]): Promise<number> {
    let total = 0;
    for (const { inputs, targets } of batches) {
      const losses = await Promise.all(
        this.threads.map((t) => t.request({ type: 'eval', inputs, targets }, 'eval-done')),
      );
      total += losses.at(-1)?.loss ?? Number.NaN;
    }
    return total / batches.length;
  }

  async destroy(): Promise<void> {
    await Promise.all(this.threads.map((t) => t.worker.terminate()));
  }
}
