import { createRoom, must } from '@shoal/sim/test-room';
import { describe, expect, it } from 'vitest';

describe('a worker that leaves on purpose mid-round (a volunteer closing the tab)', () => {
  it('its round commits with the others, it is not named again, and it does not come back', async () => {
    const deadlineMs = 5_000;
    const room = await createRoom({ workers: 2, deadlineMs, detectionMs: 1_000 });
    const { network, workers, clock } = room;
    const leaver = must(workers[1]);
    const opens = room.spy(must(workers[0]).member, 'round-open');
    const commits = room.spy(room.hostMember, 'commit');
    let leftAt = 0;
    // As round (1, 2) opens, before it contributes: what the volunteer page does on pagehide (stop,
    // say leave to every peer, drop its state, so the shard it owns is never aggregated by it); its
    // channels stay up until the page is gone (here 20 s later). The other worker hears of the new
    // owner of that shard while the round is still pending at its side (mid-step).
    leaver.member.on('round-open', (_from, message) => {
      if (leftAt || message.fragment !== 1 || message.round !== 2) return;
      leftAt = clock.now();
      leaver.worker.stop();
      leaver.worker.destroy();
      void leaver.member.broadcast(leaver.member.transport.peers(), { kind: 'leave', reason: 'left the page' });
      clock.schedule(20_000, () => network.crash(leaver.peer));
    });
    room.startAll();
    await room.finish(30_000);
    expect(leftAt).toBeGreaterThan(0);
    const ended = must(
      room.events.find(
        (e) => (e.event === 'round-committed' || e.event === 'round-aborted') && e.fragment === 1 && e.round === 2,
      ),
    );
    expect(ended).toMatchObject({ event: 'round-committed', contributors: ['w0'] });
    const endedAt = must(commits.find((c) => c.message.fragment === 1 && c.message.round === 2)).at;
    // soon after the leave: neither an owner's deadline nor the coordinator's (2 × deadline)
    expect(endedAt - leftAt).toBeLessThan(1_000);
    // it left once and stayed gone: a heartbeat refused after its leave did not make it say hello again
    expect(room.events.filter((e) => e.event === 'peer-joined' && e.peer === leaver.peer)).toHaveLength(1);
    expect(room.events).toContainEqual({ event: 'peer-left', peer: leaver.peer, reason: 'left the page' });
    // the room went on with the other worker, round after round
    const later = opens.filter((o) => o.at > leftAt + deadlineMs);
    expect(later.length).toBeGreaterThan(10);
    for (const o of later) expect(o.message.participants).toEqual(['w0']);
  });
});
