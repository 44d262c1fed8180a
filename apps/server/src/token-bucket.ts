/**
 * A token bucket: `rate` tokens a second, at most `burst` saved up. Starts full, so a client may
 * spend its burst at once (a joiner's first offers and ICE candidates) and then its rate.
 */
export class TokenBucket {
  private tokens: number;
  private last: number;

  constructor(
    private readonly rate: number,
    private readonly burst: number,
    private readonly now: () => number = Date.now,
  ) {
    this.tokens = burst;
    this.last = now();
  }

  /** Takes `cost` tokens if there are that many; false (and nothing taken) otherwise. */
  take(cost = 1): boolean {
    if (this.available() < cost) return false;
    this.tokens -= cost;
    return true;
  }

  /**
   * Takes `cost` tokens whenever any are left, going into debt for the rest; false (nothing
   * taken) when the bucket is empty or in debt. For byte budgets: a frame larger than the burst
   * still goes out once saved up for, and the debt keeps the average at the rate.
   */
  spend(cost: number): boolean {
    if (this.available() <= 0) return false;
    this.tokens -= cost;
    return true;
  }

  /** Tokens saved up now (negative while in debt). */
  available(): number {
    const now = this.now();
    this.tokens = Math.min(this.burst, this.tokens + ((now - this.last) / 1000) * this.rate);
    this.last = now;
    return this.tokens;
  }

  /** True when the bucket has refilled to its burst: forgetting it would give nothing away. */
  get full(): boolean {
    return this.available() >= this.burst;
  }
}
