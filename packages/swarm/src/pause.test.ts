import { createRoom, must, replicaStates } from '@shoal/sim/test-room';
import { describe, expect, it } from 'vitest';

describe('pausing', () => {
  it('a paused worker trains no step but stays a member: heartbeats flow, rounds still commit, it resumes', async () => {
    const room = await createRoom({ workers: 3 });
    const heartbeats = room.spy(room.hostMember, 'heartbeat');
    room.startAll();
    await room.clock.runAsync({ until: 2_000 });
    const paused = must(room.workers[2]);
    paused.worker.pause();
    await room.clock.runAsync({ until: 2_500 }); // the step in progress ends
    const stepAtPause = paused.worker.metrics.innerStep;
    const beatsAtPause = heartbeats.filter((h) => h.from === paused.peer).length;
    const committedAtPause = room.host.coordinator.committedRounds;
    await room.clock.runAsync({ until: 6_000 });
    expect(paused.worker.isPaused).toBe(true);
    expect(paused.worker.metrics.innerStep).toBe(stepAtPause);
    expect(heartbeats.filter((h) => h.from === paused.peer).length).toBeGreaterThan(beatsAtPause + 2);
    expect(room.host.coordinator.members.has(paused.peer)).toBe(true);
    expect(room.host.coordinator.committedRounds).toBeGreaterThan(committedAtPause + 2);
    paused.worker.resume();
    await room.finish(8_000);
    expect(paused.worker.metrics.innerStep).toBeGreaterThan(stepAtPause + 5);
    const hostStates = room.host.fragmentStates();
    for (const w of room.workers) expect(replicaStates(w.worker)).toEqual(hostStates);
  });

  it('a paused coordinator opens no rounds; rounds resume when it is cleared', async () => {
    const room = await createRoom({ workers: 2 });
    room.host.coordinator.paused = true;
    room.startAll();
    await room.clock.runAsync({ until: 6_000 });
    expect(room.host.fragmentStates().every((f) => f.round === 0)).toBe(true);
    expect(room.aborted()).toEqual([]);
    // the workers waited where their first round was due (H = 10 steps of 100 ms), then, none
    // coming for three heartbeats (of 200 ms), trained on, no longer waiting for any fragment
    for (const { worker } of room.workers) {
      expect(worker.metrics.overdueExcused).toBe(1);
      expect(worker.metrics.stalledMs).toBeGreaterThanOrEqual(600);
      expect(worker.metrics.stalledMs).toBeLessThan(700);
      expect(worker.metrics.innerStep).toBeGreaterThanOrEqual(50);
    }
    room.host.coordinator.paused = false;
    await room.finish(9_000);
    expect(room.host.coordinator.committedRounds).toBeGreaterThan(2);
  });
});
