/**
 * How busy a volunteer's engine is: the share of wall time in which a training step was in
 * progress, over the last `windowMs`. Steps that overlap (a GPU queue) count once: the meter keeps
 * the union of their intervals. What the volunteer page shows beside the duty cycle it asked for.
 */
export class BusyMeter {
  /** Steps in progress now. */
  private running = 0;
  /** When the current busy stretch began (running > 0). */
  private since = 0;
  /** Busy ms before the current stretch. */
  private busyMs = 0;
  /** (time, busy ms by then) samples, oldest first: the window's start is the oldest kept. */
  private readonly samples: [number, number][] = [];

  constructor(
    private readonly now: () => number = () => performance.now(),
    private readonly windowMs = 10_000,
  ) {
    this.samples.push([now(), 0]);
  }

  /** Runs `work` as a busy stretch. */
  async time<T>(work: () => Promise<T>): Promise<T> {
    if (this.running++ === 0) this.since = this.now();
    try {
      return await work();
    } finally {
      if (--this.running === 0) this.busyMs += this.now() - this.since;
    }
  }

  private busyBy(at: number): number {
    return this.busyMs + (this.running > 0 ? at - this.since : 0);
  }

  /** The busy share (0 … 1) over about the last windowMs; null before any time has passed. */
  fraction(): number | null {
    const at = this.now();
    const busy = this.busyBy(at);
    this.samples.push([at, busy]);
    // keep the newest sample at least windowMs old as the window's start
    while (this.samples.length > 2 && at - (this.samples[1] as [number, number])[0] >= this.windowMs) {
      this.samples.shift();
    }
    const [from, busyThen] = this.samples[0] as [number, number];
    const elapsed = at - from;
    return elapsed > 0 ? Math.min(1, Math.max(0, (busy - busyThen) / elapsed)) : null;
  }
}
