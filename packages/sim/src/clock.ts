/**
 * A virtual clock for the in-process simulator: time is a number of milliseconds that moves only
 * when the clock runs its next event, so a run depends on what was scheduled, never on how fast
 * the machine running it is. No real timers are involved in the passing of virtual time.
 *
 * Contract
 * - `schedule(delayMs, callback)` and `scheduleAt(atMs, callback)` queue a callback. Events run one
 *   at a time in order of time, ties in the order they were scheduled, with `now()` reading the
 *   event's time while it runs. Time never goes backwards: scheduling in the past throws.
 * - Synchronous driving: `step()` runs one event, `run(options)` runs events until idle or until a
 *   stop condition. Promise continuations do NOT run between events, so these suit callback code.
 * - Asynchronous driving: `advance()` and `runAsync(options)` yield to the host after every event
 *   (one macrotask, so the microtask queue is empty), letting every promise continuation that the
 *   event set off run, and schedule what it schedules, before the next event. Actors written as
 *   `for (;;) { work(); await clock.sleep(ms); }` then interleave exactly as their times say, ties
 *   broken by the order in which the sleeps were called: deterministic.
 * - Real work inside virtual time: an actor that awaits something that takes real time (a GPU
 *   step, a worker thread) wraps it: `await clock.track(engine.step())`. While tracked work is
 *   outstanding, virtual time stands still (the work takes zero virtual time; model its duration
 *   with a `sleep` after it). Tracked results are handed back in the order `track` was called, each
 *   followed by a yield, so several engines computing in parallel in real time still give one
 *   deterministic run. An untracked real-time await (a timer, I/O) escapes the clock: the driver
 *   may run later events before it returns, or stop as idle.
 */

import { type ClockEvent, EventHeap } from './event-heap.ts';

/** What code under simulation needs of a clock; VirtualClock implements it. */
export interface Clock {
  /** The current time, ms. */
  now(): number;
  /** Runs `callback` `delayMs` ms from now (≥ 0). */
  schedule(delayMs: number, callback: () => void): TimerHandle;
  /** Runs `callback` at time `atMs` (≥ now). */
  scheduleAt(atMs: number, callback: () => void): TimerHandle;
  /** Resolves `ms` ms from now (≥ 0). */
  sleep(ms: number): Promise<void>;
}

export interface TimerHandle {
  /** When the callback is due, ms. */
  readonly at: number;
  /** Cancels the callback; false when it already ran or was cancelled. */
  cancel(): boolean;
}

export interface RunOptions {
  /** Run events due at or before this time (ms), then set the time to it. */
  until?: number;
  /** Run at most this many events. */
  maxEvents?: number;
  /** Checked before every event: stop as soon as it returns true. */
  stopWhen?: () => boolean;
}

export interface RunResult {
  /** Events run by this call. */
  events: number;
  /** 'idle': nothing left to run; 'until', 'max-events', 'stopped': that option stopped it. */
  reason: 'idle' | 'until' | 'max-events' | 'stopped';
}

export interface VirtualClockOptions {
  /** The time at start, ms. Default 0. */
  startMs?: number;
  /**
   * How the async driver lets promise continuations run: must resolve once the host's microtask
   * queue is empty. Default: setImmediate (Node), else a MessageChannel (browsers, Web Workers),
   * else setTimeout(0).
   */
  yieldToHost?: () => Promise<void>;
}

interface TrackedWork {
  /** Settles (never rejects) when the work has settled. */
  settled: Promise<void>;
  /** Hands the work's outcome to whoever awaits `track`. */
  release: () => void;
}

export class VirtualClock implements Clock {
  private time: number;
  private seq = 0;
  private readonly queue = new EventHeap();
  private live = 0;
  private readonly tracked: TrackedWork[] = [];
  private inEvent = false;
  private driving = false;
  private readonly yieldToHost: () => Promise<void>;

  constructor(options: VirtualClockOptions = {}) {
    this.time = options.startMs ?? 0;
    checkTime('startMs', this.time);
    this.yieldToHost = options.yieldToHost ?? defaultYieldToHost();
  }

  now(): number {
    return this.time;
  }

  /** Events scheduled and not yet run or cancelled. */
  pending(): number {
    return this.live;
  }

  schedule(delayMs: number, callback: () => void): TimerHandle {
    if (!(delayMs >= 0) || !Number.isFinite(delayMs)) {
      throw new RangeError(`Delay must be a finite number of ms ≥ 0, got ${delayMs}`);
    }
    return this.scheduleAt(this.time + delayMs, callback);
  }

  scheduleAt(atMs: number, callback: () => void): TimerHandle {
    checkTime('Event time', atMs);
    if (atMs < this.time) throw new RangeError(`Cannot schedule at ${atMs} ms: the time is already ${this.time} ms`);
    const event: ClockEvent = { at: atMs, seq: this.seq++, callback };
    this.queue.push(event);
    this.live++;
    return {
      at: atMs,
      cancel: () => {
        if (event.callback === null) return false;
        event.callback = null;
        this.live--;
        return true;
      },
    };
  }

