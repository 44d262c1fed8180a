import {
  createIdentity,
  createWireCodec,
  type Identity,
  type Message,
  type MessageKind,
  type PeerId,
  PeerKeyRegistry,
  signedBytesOf,
  type Transport,
  TransportEmitter,
} from '@shoal/protocol';
import { SAMPLES } from '@shoal/protocol/test-fixtures';
import { SimNetwork, VirtualClock } from '@shoal/sim';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { Member, type MemberOptions, wallClock } from './member.ts';

const RUN = 5;
const codec = await createWireCodec();
const [aliceKeys, bobKeys, malloryKeys] = await Promise.all([
  createIdentity({ algorithm: 'Ed25519' }),
  createIdentity({ algorithm: 'ECDSA-P256' }),
  createIdentity({ algorithm: 'Ed25519' }),
]);
if (!aliceKeys || !bobKeys || !malloryKeys) throw new Error('three identities');

/** Alice and Bob on a simulated link, up; both bound in one registry (the server's part) unless told otherwise. */
async function pair(
  options: { alice?: MemberOptions; bob?: MemberOptions; bind?: Record<PeerId, Identity | null> } = {},
) {
  const clock = new VirtualClock();
  const network = new SimNetwork(clock, { latencyMs: 10 });
  const peerKeys = new PeerKeyRegistry();
  for (const [peer, identity] of Object.entries(options.bind ?? { alice: aliceKeys, bob: bobKeys })) {
    peerKeys.bind(peer, identity?.key ?? null);
  }
  const alice = new Member(network.join('alice'), codec, clock, RUN, {
    identity: aliceKeys,
    peerKeys,
    ...options.alice,
  });
  const bob = new Member(network.join('bob'), codec, clock, RUN, { identity: bobKeys, peerKeys, ...options.bob });
  /** Every message Bob's handlers see, in order, with the virtual time. */
  const seen: { kind: MessageKind; message: Message; at: number }[] = [];
  for (const kind of ['contribution', 'shard-result', 'hash-report', 'heartbeat', 'hello', 'leave'] as const) {
    bob.on(kind, (_from, message) => seen.push({ kind, message: message as Message, at: clock.now() }));
  }
  const rejectedAtAlice: Message[] = [];
  alice.on('rejected', (_from, message) => rejectedAtAlice.push(message));
  await clock.runAsync({ until: 0 }); // the peer-ups
  return { clock, network, peerKeys, alice, bob, seen, rejectedAtAlice, run: () => clock.runAsync({ until: 1_000 }) };
}

/** A transport whose events the test emits by hand, synchronously (a real mesh's, on the wall clock). */
class HandTransport implements Transport {
  readonly emitter = new TransportEmitter();
  constructor(readonly self: PeerId) {}
  peers = () => ['alice'];
  send = () => Promise.resolve();
  on: Transport['on'] = (event, listener) => this.emitter.on(event, listener);
  close = () => Promise.resolve();
}

afterEach(() => {
  vi.restoreAllMocks();
});

