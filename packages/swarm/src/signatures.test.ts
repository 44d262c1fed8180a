import {
  createIdentity,
  type Message,
  type PeerId,
  type SignedMessage,
  signedBytesOf,
  verifySignature,
} from '@shoal/protocol';
import { createRoom, must, RUN, replicaStates, type TestRoom } from '@shoal/sim/test-room';
import { describe, expect, it } from 'vitest';

const SIGNED = new Set(['contribution', 'shard-result', 'hash-report']);

/** Every signed kind each worker puts on the wire, decoded (the host's too). */
function recordSigned(room: TestRoom): { from: PeerId; message: SignedMessage }[] {
  const log: { from: PeerId; message: SignedMessage }[] = [];
  for (const peer of ['host', ...room.workers.map((w) => w.peer)]) {
    room.network.onSend(peer, (_to, bytes) => {
      const decoded = room.codec.decode(bytes);
      if (decoded.ok && SIGNED.has(decoded.message.kind))
        log.push({ from: peer, message: decoded.message as SignedMessage });
      return 'deliver';
    });
  }
  return log;
}

describe('signed messages in a room', () => {
  it.each(['Ed25519', 'ECDSA-P256'] as const)(
    '%s: every contribution, shard result and hash report is signed by its sender, and the run is the one without keys',
    async (algorithm) => {
      const plain = await createRoom({ workers: 3 });
      plain.startAll();
      await plain.finish(3_000);

      const room = await createRoom({ workers: 3, identities: algorithm });
      const sent = recordSigned(room);
      room.startAll();
      await room.finish(3_000);

      // Each kind went out signed, and each signature is its sender's over what it sent.
      expect(new Set(sent.map((s) => s.message.kind))).toEqual(SIGNED);
      for (const { from, message } of sent) {
        const bytes = await signedBytesOf(RUN, from, message);
        const key = must(room.identities.get(from)).key;
        expect(await verifySignature(key, bytes, must(message.signature, `${message.kind} signature`))).toBe(true);
      }
      // Nobody refused anything, and signing cost no virtual time: the same commits, hashes and states.
      for (const member of [room.hostMember, ...room.workers.map((w) => w.member)]) {
        expect(member.counters.byReason()).toEqual({});
      }
      expect(room.committed().length).toBeGreaterThanOrEqual(4);
      expect(room.committed()).toEqual(plain.committed());
      expect(room.host.fragmentStates()).toEqual(plain.host.fragmentStates());
      for (const w of room.workers) expect(replicaStates(w.worker)).toEqual(room.host.fragmentStates());
    },
  );

  it('refuses and counts a forged contribution (right peer id, wrong key) and a tampered shard result; the rounds commit', async () => {
    // Owners wait for a refused contribution until their deadline, as for one that never came.
    const room = await createRoom({ workers: 4, identities: 'Ed25519', deadlineMs: 2_000 });
    const { network, codec, workers } = room;
    const [w0, w1, w2, w3] = [0, 1, 2, 3].map((i) => must(workers[i]));
    if (!w0 || !w1 || !w2 || !w3) throw new Error('four workers');
    const impostor = await createIdentity({ algorithm: 'Ed25519' });
    const forged = new Set<Uint8Array>();
    const sendForged = (from: PeerId, to: PeerId, message: Message) => {
      const bytes = codec.encode(message, RUN);
      forged.add(bytes);
      queueMicrotask(() => void network.transport(from)?.send(to, bytes));
    };
    // Someone holding w3's peer id but not its key: in round 2, w3's shard 0 of fragment 0 is
    // replaced by 100× its values, signed correctly for w3's id but with the impostor's key.
    network.onSend(w3.peer, (to, bytes) => {
      if (forged.has(bytes)) return 'deliver';
      const decoded = codec.decode(bytes);
      if (!decoded.ok || decoded.message.kind !== 'contribution') return 'deliver';
      const { message } = decoded;
      if (message.round !== 2 || message.fragment !== 0 || message.shard !== 0) return 'deliver';
      void (async () => {
        const payload = message.payload.slice();
        const values = new Float32Array(payload.buffer, 0, Math.floor(payload.length / 4));
        for (let i = 0; i < values.length; i++) values[i] = (values[i] ?? 0) * 100;
        const spoiled = { ...message, payload };
        const signature = await impostor.sign(await signedBytesOf(RUN, w3.peer, spoiled));
        sendForged(w3.peer, to, { ...spoiled, signature });
      })();
      return 'drop';
    });
    // Between w1 and w2 only, w1's result for its shard 1 of fragment 1 in round 2 has one payload
    // byte flipped; its signature is left as w1 made it.
    network.onSend(w1.peer, (to, bytes) => {
      if (forged.has(bytes) || to !== w2.peer) return 'deliver';
      const decoded = codec.decode(bytes);
      if (!decoded.ok || decoded.message.kind !== 'shard-result' || decoded.message.check) return 'deliver';
      const { message } = decoded;
      if (message.round !== 2 || message.fragment !== 1 || message.shard !== 1) return 'deliver';
      const payload = message.payload.slice();
      payload[payload.length - 1] = (payload[payload.length - 1] ?? 0) ^ 0x40;
      sendForged(w1.peer, to, { ...message, payload });
      return 'drop';
    });
    const ownerContributions = room.spy(w0.member, 'contribution');
    const w2Results = room.spyResults(w2.member);
    const hostResults = room.spyResults(room.hostMember);
    const toW3 = room.spy(w3.member, 'rejected');
    room.startAll();
    await room.finish(8_000);
    expect(forged.size).toBe(3); // w3's shard to its owner (w0) and checker (w1); w1's result to w2

    // The forged shard: refused by its owner and its checker as 'signature', counted, told to w3,
    // and never handed to the owner's aggregation.
    for (const aggregator of [w0, w1]) {
      expect(aggregator.member.counters.recent().filter((r) => r.from === w3.peer && r.reason === 'signature')).toEqual(
        [expect.objectContaining({ kind: 'contribution', detail: expect.stringMatching(/does not verify/) })],
      );
    }
    expect(toW3.map((r) => r.message)).toContainEqual(
      expect.objectContaining({ about: 'contribution', reason: 'signature', fragment: 0, round: 2, shard: 0 }),
    );
    expect(
      ownerContributions.filter(
        (c) => c.from === w3.peer && c.message.fragment === 0 && c.message.round === 2 && c.message.shard === 0,
      ),
    ).toEqual([]);
    // The tampered result: refused by w2 alone, never applied there.
    expect(w2.member.counters.recent().filter((r) => r.reason === 'signature')).toEqual([
      expect.objectContaining({
        from: w1.peer,
        kind: 'shard-result',
        detail: expect.stringMatching(/does not verify/),
      }),
    ]);
    expect(w2Results.filter((r) => r.from === w1.peer && r.message.fragment === 1 && r.message.round === 2)).toEqual(
      [],
    );
    // Nothing else was refused anywhere, for a signature or otherwise.
    const signatureRefusals = [room.hostMember, ...workers.map((w) => w.member)].map((m) =>
      m.counters.total('signature'),
    );
    expect(signatureRefusals).toEqual([0, 1, 1, 1, 0]);
    // The aggregate of that shard left w3 out (its real shard never reached the owner).
    const shard0 = must(
      hostResults.find((r) => r.message.fragment === 0 && r.message.round === 2 && r.message.shard === 0),
      'the result of shard 0, fragment 0, round 2',
    );
    expect(shard0.message.verdicts.find((v) => v.peer === w3.peer)).toMatchObject({ weight: 0 });
    expect(shard0.message.verdicts.filter((v) => v.reason === '' && v.weight > 0).map((v) => v.peer)).toEqual([
      w0.peer,
      w1.peer,
      w2.peer,
    ]);
    // Round 2 of both fragments committed, and the replicas that followed every round agree with the host.
    const committed = room.committed();
    for (const fragment of [0, 1]) {
      expect(committed.some((c) => c.fragment === fragment && c.round === 2)).toBe(true);
    }
    expect(committed.length).toBeGreaterThanOrEqual(6);
    expect(room.aborted()).toEqual([]);
    const hostStates = room.host.fragmentStates();
    for (const w of [w0, w1, w3]) expect(replicaStates(w.worker)).toEqual(hostStates);
  });
});