  sleep(ms: number): Promise<void> {
    return new Promise((resolve) => this.schedule(ms, resolve));
  }

  /** `schedule` returning a bare cancel function (the shape of the swarm's SwarmClock). */
  setTimer(ms: number, callback: () => void): () => void {
    const handle = this.schedule(ms, callback);
    return () => {
      handle.cancel();
    };
  }

  /** Runs the next event, if any; returns whether one ran. A callback's error propagates. */
  step(): boolean {
    if (this.inEvent) throw new Error('VirtualClock.step() called from inside an event');
    const event = this.nextLive();
    if (event === undefined) return false;
    this.queue.pop();
    const callback = event.callback as () => void;
    event.callback = null;
    this.live--;
    this.time = event.at;
    this.inEvent = true;
    try {
      callback();
    } finally {
      this.inEvent = false;
    }
    return true;
  }

  /** Runs events synchronously (no promise continuations between them) until a stop condition. */
  run(options: RunOptions = {}): RunResult {
    let events = 0;
    for (;;) {
      const stop = this.stopReason(options, events);
      if (stop !== null) return { events, reason: stop };
      this.step();
      events++;
    }
  }

  /**
   * Runs `work` outside virtual time: the async driver runs no event until it has settled, and the
   * returned promise settles like `work`, in the order of the `track` calls (see the contract above).
   * Only the async driver releases tracked work.
   */
  track<T>(work: PromiseLike<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      let release = () => {};
      const settled = Promise.resolve(work).then(
        (value) => {
          release = () => resolve(value);
        },
        (error: unknown) => {
          release = () => reject(error);
        },
      );
      this.tracked.push({ settled, release: () => release() });
    });
  }

  /** Work passed to `track` and not yet handed back. */
  trackedCount(): number {
    return this.tracked.length;
  }

  /** Lets promise continuations run and hands back tracked work, in order, until neither is left. */
  async settle(): Promise<void> {
    await this.yieldToHost();
    for (let head = this.tracked[0]; head !== undefined; head = this.tracked[0]) {
      await head.settled; // real time passes here, virtual time does not
      this.tracked.shift();
      head.release();
      await this.yieldToHost();
    }
  }

  /** Settles, runs the next event if any, and settles again; returns whether an event ran. */
  async advance(): Promise<boolean> {
    await this.settle();
    const ran = this.step();
    if (ran) await this.settle();
    return ran;
  }

  /** Like `run`, but settles (see `settle`) before the first event and after every event. */
  async runAsync(options: RunOptions = {}): Promise<RunResult> {
    if (this.driving) throw new Error('VirtualClock.runAsync() is already running');
    this.driving = true;
    try {
      let events = 0;
      await this.settle();
      for (;;) {
        const stop = this.stopReason(options, events);
        if (stop !== null) return { events, reason: stop };
        this.step();
        events++;
        await this.settle();
      }
    } finally {
      this.driving = false;
    }
  }

  private stopReason(options: RunOptions, events: number): RunResult['reason'] | null {
    if (options.stopWhen?.()) return 'stopped';
    if (options.maxEvents !== undefined && events >= options.maxEvents) return 'max-events';
    const next = this.nextLive();
    if (options.until !== undefined && (next === undefined || next.at > options.until)) {
      if (options.until > this.time) this.time = options.until;
      return 'until';
    }
    return next === undefined ? 'idle' : null;
  }

  /** The earliest event not cancelled, left at the top of the queue. */
  private nextLive(): ClockEvent | undefined {
    let top = this.queue.peek();
    while (top !== undefined && top.callback === null) {
      this.queue.pop();
      top = this.queue.peek();
    }
    return top;
  }
}

function checkTime(name: string, ms: number): void {
  if (!Number.isFinite(ms)) throw new RangeError(`${name} must be a finite number of ms, got ${ms}`);
}

function defaultYieldToHost(): () => Promise<void> {
  const host = globalThis as { setImmediate?: (callback: () => void) => unknown };
  const setImmediate = host.setImmediate;
  if (typeof setImmediate === 'function') return () => new Promise((resolve) => setImmediate(resolve));
  if (typeof MessageChannel === 'function') {
    // created on first use; a message posted to oneself runs as a macrotask without the 4 ms
    // clamp that nested setTimeout(0) gets in browsers
    let channel: MessageChannel | undefined;
    const waiting: (() => void)[] = [];
    return () =>
      new Promise((resolve) => {
        if (channel === undefined) {
          channel = new MessageChannel();
          channel.port1.onmessage = () => waiting.shift()?.();
        }
        waiting.push(resolve);
        channel.port2.postMessage(0);
      });
  }
  return () => new Promise((resolve) => setTimeout(resolve, 0));
}
