/**
 * How busy a GPU engine's queue is: the fraction of wall time during which at least one submitted
 * step has not finished, and each step's time on the engine. A step counts as finished when the
 * queue's onSubmittedWorkDone, asked right after its submit, resolves: that promise covers the
 * step and everything queued before it, so steps finish in the order they were submitted.
 */
import type { StepQueue, StepQueueStats } from '../train/trainer.ts';

/** Finished steps whose times make up StepQueueStats.stepMs. */
const STEPS_AVERAGED = 8;

export class QueueMeter implements StepQueue {
  private inFlight = 0;
  /** When the queue last went from idle to busy, ms. */
  private busySince = 0;
  /** Busy time of the idle-to-busy spells that have ended since `since`, ms. */
  private busyMs = 0;
  private since: number;
  /** When the last step finished, ms (its successor's time on the engine starts no earlier). */
  private lastFinish = Number.NEGATIVE_INFINITY;
  /**
   * The last STEPS_AVERAGED steps' times on the engine, ms. One alone can read 0: the done-promises
   * of steps that finished close together may resolve in one turn, the first getting their time.
   */
  private readonly stepTimes: number[] = [];
  private finished = 0;
  private readonly waiters: { most: number; resolve: () => void }[] = [];

  constructor(private readonly now: () => number = () => performance.now()) {
    this.since = now();
  }

  /** A step was just submitted; `done` resolves when the queue has run it. */
  submitted(done: Promise<unknown>): void {
    const at = this.now();
    if (this.inFlight === 0) this.busySince = at;
    this.inFlight++;
    const settle = () => this.onFinished(at);
    done.then(settle, settle);
  }

  private onFinished(submittedAt: number): void {
    const at = this.now();
    this.inFlight--;
    this.finished++;
    // queued behind its predecessor, a step starts on the engine when that one finishes
    this.stepTimes.push(at - Math.max(submittedAt, this.lastFinish));
    if (this.stepTimes.length > STEPS_AVERAGED) this.stepTimes.shift();
    this.lastFinish = at;
    if (this.inFlight === 0) this.busyMs += at - Math.max(this.busySince, this.since);
    for (const waiter of this.waiters.filter((w) => this.inFlight <= w.most)) {
      this.waiters.splice(this.waiters.indexOf(waiter), 1);
      waiter.resolve();
    }
  }

  stats(): StepQueueStats {
    const at = this.now();
    const open = this.inFlight > 0 ? at - Math.max(this.busySince, this.since) : 0;
    const wallMs = at - this.since;
    const busyMs = this.busyMs + open;
    return {
      busyMs,
      wallMs,
      fraction: wallMs > 0 ? busyMs / wallMs : 0,
      inFlight: this.inFlight,
      steps: this.finished,
      stepMs: this.stepTimes.length > 0 ? this.stepTimes.reduce((a, b) => a + b) / this.stepTimes.length : 0,
    };
  }

  reset(): void {
    this.since = this.now();
    this.busyMs = 0;
    this.finished = 0;
  }

  atMost(steps: number): Promise<void> {
    if (this.inFlight <= steps) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push({ most: steps, resolve }));
  }
}
