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
    const now = this.now();
    this.tokens = Math.min(this.burst, this.tokens + ((now - this.last) / 1000) * this.rate);
    this.last = now;
    if (this.tokens < cost) return false;
    this.tokens -= cost;
    return true;
  }
}
