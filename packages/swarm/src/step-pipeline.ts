/**
 * The inner steps a GPU volunteer keeps queued (Worker.run). Its engine runs a step while
 * JavaScript does the round work (an owner's aggregation, the replica's outer step, hashes, a
 * contribution's encoding): with the next steps already submitted, the GPU does not wait for it.
 * Steps go in with no loss readback; one in flight at a time reads its loss, which arrives when
 * the step is done and is never waited for, so heartbeats carry a loss a few steps old.
 */
import type { Batch, StepQueue, Trainer } from '@shoal/model';

/** What one pipelined step needs of the worker's loop (Worker.run). */
export interface PipelinedLoop {
  /** The step boundary's round work (WorkerRounds.atBoundary with its `overlap`). */
  boundary(overlap: () => void): Promise<void>;
  /** Waits while a round blocks the inner loop (Worker.waitForRounds). */
  waitForRounds(): Promise<void>;
  /** The next step's batch and learning rate. */
  next(): { batch: Batch; lr: number } | Promise<{ batch: Batch; lr: number }>;
  /** Counts a queued step; `elapsedMs`: the engine's time for a step plus the rest after it. */
  counted(elapsedMs: number): void;
  /** The rest after a step of `stepMs` (a duty cycle), ms. */
  restAfter(stepMs: number): number;
  sleep(ms: number): Promise<void>;
}

/** Steps a GPU engine keeps queued by default: enough to cover a round's work between two steps. */
export const DEFAULT_PIPELINE_DEPTH = 3;

export class StepPipeline {
  private reading = false;
  private failure: { error: unknown } | null = null;

  constructor(
    private readonly trainer: Trainer,
    private readonly queue: StepQueue,
    /** Steps in flight at most (≥ 2). */
    readonly depth: number,
    private readonly onLoss: (loss: number) => void,
  ) {}

  /**
   * One inner step, in the order of a loop that awaits every step: the boundary, a wait for a
   * round, the step, the rest after it, then the step is counted. The boundary runs while the
   * steps queued earlier run; once its reads of θ_local are queued (its `overlap`) the step goes in
   * behind them, and the boundary's Δ is encoded and sent while the step runs. A boundary that
   * merges has written the merge by then; one after which the loop waits for a round finishes,
   * and the wait is done, before the step is queued. So steps, merges and waits keep their order.
   */
  async step(loop: PipelinedLoop): Promise<void> {
    if (this.failure) throw this.failure.error; // a step queued earlier failed
    let overlapped = false;
    let queueable = () => {};
    const readsQueued = new Promise<void>((resolve) => {
      queueable = resolve;
    });
    const boundary = loop.boundary(() => {
      overlapped = true;
      queueable();
    });
    await Promise.race([readsQueued, boundary]);
    if (!overlapped) await loop.waitForRounds();
    await this.queue.atMost(this.depth - 1);
    const stepMs = this.stepMs;
    const rest = loop.restAfter(stepMs);
    const next = await loop.next();
    this.submit(next.batch, next.lr);
    // (a wait that a message during its Δ calls for is waited at the next boundary: the step is in)
    if (overlapped) await boundary;
    // a duty cycle's rest is a rest for the engine too
    if (rest > 0) await this.drain();
    // at least a zero-length sleep: timers, the mesh and signals are served between steps
    await loop.sleep(rest);
    loop.counted(stepMs + rest);
  }

  /** Queues a step; it reads its loss when no other read is pending. */
  private submit(batch: Batch, lr: number): void {
    const readLoss = !this.reading;
    if (readLoss) this.reading = true;
    this.trainer.step(batch, lr, { readLoss }).then(
      (loss) => {
        if (!readLoss) return;
        this.reading = false;
        this.onLoss(loss);
      },
      (error: unknown) => {
        if (readLoss) this.reading = false;
        this.failure ??= { error };
      },
    );
  }

  /** The engine's time for a step, ms (0 before one has finished). */
  get stepMs(): number {
    return this.queue.stats().stepMs;
  }

  /** Resolves once every queued step has finished. */
  drain(): Promise<void> {
    return this.queue.atMost(0);
  }
}

/**
 * The pipeline for `trainer`: only an engine whose steps finish after they are queued (WebGPU),
 * and only with `depth` ≥ 2. Null otherwise, and the loop awaits every step (the CPU engine, the
 * simulator, a pipeline-parallel stage, depth 1).
 */
export function stepPipelineFor(trainer: Trainer, depth: number, onLoss: (loss: number) => void): StepPipeline | null {
  if (trainer.backend !== 'webgpu' || !trainer.queue || depth < 2) return null;
  return new StepPipeline(trainer, trainer.queue, depth, onLoss);
}
