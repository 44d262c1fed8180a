import { createRoom, must, replicaStates } from '@shoal/sim/test-room';
import { describe, expect, it } from 'vitest';

describe('a replica whose θ_global went wrong', () => {
  it('is outvoted, marked diverged, refetches its fragment and agrees again', async () => {
    const room = await createRoom({ workers: 3 });
    const { clock, host, hostMember, workers } = room;
    const requests = room.spy(hostMember, 'state-request');
    room.startAll();
    await clock.runAsync({ until: 2_500 });
    const w2 = must(workers[2]);
    const state = must(w2.worker.replica).state.fragment(0);
    expect(state.round).toBeGreaterThanOrEqual(1);
    // A flipped value (a bad memory cell, a bug): its stored hash still says all is well.
    state.theta[17] = (state.theta[17] as number) + 0.5;
    const corruptedAt = clock.now();
    await room.finish(9_000);

    const commits = room.committed().filter((c) => c.fragment === 0);
    expect(room.aborted()).toEqual([]);
    // The first fragment-0 round after the corruption commits on the two healthy workers' hash;
    // w2 finds its hash outvoted and fetches fragment 0 from the host.
    const refetches = requests.filter((r) => r.from === 'w2' && r.message.fragment === 0 && r.at > corruptedAt);
    expect(refetches.length).toBeGreaterThanOrEqual(1);
    expect(commits.some((c) => c.participants === 2)).toBe(true);
    // Repaired: its replica holds exactly the host's state again, and it contributed afterwards.
    expect(replicaStates(w2.worker)).toEqual(host.fragmentStates());
    expect(commits.at(-1)?.participants).toBe(3);
    expect(w2.worker.isSynced).toBe(true);
  });
});
