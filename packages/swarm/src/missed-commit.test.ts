/**
 * A worker whose replica missed a commit. Over WebRTC on a loaded machine this happened to a
 * worker that joined while round 1 of fragment 0 was in flight: the commit reached it while its
 * replica was still being built (Worker.start awaits the hasher) and was lost, so its θ_global[0]
 * stayed at round 0 while it believed itself synced. Here the host's send hook drops that commit,
 * which leaves the worker in the same state.
 */
import { HEADER_OFFSETS, MESSAGE_SPECS } from '@shoal/protocol';
import { createRoom, must, replicaStates } from '@shoal/sim/test-room';
import { describe, expect, it } from 'vitest';

/** The (fragment, round) of a commit's wire bytes, or null for any other kind. */
function commitOf(bytes: Uint8Array): { fragment: number; round: number } | null {
  if (bytes[HEADER_OFFSETS.kind] !== MESSAGE_SPECS.commit.id) return null;
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  return { round: view.getUint32(HEADER_OFFSETS.round, true), fragment: view.getUint16(HEADER_OFFSETS.fragment, true) };
}

/** A room of 3 whose host never delivers the commit of round 1 of fragment 0 to w2. */
async function roomMissingACommit() {
  const room = await createRoom({ workers: 3, deadlineMs: 5_000 });
  const dropped: number[] = [];
  room.network.onSend('host', (to, bytes) => {
    const commit = commitOf(bytes);
    if (to !== 'w2' || commit?.fragment !== 0 || commit.round !== 1) return 'deliver';
    dropped.push(room.clock.now());
    return 'drop';
  });
  const opens = room.spy(room.hostMember, 'round-open');
  return {
    ...room,
    opens,
    w2: must(room.workers[2]),
    dropped,
    requests: room.spy(room.hostMember, 'state-request'),
    reports: room.spy(room.hostMember, 'hash-report'),
    results: room.spyResults(room.hostMember),
    commit: (p: number, round: number) => room.committed().find((c) => c.fragment === p && c.round === round),
    openedAt: (p: number, round: number) =>
      must(opens.find((o) => o.message.fragment === p && o.message.round === round)).at,
  };
}

describe('a worker whose replica missed a commit', () => {
  it('told by a welcome that it is behind, fetches the fragment at once and contributes to its next round', async () => {
    const room = await roomMissingACommit();
    const { clock, w2 } = room;
    // w2 joins while round 1 of fragment 0 is in flight: it is no part of that round
    for (const w of room.workers.slice(0, 2)) room.start(w);
    await clock.runAsync({ until: 3_000, stopWhen: () => room.opens.some((o) => o.message.fragment === 0) });
    room.start(w2);
    await clock.runAsync({ until: 3_000, stopWhen: () => room.dropped.length > 0 });
    expect(room.dropped).toHaveLength(1);
    expect(must(w2.worker.replica).state.fragment(0).round).toBe(0);
    // the hello its start sends once its engine is built, which came after the lost commit
    void (w2.worker as unknown as { hello(): Promise<void> }).hello();
    await room.finish(8_000);

    // The host answered that hello with a welcome naming its state: w2 fetched fragment 0 then,
    // before round 2 of fragment 0 opened, not when that open found its base missing.
    const fetched = room.requests.filter(
      (r) => r.from === w2.peer && r.message.fragment === 0 && r.message.start === 0,
    );
    expect(fetched.length).toBeGreaterThanOrEqual(1);
    expect(must(fetched[0]).at).toBeLessThan(room.openedAt(0, 2));
    // So it took part in round 2 like the others: the round committed with all three, long before
    // the owners' deadline.
    const commit02 = must(room.commit(0, 2));
    expect(commit02.contributors).toContain(w2.peer);
    expect(room.aborted()).toEqual([]);
    expect(replicaStates(w2.worker)).toEqual(room.host.fragmentStates());
  });

  it('found behind by a round-open it is named in, follows that round once its state is in: one round without it, not two', async () => {
    const room = await roomMissingACommit();
    const { w2 } = room;
    room.startAll();
    await room.finish(16_000);
    expect(room.dropped).toHaveLength(1);

    // Round 2's base is the commit w2 missed: it fetched fragment 0 once, and contributed nothing to round 2.
    const fetched = room.requests.filter(
      (r) => r.from === w2.peer && r.message.fragment === 0 && r.message.start === 0,
    );
    expect(fetched).toHaveLength(1);
    const shards02 = room.results.filter((r) => r.message.fragment === 0 && r.message.round === 2);
    expect(shards02.length).toBeGreaterThan(0);
    for (const r of shards02) {
      expect(r.message.verdicts.find((v) => v.peer === w2.peer)).toMatchObject({ reason: 'missing' });
    }
    const commit02 = must(room.commit(0, 2));
    // Its replica followed round 2 once the state was in: it reported round 2's hash, the host's
    // (so it counts among the commit's agreeing replicas, and the round did not wait out the grace
    // for it), and the commit found it current.
    const report = room.reports.find((r) => r.from === w2.peer && r.message.fragment === 0 && r.message.round === 2);
    expect(report?.message.hash).toBe(commit02.hash);
    // Round 3 commits with all three.
    expect(must(room.commit(0, 3)).contributors).toContain(w2.peer);
    expect(room.aborted()).toEqual([]);
    expect(replicaStates(w2.worker)).toEqual(room.host.fragmentStates());
  });
});
