import type { Message, PeerId } from '@shoal/protocol';
import { RoomViewRecorder } from '@shoal/room';
import { createRoom, must, RUN, replicaStates } from '@shoal/sim/test-room';
import { describe, expect, it } from 'vitest';
import { contributionOf } from './test-wire.ts';

describe('a bad contribution', () => {
  it('(NaN scale, wrong length) is refused by the shard owner with a reason, counted, and the round commits', async () => {
    let view: RoomViewRecorder | null = null;
    const room = await createRoom({ workers: 4, onEvent: (event) => view?.onEvent(event) });
    const { network, codec, host, workers, clock } = room;
    view = new RoomViewRecorder({ host, roomId: 'r', hostKind: 'cli', now: () => clock.now() });
    const bad = must(workers[3]);
    // w3 turns hostile in round 2: its shard 0 of fragment 0 gets a NaN block scale, its shard 1 of
    // fragment 1 loses 3 bytes. The forged messages replace the real ones on the wire.
    const forged = new Set<Uint8Array>();
    const forge = (to: PeerId, bytes: Uint8Array, spoil: (payload: Uint8Array) => Uint8Array) => {
      const decoded = codec.decode(bytes);
      if (!decoded.ok || decoded.message.kind !== 'contribution') throw new Error('not a contribution');
      const message: Message = { ...decoded.message, payload: spoil(decoded.message.payload.slice()) };
      const out = codec.encode(message, RUN);
      forged.add(out);
      queueMicrotask(() => void bad.member.transport.send(to, out));
    };
    network.onSend(bad.peer, (to, bytes) => {
      if (forged.has(bytes)) return 'deliver';
      const c = contributionOf(bytes);
      if (c?.round !== 2) return 'deliver';
      if (c.fragment === 0 && c.shard === 0) {
        forge(to, bytes, (payload) => {
          new DataView(payload.buffer).setFloat32(0, Number.NaN, true); // block 0's scale
          return payload;
        });
        return 'drop';
      }
      if (c.fragment === 1 && c.shard === 1) {
        forge(to, bytes, (payload) => payload.subarray(0, payload.length - 3));
        return 'drop';
      }
      return 'deliver';
    });
    const results = room.spyResults(room.hostMember);
    const commits = room.spy(room.hostMember, 'commit');
    const rejected = room.spy(bad.member, 'rejected');
    room.startAll();
    await room.finish(5_000);
    expect(forged.size).toBe(4); // each bad shard went to its owner and its checker

    const cases = [
      { fragment: 0, shard: 0, owner: must(workers[0]), detail: /scale NaN/ },
      { fragment: 1, shard: 1, owner: must(workers[1]), detail: /payload has \d+ bytes, \d+ values need \d+/ },
    ];
    for (const { fragment, shard, owner, detail } of cases) {
      // The owner refused it with a reason and counted it, and told w3 why.
      const refusals = owner.member.counters.recent().filter((r) => r.from === bad.peer && detail.test(r.detail));
      expect(refusals).toEqual([expect.objectContaining({ kind: 'contribution', reason: 'codec' })]);
      expect(rejected.filter((r) => r.from === owner.peer).map((r) => r.message)).toContainEqual(
        expect.objectContaining({ about: 'contribution', reason: 'codec', fragment, round: 2, shard }),
      );
      // Its verdict in that shard's result: weight 0 and the reason; the other three were aggregated.
      const result = results.find(
        (r) => r.message.fragment === fragment && r.message.round === 2 && r.message.shard === shard,
      );
      expect(result?.message.verdicts.find((v) => v.peer === bad.peer)).toMatchObject({ weight: 0, reason: 'codec' });
      expect(result?.message.verdicts.filter((v) => v.reason === '' && v.weight > 0)).toHaveLength(3);
      // Its other shards of that round were fine and counted; and the round committed, soon, with all four replicas agreeing.
      for (const other of results.filter(
        (r) => r.message.fragment === fragment && r.message.round === 2 && r.message.shard !== shard,
      )) {
        expect(other.message.verdicts.find((v) => v.peer === bad.peer)).toMatchObject({ reason: '' });
      }
      const commit = commits.find((c) => c.message.fragment === fragment && c.message.round === 2);
      expect(commit?.message.contributors).toEqual(['w0', 'w1', 'w2', 'w3']);
      expect(must(commit).at - must(result).at).toBeLessThan(200);
    }
    // Owners and checkers refused the two bad shards (w0 owns shard 0; w1 checks it and owns shard
    // 1; w2 checks shard 1), nobody refused anything else; no round aborted; the replicas agree.
    expect(workers.map((w) => w.member.counters.total('codec'))).toEqual([1, 2, 1, 0]);
    expect(workers.map((w) => w.member.counters.total())).toEqual([1, 2, 1, 0]);
    expect(room.hostMember.counters.total()).toBe(0);
    expect(room.aborted()).toEqual([]);
    for (const p of [0, 1]) expect(room.committed().filter((c) => c.fragment === p).length).toBeGreaterThanOrEqual(3);
    const hostStates = host.fragmentStates();
    for (const w of workers) expect(replicaStates(w.worker)).toEqual(hostStates);
    // The host saw no refusal itself, yet its view shows w3's two, by reason (w3's heartbeats
    // carry the owners' answers), and nothing against the others.
    expect(Object.fromEntries(bad.worker.rejectedContributions)).toEqual({ codec: 2 });
    const peers = new Map(view.snapshot().peers.map((p) => [p.peer, p] as const));
    expect(peers.get(bad.peer)?.rejected).toEqual({ codec: 2 });
    for (const w of workers.slice(0, 3)) expect(peers.get(w.peer)?.rejected).toEqual({});
    // its other contributions still count: every committed round names it
    expect(peers.get(bad.peer)?.roundsContributed).toBe(room.committed().length);
    expect(clock.now()).toBe(6_000);
  });
});
