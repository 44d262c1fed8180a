import { createIdentity, type PeerKey } from '@shoal/protocol';
import { SignalClient, type WebSocketLike } from '@shoal/signaling';
import { describe, expect, it } from 'vitest';
import type { RunningServer } from './index.ts';
import { startTestServer, testClients, until } from './test-server.ts';

let server: RunningServer;
const { client, raw } = testClients(() => server);

const [hostKeys, aliceKeys, hostKeysAfterRestart] = await Promise.all([
  createIdentity({ algorithm: 'Ed25519' }),
  createIdentity({ algorithm: 'ECDSA-P256' }),
  createIdentity({ algorithm: 'Ed25519' }),
]);

describe('keys bound by the signaling server', () => {
  it('binds the key each client announces to the id it gets, and tells the others; a client without one is bound to none', async () => {
    server = await startTestServer();
    const host = await client({ identity: hostKeys });
    const created = await host.create();

    const alice = await client({ identity: aliceKeys });
    const joined = await alice.join(created.roomId, created.joinToken);
    expect(joined.keys).toEqual([{ peer: created.peerId, key: hostKeys.key }]);
    expect(alice.peerKeys.entries()).toEqual([[created.peerId, hostKeys.key]]);
    await until(() => host.peerKeys.get(joined.peerId) !== undefined);
    expect(host.peerKeys.get(joined.peerId)).toEqual(aliceKeys.key);

    // an older client announces nothing: the others learn that it has no key
    const older = await raw();
    older.send({ kind: 'join', version: 1, roomId: created.roomId, token: created.joinToken });
    const olderJoined = await older.next('joined');
    expect(olderJoined.keys).toEqual([
      { peer: created.peerId, key: hostKeys.key },
      { peer: joined.peerId, key: aliceKeys.key },
    ]);
    await until(() => alice.peerKeys.get(olderJoined.peerId) !== undefined);
    expect(alice.peerKeys.get(olderJoined.peerId)).toBeNull();
    expect(host.peerKeys.get(olderJoined.peerId)).toBeNull();

    // a peer that leaves is forgotten
    older.send({ kind: 'leave' });
    await until(() => alice.peerKeys.get(olderJoined.peerId) === undefined);
    expect(host.peerKeys.size).toBe(1);
  });

  it('keeps a peer’s key while it is in the room; the host that reclaims the room with its secret binds its key again', async () => {
    server = await startTestServer();
    const host = await raw();
    host.send({ kind: 'create', version: 1, key: hostKeys.key });
    const created = await host.next('created');
    const alice = await client({ identity: aliceKeys });
    const joined = await alice.join(created.roomId, created.joinToken);
    const joinedAtHost = await host.next('peer-joined');
    expect(joinedAtHost).toEqual({ kind: 'peer-joined', peer: joined.peerId, key: aliceKeys.key });

    // no way to bind another key on the same socket: a second entry is refused
    host.send({ kind: 'create', version: 1, key: hostKeysAfterRestart.key });
    expect(await host.error()).toBe('already-in-room');
    expect(alice.peerKeys.get(created.peerId)).toEqual(hostKeys.key);

    // the host goes and comes back with a new key pair (a restarted `shoal host --resume`)
    host.close();
    await until(() => alice.peerKeys.get(created.peerId) === undefined);
    const back = await client({ identity: hostKeysAfterRestart });
    const reclaimed = await back.reclaim(created.roomId, created.hostSecret);
    expect(reclaimed.keys).toEqual([{ peer: joined.peerId, key: aliceKeys.key }]);
    expect(back.peerKeys.get(joined.peerId)).toEqual(aliceKeys.key);
    await until(() => alice.peerKeys.get(created.peerId) !== undefined);
    expect(alice.peerKeys.get(created.peerId)).toEqual(hostKeysAfterRestart.key);
  });

  it('refuses a member that rejoins with another key than it joined with (or with one after none), with key-changed', async () => {
    server = await startTestServer();
    const host = await client({ identity: hostKeys });
    const created = await host.create();
    const alice = await client({ identity: aliceKeys });
    const joined = await alice.join(created.roomId, created.joinToken);
    const secret = joined.memberSecret as string;
    const keyless = await raw();
    keyless.send({ kind: 'join', version: 1, roomId: created.roomId, token: created.joinToken });
    const keylessJoined = await keyless.next('joined');
    alice.close();
    keyless.close();
    await until(() => server.signalingStats().peers === 1);

    const rekeyed = await raw();
    rekeyed.send({
      kind: 'rejoin',
      version: 1,
      roomId: created.roomId,
      peerId: joined.peerId,
      memberSecret: secret,
      key: hostKeysAfterRestart.key,
    });
    expect(await rekeyed.next('error')).toMatchObject({ code: 'key-changed', ref: 'rejoin' });
    const unkeyed = await raw();
    unkeyed.send({ kind: 'rejoin', version: 1, roomId: created.roomId, peerId: joined.peerId, memberSecret: secret });
    expect(await unkeyed.error()).toBe('key-changed');
    const keyedNow = await raw();
    keyedNow.send({
      kind: 'rejoin',
      version: 1,
      roomId: created.roomId,
      peerId: keylessJoined.peerId,
      memberSecret: keylessJoined.memberSecret,
      key: aliceKeys.key,
    });
    expect(await keyedNow.error()).toBe('key-changed');
    expect(server.signalingStats().rejections['key-changed']).toBe(3);
    expect(host.peerKeys.get(joined.peerId)).toBeUndefined();

    // with the key it joined with, it takes its seat back and the others bind that key again
    const back = await client({ identity: aliceKeys });
    expect((await back.rejoin(created.roomId, joined.peerId, secret)).peerId).toBe(joined.peerId);
    await until(() => host.peerKeys.get(joined.peerId) !== undefined);
    expect(host.peerKeys.get(joined.peerId)).toEqual(aliceKeys.key);
  });

  it('refuses a malformed key with a schema error', async () => {
    server = await startTestServer();
    const host = await client({ identity: hostKeys });
    const created = await host.create();
    const bad: PeerKey[] = [
      { algorithm: 'Ed25519', publicKey: aliceKeys.key.publicKey }, // a P-256 key's length
      { algorithm: 'ECDSA-P256', publicKey: `${aliceKeys.key.publicKey.slice(1)}/` },
    ];
    for (const key of bad) {
      const c = await raw();
      c.send({ kind: 'join', version: 1, roomId: created.roomId, token: created.joinToken, key });
      expect(await c.error()).toBe('schema');
    }
    expect(host.peerKeys.size).toBe(0);
  });
});

