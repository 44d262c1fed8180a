import { describe, expect, it } from 'vitest';
import { roundOpenBody, shardRanges, shardTableProblem } from './round-open.ts';

describe('shardRanges', () => {
  it('covers the fragment with block-aligned shards that differ by at most one block', () => {
    for (const [size, block, count] of [
      [1000, 64, 3],
      [64, 64, 4],
      [65, 64, 4],
      [10_000_019, 128, 7],
      [5, 1, 5],
      [123_457, 1, 4],
    ] as const) {
      const ranges = shardRanges(size, block, count);
      expect(ranges.length).toBe(Math.min(count, Math.ceil(size / block)));
      expect(ranges[0]?.start).toBe(0);
      expect(ranges.at(-1)?.end).toBe(size);
      for (const [k, r] of ranges.entries()) {
        expect(r.start % block).toBe(0);
        expect(r.end).toBeGreaterThan(r.start);
        if (k > 0) expect(r.start).toBe(ranges[k - 1]?.end);
      }
      const blocks = ranges.map((r) => Math.ceil((r.end - r.start) / block));
      expect(Math.max(...blocks) - Math.min(...blocks)).toBeLessThanOrEqual(1);
      const owners = ranges.map((_, k) => `p${k}`);
      const table = ranges.map((r, k) => ({ ...r, owner: owners[k] as string }));
      expect(shardTableProblem(table, owners, size, block)).toBeNull();
    }
  });

  it('gives fewer shards than participants when the fragment has fewer blocks', () => {
    expect(shardRanges(100, 64, 8)).toEqual([
      { start: 0, end: 64 },
      { start: 64, end: 100 },
    ]);
  });

  it('refuses nonsense', () => {
    expect(() => shardRanges(0, 64, 2)).toThrow(/fragmentSize/);
    expect(() => shardRanges(10, 0, 2)).toThrow(/blockSize/);
    expect(() => shardRanges(10, 2, 1.5)).toThrow(/count/);
  });
});

describe('roundOpenBody', () => {
  const body = {
    participants: ['a', 'b'],
    shards: [
      { owner: 'a', checker: 'b', start: 0, end: 64 },
      { owner: 'b', checker: 'a', start: 64, end: 100 },
    ],
    fragmentSize: 100,
    blockSize: 64,
    deadlineMs: 60_000,
    roomTokens: 0,
    baseHash: '0'.repeat(64),
    maxWeight: 1024,
  };

  it('takes one step time per participant, positive, or none', () => {
    expect(roundOpenBody.safeParse(body).success).toBe(true);
    expect(roundOpenBody.safeParse({ ...body, stepMs: [100, 500] }).success).toBe(true);
    expect(roundOpenBody.safeParse({ ...body, stepMs: [100] }).success).toBe(false);
    expect(roundOpenBody.safeParse({ ...body, stepMs: [100, 0] }).success).toBe(false);
    expect(roundOpenBody.safeParse({ ...body, stepMs: [100, Number.POSITIVE_INFINITY] }).success).toBe(false);
  });
});
