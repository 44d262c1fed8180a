import { createRoom, must, replicaStates } from '@shoal/sim/test-room';
import { describe, expect, it } from 'vitest';

describe('workers that cannot reach each other', () => {
  it('are not named together in a round: rounds commit without them, and they rejoin once healed', async () => {
    const room = await createRoom({ workers: 3, deadlineMs: 2_000, unreachableHint: ' (no TURN server)' });
    const rosters = room.spy(must(room.workers[0]).member, 'roster');
    room.network.partition('w1', 'w2');
    room.startAll();
    await room.clock.runAsync({ until: 6_000 });
    const partitioned = room.committed();
    expect(partitioned.length).toBeGreaterThanOrEqual(6);
    expect(room.aborted()).toEqual([]);
    // w2 sorts after w1 and cannot reach it: rounds run on w0 and w1, and the roster says why.
    for (const c of partitioned) expect(c).toMatchObject({ participants: 2 });
    const w2 = rosters.at(-1)?.message.members.find((m) => m.peer === 'w2');
    expect(w2?.reason).toBe('no channel to w1 (no TURN server)');

    room.network.heal('w1', 'w2');
    await room.finish(12_000);
    const healed = room.committed().slice(partitioned.length);
    expect(healed.some((c) => c.participants === 3)).toBe(true);
    expect(room.aborted()).toEqual([]);
    for (const w of room.workers) expect(replicaStates(w.worker)).toEqual(room.host.fragmentStates());
  });
});
