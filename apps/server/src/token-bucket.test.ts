import { describe, expect, it } from 'vitest';
import { TokenBucket } from './token-bucket.ts';

describe('TokenBucket', () => {
  it('spends the burst, then refills at the rate, never above the burst', () => {
    let now = 0;
    const bucket = new TokenBucket(10, 3, () => now);
    expect([bucket.take(), bucket.take(), bucket.take(), bucket.take()]).toEqual([true, true, true, false]);
    now = 100; // 0.1 s at 10/s: one token
    expect([bucket.take(), bucket.take()]).toEqual([true, false]);
    now = 60_000;
    expect(bucket.take(3)).toBe(true);
    expect(bucket.take()).toBe(false);
  });

  it('spends into debt while anything is saved, and then waits for the debt to be repaid', () => {
    let now = 0;
    const bytes = new TokenBucket(100, 1000, () => now);
    expect(bytes.spend(5000)).toBe(true); // larger than the burst: goes out once, 4000 in debt
    expect(bytes.spend(1)).toBe(false);
    now = 40_000; // 4000 repaid at 100/s: at zero, still nothing to spend
    expect(bytes.spend(1)).toBe(false);
    now = 40_010;
    expect(bytes.spend(1)).toBe(true);
    now = 1_000_000;
    expect(bytes.full).toBe(true);
  });

  it('refuses a cost larger than what is saved without taking anything', () => {
    let now = 0;
    const bucket = new TokenBucket(1, 5, () => now);
    expect(bucket.take(6)).toBe(false);
    expect(bucket.take(5)).toBe(true);
    now = 1000;
    expect(bucket.take()).toBe(true);
  });
});
