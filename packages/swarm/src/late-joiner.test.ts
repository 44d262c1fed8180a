import type { CommitMessage } from '@shoal/protocol';
import { createRoom, must, replicaStates } from '@shoal/sim/test-room';
import { describe, expect, it } from 'vitest';

/**
 * 3 workers train from t = 0 (H = 10 steps of 100 ms, P = 2: a commit every 0.5 s); a 4th joins at
 * `joinAt` and the room runs 4 s more. Checks what every late join must give, and returns the record.
 */
async function lateJoin(joinAt: number) {
  const room = await createRoom({ workers: 3 });
  const { host, clock } = room;
  const results = room.spyResults(room.hostMember);
  const commits = room.spy(room.hostMember, 'commit');
  const opens = room.spy(room.hostMember, 'round-open');
  const hellos = room.spy(room.hostMember, 'hello');
  room.startAll();
  await clock.runAsync({ until: joinAt });
  expect(commits.length).toBeGreaterThanOrEqual(4);
  expect(host.fragmentStates().every((f) => f.round >= 2)).toBe(true);

  const joiner = room.addWorker();
  const requests = room.spy(room.hostMember, 'state-request');
  const transfers = room.spy(joiner.member, 'state-transfer');
  // What the joiner's replica holds as each commit reaches it (registered after the replica's own handler).
  const seen: { commit: CommitMessage; held: { round: number; hash: string } }[] = [];
  joiner.running = joiner.worker.join().then(() => {
    joiner.member.on('commit', (_from, commit) => {
      const { round, hash } = must(joiner.worker.replica).state.fragment(commit.fragment);
      seen.push({ commit, held: { round, hash } });
    });
    return joiner.worker.run();
  });
  await room.finish(joinAt + 4_000);

  // It joined a room whose θ_global had moved: it fetched every fragment (θ and m) from the host.
  expect(room.events).toContainEqual({ event: 'peer-joined', peer: joiner.peer });
  expect(requests.every((r) => r.from === joiner.peer)).toBe(true);
  expect(new Set(requests.map((r) => r.message.fragment))).toEqual(new Set([0, 1]));
  expect(transfers.every((t) => t.from === 'host' && t.message.round >= 2)).toBe(true);

  // Its first round as a participant: after that commit its replica holds exactly the committed state.
  const named = opens.filter((o) => o.message.participants.includes(joiner.peer));
  expect(named.length).toBeGreaterThanOrEqual(6);
  const { fragment, round } = must(named[0]).message;
  expect(must(named[0]).at - joinAt).toBeLessThan(1_500);
  const first = seen.find((s) => s.commit.fragment === fragment && s.commit.round === round);
  expect(first?.commit.contributors).toContain(joiner.peer);
  expect(first?.held).toEqual({ round, hash: first?.commit.hash });

  // It contributes: its tokens weigh in every shard of every committed round it is named in.
  for (const o of named) {
    const { fragment: p, round: r } = o.message;
    const commit = commits.find((c) => c.message.fragment === p && c.message.round === r);
    if (!commit) continue; // still open when the run stopped
    expect(commit.message.contributors).toContain(joiner.peer);
    const verdicts = results
      .filter((x) => x.message.fragment === p && x.message.round === r)
      .map((x) => x.message.verdicts.find((v) => v.peer === joiner.peer));
    expect(verdicts).toHaveLength(4);
    for (const v of verdicts) expect(v).toMatchObject({ reason: '', weight: expect.any(Number) });
    for (const v of verdicts) expect(v?.weight).toBeGreaterThan(0);
  }
  expect(joiner.worker.metrics.contributions).toBeGreaterThanOrEqual(6);
  expect(room.aborted()).toEqual([]);

  // In the end all four replicas are the host's, bit for bit.
  const hostStates = host.fragmentStates();
  for (const w of room.workers) expect(replicaStates(w.worker)).toEqual(hostStates);
  expect(joiner.member.counters.recent()).toEqual([]);
  return { room, joiner, requests, transfers, hellos: hellos.filter((h) => h.from === joiner.peer) };
}

describe('a worker that joins late', () => {
  it('between rounds: fetches θ_global and m from the host, matches its hash after its first round as a participant, and contributes', async () => {
    const { requests, transfers, hellos } = await lateJoin(3_100);
    expect(requests).toHaveLength(2);
    expect(transfers).toHaveLength(2);
    expect(hellos.map((h) => h.message.holds.length)).toEqual([0, 2]);
  });

  it('while a round is open: a commit overtakes its state transfer, it fetches that fragment again, then matches and contributes', async () => {
    const { requests, transfers, hellos } = await lateJoin(3_250);
    // Fragment 0 was served at round 2 while round 3 was committing: fetched again, at round 3.
    expect(requests.map((r) => r.message.fragment)).toEqual([0, 1, 0]);
    expect(transfers.filter((t) => t.message.fragment === 0).map((t) => t.message.round)).toEqual([2, 3]);
    // Its hello after the first transfers crossed that commit; it says hello again as it finds
    // itself behind (so the coordinator counts it as syncing, not as a participant that failed);
    // the one after the second fetch holds the room's state.
    expect(hellos).toHaveLength(4);
    expect(hellos[1]?.message.holds[0]?.round).toBe(2);
    expect(hellos[2]?.message.holds[0]?.round).toBe(2);
    expect(hellos[3]?.message.holds[0]?.round).toBe(3);
  });
});