describe('Member signatures', () => {
  it('signs contributions, shard results and hash reports to others (not to itself), and the receiver verifies them', async () => {
    const { alice, bob, seen, run, clock } = await pair();
    const toSelf: Message[] = [];
    alice.on('contribution', (_from, message) => toSelf.push(message));
    void alice.send('bob', SAMPLES.contribution);
    void alice.broadcast(['bob', 'alice'], SAMPLES['shard-result']);
    void alice.send('bob', SAMPLES['hash-report']);
    void alice.send('alice', SAMPLES.contribution);
    await run();
    expect(seen.map((s) => s.kind)).toEqual(['contribution', 'shard-result', 'hash-report']);
    for (const { message } of seen) expect(message).toMatchObject({ signature: expect.stringMatching(/^[\w-]{86}$/) });
    // verification took no virtual time: each arrived after the link's 10 ms
    expect(seen.map((s) => s.at)).toEqual([10, 10, 10]);
    expect(toSelf).toEqual([SAMPLES.contribution]);
    expect(toSelf[0]).not.toHaveProperty('signature');
    expect(bob.counters.total()).toBe(0);
    expect(clock.trackedCount()).toBe(0);
  });

  it('refuses a message signed with another key than its sender’s, or tampered after signing, or unsigned: counted and answered, never dispatched', async () => {
    const { network, bob, seen, run, rejectedAtAlice } = await pair();
    const alicesLink = network.transport('alice');
    if (!alicesLink) throw new Error('alice is on the network');
    // right peer id (the link is Alice's), wrong key: Mallory signs what Alice would send
    const forgedSignature = await malloryKeys.sign(await signedBytesOf(RUN, 'alice', SAMPLES.contribution));
    void alicesLink.send('bob', codec.encode({ ...SAMPLES.contribution, signature: forgedSignature }, RUN));
    // Alice's own signature, then the payload changed on the way
    const result = SAMPLES['shard-result'];
    const aliceSigned = await aliceKeys.sign(await signedBytesOf(RUN, 'alice', result));
    const payload = result.payload.slice();
    payload[0] = (payload[0] ?? 0) ^ 1;
    void alicesLink.send('bob', codec.encode({ ...result, payload, signature: aliceSigned }, RUN));
    // no signature at all from a peer whose key is bound
    void alicesLink.send('bob', codec.encode(SAMPLES['hash-report'], RUN));
    await run();

    expect(seen).toEqual([]);
    expect(bob.counters.byReason()).toEqual({ signature: 3 });
    expect(bob.counters.recent().map((r) => [r.from, r.kind, r.detail])).toEqual([
      ['alice', 'contribution', 'the signature does not verify with its Ed25519 key'],
      ['alice', 'shard-result', 'the signature does not verify with its Ed25519 key'],
      ['alice', 'hash-report', 'unsigned, and its sender has a key'],
    ]);
    expect(rejectedAtAlice).toEqual([
      expect.objectContaining({ about: 'contribution', reason: 'signature', fragment: 1, round: 4, shard: 2 }),
      expect.objectContaining({ about: 'shard-result', reason: 'signature', fragment: 1, round: 4, shard: 2 }),
      expect.objectContaining({ about: 'hash-report', reason: 'signature', fragment: 1, round: 4 }),
    ]);
  });

  it('sends in order, each after the signatures before it', async () => {
    const { alice, seen, run, network } = await pair();
    const sent: string[] = [];
    network.onSend('alice', (_to, bytes) => {
      const decoded = codec.decode(bytes);
      if (decoded.ok) sent.push(decoded.message.kind);
      return 'deliver';
    });
    // the heartbeat needs no signature, yet leaves after the contribution that does
    void alice.send('bob', SAMPLES.contribution);
    void alice.send('bob', SAMPLES.heartbeat);
    void alice.send('bob', SAMPLES['hash-report']);
    void alice.send('bob', { kind: 'leave', reason: 'done' });
    await run();
    expect(sent).toEqual(['contribution', 'heartbeat', 'hash-report', 'leave']);
    expect(seen.map((s) => s.kind)).toEqual(['contribution', 'heartbeat', 'hash-report', 'leave']);
  });

  it('dispatches a peer’s messages in the order they came, and its peer-down after them, while verifications are pending', async () => {
    const transport = new HandTransport('bob');
    const peerKeys = new PeerKeyRegistry();
    peerKeys.bind('alice', aliceKeys.key);
    const bob = new Member(transport, codec, wallClock, RUN, { identity: bobKeys, peerKeys });
    const events: string[] = [];
    for (const kind of ['contribution', 'heartbeat', 'hash-report'] as const) {
      bob.on(kind, (from) => events.push(`${kind} from ${from}`));
    }
    bob.onPeerDown((peer) => events.push(`${peer} down`));
    const signed = async (message: Message & { kind: 'contribution' | 'hash-report' }) =>
      codec.encode({ ...message, signature: await aliceKeys.sign(await signedBytesOf(RUN, 'alice', message)) }, RUN);
    const [contribution, report] = [await signed(SAMPLES.contribution), await signed(SAMPLES['hash-report'])];
    // all in one go, as a mesh may deliver them
    transport.emitter.emit('message', 'alice', contribution);
    transport.emitter.emit('message', 'alice', codec.encode(SAMPLES.heartbeat, RUN));
    transport.emitter.emit('message', 'alice', report);
    transport.emitter.emit('peer-down', 'alice', { code: 'crashed', message: 'gone' });
    expect(events).toEqual([]); // the first one is being verified: everything after it waits
    await vi.waitFor(() => expect(events).toHaveLength(4));
    expect(events).toEqual(['contribution from alice', 'heartbeat from alice', 'hash-report from alice', 'alice down']);
  });

  it('refuses what a peer without a key sends, by default; a test room without keys dispatches it at once', async () => {
    const strict = await pair({ bind: { alice: aliceKeys, bob: null } });
    const got: Message[] = [];
    strict.alice.on('contribution', (_from, message) => got.push(message));
    void strict.bob.send('alice', SAMPLES.contribution);
    await strict.run();
    expect(got).toEqual([]);
    expect(strict.alice.counters.recent()).toEqual([
      expect.objectContaining({
        from: 'bob',
        reason: 'signature',
        detail: 'bob has no key, and this room requires signatures',
      }),
    ]);

    // requireSignatures off (test-room.ts without identities): Bob handles her contribution
    // inside the event that delivered it, without waiting for WebCrypto.
    const transport = new HandTransport('bob');
    const peerKeys = new PeerKeyRegistry();
    peerKeys.bind('alice', null);
    const lenient = new Member(transport, codec, wallClock, RUN, {
      identity: bobKeys,
      peerKeys,
      requireSignatures: false,
    });
    const handled: Message[] = [];
    lenient.on('contribution', (_from, message) => handled.push(message));
    transport.emitter.emit('message', 'alice', codec.encode(SAMPLES.contribution, RUN));
    expect(handled).toEqual([SAMPLES.contribution]);
    expect(lenient.counters.total()).toBe(0);
  });

  it('puts its key in its hello; refuses a hello whose key is not the bound one; takes it from a peer nobody bound', async () => {
    const { alice, seen, run, peerKeys } = await pair();
    void alice.send('bob', SAMPLES.hello);
    await run();
    expect(seen).toEqual([
      expect.objectContaining({ kind: 'hello', message: { ...SAMPLES.hello, key: aliceKeys.key } }),
    ]);

    // Alice's link announcing Mallory's key
    const forged = await pair();
    void forged.alice.send('bob', { ...SAMPLES.hello, key: malloryKeys.key });
    await forged.run();
    expect(forged.seen).toEqual([]);
    expect(forged.bob.counters.recent()).toEqual([
      expect.objectContaining({ from: 'alice', kind: 'hello', reason: 'key-mismatch' }),
    ]);

    // the server said nothing of Alice (an older server): her hello's key becomes her binding
    const unbound = await pair({ bind: { bob: bobKeys } });
    void unbound.alice.send('bob', SAMPLES.hello);
    void unbound.alice.send('bob', SAMPLES.contribution);
    await unbound.run();
    expect(unbound.seen.map((s) => s.kind)).toEqual(['hello', 'contribution']);
    expect(unbound.peerKeys.get('alice')).toEqual(aliceKeys.key);
    expect(peerKeys.get('alice')).toEqual(aliceKeys.key);
  });

  it('refuses what it cannot verify because its WebCrypto lacks the algorithm; a test room dispatches it unverified, counted', async () => {
    const importKey = crypto.subtle.importKey.bind(crypto.subtle);
    vi.spyOn(crypto.subtle, 'importKey').mockImplementation((...args: Parameters<SubtleCrypto['importKey']>) => {
      const algorithm = args[2] as { name?: string };
      if (algorithm?.name === 'Ed25519')
        return Promise.reject(new DOMException('no Ed25519 here', 'NotSupportedError'));
      return importKey(...args) as never;
    });
    const strict = await pair();
    void strict.alice.send('bob', SAMPLES.contribution);
    await strict.run();
    expect(strict.seen).toEqual([]);
    expect(strict.bob.unverifiedMessages).toBe(0);
    expect(strict.bob.counters.recent()).toEqual([
      expect.objectContaining({
        from: 'alice',
        reason: 'signature',
        detail: expect.stringMatching(/key cannot be used here.*this room requires signatures/),
      }),
    ]);
    expect(strict.rejectedAtAlice).toEqual([expect.objectContaining({ about: 'contribution', reason: 'signature' })]);

    const lenient = await pair({ bob: { requireSignatures: false } });
    void lenient.alice.send('bob', SAMPLES.contribution);
    await lenient.run();
    expect(lenient.seen.map((s) => s.kind)).toEqual(['contribution']);
    expect(lenient.bob.unverifiedMessages).toBe(1);
    expect(lenient.bob.counters.total()).toBe(0);
  });
});
