import { describe, expect, it } from 'vitest';
import { backoffDelay, memberEntry, RECONNECT_BACKOFF } from './reconnect.ts';

describe('reconnect backoff', () => {
  it('doubles from 0.5 s to at most 15 s, each delay between half and all of it', () => {
    const top = () => 0.999_999;
    expect([1, 2, 3, 4, 5, 6, 7, 12].map((n) => backoffDelay(n, RECONNECT_BACKOFF, top))).toEqual([
      500, 1000, 2000, 4000, 8000, 15_000, 15_000, 15_000,
    ]);
    expect(backoffDelay(3, RECONNECT_BACKOFF, () => 0)).toBe(1000);
    const spread = new Set(Array.from({ length: 50 }, () => backoffDelay(4)));
    expect(spread.size).toBeGreaterThan(10); // jitter: reconnecting clients do not all come at once
    for (const delay of spread) expect(delay).toBeGreaterThanOrEqual(2000);
  });

  it('has no way back in for a member an older server gave no secret', () => {
    const joined = {
      kind: 'joined' as const,
      roomId: 'r',
      peerId: 'p',
      hostId: 'h',
      hostPresent: true,
      peers: [],
      iceServers: [],
      limits: { maxFrameBytes: 1, messagesPerSecond: 1, messageBurst: 1, maxPeersPerRoom: 2 },
    };
    expect(memberEntry(joined)).toBeNull();
    expect(memberEntry({ ...joined, memberSecret: 's' })).toEqual({
      role: 'member',
      roomId: 'r',
      peerId: 'p',
      memberSecret: 's',
    });
    // with the join token, a member whose secret the server no longer knows joins anew
    expect(memberEntry({ ...joined, memberSecret: 's' }, 't')).toEqual({
      role: 'member',
      roomId: 'r',
      peerId: 'p',
      memberSecret: 's',
      joinToken: 't',
    });
  });
});
