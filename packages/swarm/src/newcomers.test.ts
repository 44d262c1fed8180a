import { createRoom } from '@shoal/sim/test-room';
import { describe, expect, it } from 'vitest';

describe('workers that join a room that has trained for a while', () => {
  it('do not hold its rounds back: the schedule counts their steps from where the room stands', async () => {
    const room = await createRoom({ workers: 2 });
    const { clock } = room;
    room.startAll();
    await clock.runAsync({ until: 4_000 }); // 40 steps of 100 ms: 3 rounds of H = 10 per fragment
    const before = room.committed().length;
    expect(before).toBeGreaterThanOrEqual(6);
    // two newcomers: with them, half the synced workers are at step 0 of their own
    for (const joiner of [room.addWorker(), room.addWorker()]) {
      joiner.running = joiner.worker.join().then(() => joiner.worker.run());
    }
    await room.finish(7_000);
    const after = room.committed().filter((_, i) => i >= before);
    // rounds go on at the room's pace (6 commits in its first 4 s), not once the newcomers have
    // caught up the veterans' 40 steps (2 commits in these 3 s when they counted from 0)
    expect(after.length).toBeGreaterThanOrEqual(4);
    expect(after.some((c) => c.participants === 4)).toBe(true);
    expect(room.aborted()).toEqual([]);
  });
});