/** A socket that opens at once and hands the test the server's side: what the client sent, and a way to answer. */
function fakeServer() {
  const sent: { kind: string }[] = [];
  let socket: WebSocketLike | null = null;
  class FakeSocket implements WebSocketLike {
    readyState = 1;
    onopen: WebSocketLike['onopen'] = null;
    onmessage: WebSocketLike['onmessage'] = null;
    onclose: WebSocketLike['onclose'] = null;
    onerror: WebSocketLike['onerror'] = null;
    constructor() {
      socket = this;
      queueMicrotask(() => this.onopen?.({}));
    }
    send(data: string) {
      sent.push(JSON.parse(data));
    }
    close() {}
  }
  const reply = (message: object) => socket?.onmessage?.({ data: JSON.stringify(message) });
  return { FakeSocket, sent, reply };
}

describe('a signal client of an older server', () => {
  it('binds nothing when the server tells no keys, and forgets a key when a peer id comes back without one', async () => {
    const { FakeSocket, sent, reply } = fakeServer();
    const alice = await SignalClient.connect('ws://server/signal', FakeSocket, { identity: aliceKeys });
    const joining = alice.join('room', 'token');
    expect(sent).toEqual([{ kind: 'join', version: 1, roomId: 'room', token: 'token', key: aliceKeys.key }]);
    const limits = { maxFrameBytes: 65536, messagesPerSecond: 50, messageBurst: 100, maxPeersPerRoom: 64 };
    const room = { roomId: 'room', peerId: 'alice', hostId: 'host', hostPresent: true, iceServers: [], limits };
    reply({ kind: 'joined', ...room, peers: ['host', 'bob'] });
    await joining;
    expect(alice.peerKeys.size).toBe(0);

    reply({ kind: 'peer-joined', peer: 'carol', key: hostKeys.key });
    expect(alice.peerKeys.get('carol')).toEqual(hostKeys.key);
    reply({ kind: 'peer-joined', peer: 'carol' });
    expect(alice.peerKeys.get('carol')).toBeUndefined();
  });
});
