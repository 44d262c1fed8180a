import { createRoom, must, replicaStates } from '@shoal/sim/test-room';
import { describe, expect, it } from 'vitest';
import { contributionOf } from './test-wire.ts';

describe('a worker that crashes at a fixed protocol point', () => {
  it('after sending exactly one shard of its contribution: the round commits with the others, the host takes over the shards it cannot check, later rounds commit with the survivors', async () => {
    const deadlineMs = 5_000;
    const room = await createRoom({ workers: 4, deadlineMs, detectionMs: 1_000 });
    const { network, host, workers, clock } = room;
    const victim = must(workers[3]);
    const survivors = workers.slice(0, 3);
    const survivorPeers = survivors.map((w) => w.peer);
    // The crash point: the first shard of w3's contribution to round 2 of fragment 0 that leaves over
    // the wire. w3 owns the last shard (owners are the sorted participants), so that is shard 0, to w0.
    const crashes: { at: number; to: string; shard: number }[] = [];
    network.crashAfterSend(victim.peer, (to, bytes) => {
      const c = contributionOf(bytes);
      if (c?.fragment !== 0 || c.round !== 2) return false;
      crashes.push({ at: clock.now(), to, shard: c.shard });
      return true;
    });
    const results = room.spyResults(room.hostMember);
    const commits = room.spy(room.hostMember, 'commit');
    const opens = room.spy(room.hostMember, 'round-open');
    const reassigns = survivors.map((w) => room.spy(w.member, 'reassign'));
    for (const w of survivors) room.start(w);
    room.start(victim, () => !network.livePeers().includes(victim.peer));
    await room.finish(8_000);

    expect(crashes).toEqual([{ at: expect.any(Number), to: 'w0', shard: 0 }]);
    const crashAt = must(crashes[0]).at;
    expect(network.livePeers()).not.toContain(victim.peer);
    expect(room.events).toContainEqual({ event: 'peer-left', peer: victim.peer, reason: 'crashed' });

    // Round (0, 2) was opened with all four; w3's one shard that left reached its owner w0 only.
    const open02 = must(opens.find((o) => o.message.fragment === 0 && o.message.round === 2)).message;
    expect(open02.participants).toEqual(['w0', 'w1', 'w2', 'w3']);
    const resultOf = (shard: number, from: string) =>
      results.find(
        (r) => r.message.fragment === 0 && r.message.round === 2 && r.message.shard === shard && r.from === from,
      );
    expect(resultOf(0, 'w0')?.message.verdicts.find((v) => v.peer === victim.peer)).toMatchObject({ reason: '' });
    for (const shard of [1, 2]) {
      const owner = open02.shards[shard]?.owner as string;
      expect(resultOf(shard, owner)?.message.verdicts.find((v) => v.peer === victim.peer)).toMatchObject({
        weight: 0,
        reason: 'missing',
      });
    }

    // So shard 0's owner (w0, with w3's Δ) and checker (w1, without) disagree, and w3 owned shard 3
    // and checked shard 2: the host took those three over and rebuilt them from the survivors' kept
    // payloads (reassign to the host), and every replica applied the host's result.
    for (const log of reassigns) {
      const moved = log.filter((r) => r.message.fragment === 0 && r.message.round === 2);
      expect(moved.map((r) => r.message.shard).sort()).toEqual([0, 2, 3]);
      for (const r of moved) expect(r.message.owner).toBe('host');
    }
    for (const shard of [0, 2, 3]) {
      const rebuilt = resultOf(shard, 'host');
      expect(rebuilt?.message.verdicts.filter((v) => v.reason === '').map((v) => v.peer)).toEqual(survivorPeers);
    }

    // The round commits with the three, soon after the crash is detected, not at the owners' deadline.
    const commit02 = commits.find((c) => c.message.fragment === 0 && c.message.round === 2);
    expect(commit02?.message.contributors).toEqual(survivorPeers);
    expect(room.events).toContainEqual(
      expect.objectContaining({ event: 'round-committed', fragment: 0, round: 2, participants: 3 }),
    );
    expect(must(commit02).at - crashAt).toBeLessThan(deadlineMs);
    expect(room.aborted()).toEqual([]);

    // Later rounds name the survivors only and commit with all three.
    const later = opens.filter((o) => o.at > crashAt + 1_000);
    for (const p of [0, 1]) {
      const rounds = later.filter((o) => o.message.fragment === p);
      expect(rounds.length, `fragment ${p} rounds after the crash`).toBeGreaterThanOrEqual(3);
      for (const o of rounds) expect(o.message.participants).toEqual(survivorPeers);
      const committed = commits.filter(
        (c) => c.message.fragment === p && rounds.some((o) => o.message.round === c.message.round),
      );
      expect(committed.length, `fragment ${p} commits after the crash`).toBeGreaterThanOrEqual(3);
      for (const c of committed) expect(c.message.contributors).toEqual(survivorPeers);
    }

    // θ_global of every survivor is the host's, bit for bit (same hashes), and it moved on after the crash.
    const hostStates = host.fragmentStates();
    for (const w of survivors) expect(replicaStates(w.worker)).toEqual(hostStates);
    for (const state of hostStates) expect(state.round).toBeGreaterThanOrEqual(5);
  });
});
