/**
 * Identity over real connections: the signaling server, and a host and a member wired as `shoal
 * host` and `shoal worker` wire them (connectSignaling, joinMesh), on a @roamhq/wrtc mesh.
 */
import { createIdentity, type Message } from '@shoal/protocol';
import { startServer } from '@shoal/server';
import { SignalClient, signalUrl, type WebSocketConstructor } from '@shoal/signaling';
import { Member, wallClock } from '@shoal/swarm';
import { afterAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { connectSignaling, joinMesh, loadWrtc, type RoomLink } from './room.ts';

const cleanups: (() => Promise<unknown> | unknown)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
  // Let wrtc's native threads finish tearing the peer connections down before the fork exits.
  await new Promise((resolve) => setTimeout(resolve, 500));
});

async function until(condition: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!condition()) {
    if (performance.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe('keys in a room over real WebRTC', () => {
  it('the host, as shoal host joins it, verifies what a member signs with the key the server bound; refuses what another key signs and what a client without a key sends unsigned', {
    timeout: 60_000,
  }, async () => {
    const wrtc = await loadWrtc();
    const server = await startServer({ port: 0, logger: null });
    cleanups.push(() => server.close());

    const hostSignal = await connectSignaling(server.url);
    const room = await hostSignal.create();
    const host: RoomLink = await joinMesh(hostSignal, room, [], wrtc);
    cleanups.push(() => host.close());
    const memberSignal = await connectSignaling(server.url);
    const joined = await memberSignal.join(room.roomId, room.joinToken);
    const member: RoomLink = await joinMesh(memberSignal, joined, [joined.hostId, ...joined.peers], wrtc);
    cleanups.push(() => member.close());
    await member.member.waitForPeer(joined.hostId);

    // Both announced an Ed25519 key; each side's member signs with its own and knows the other's.
    expect(host.member.identity?.key.algorithm).toBe('Ed25519');
    expect(host.member.peerKeys.get(joined.peerId)).toEqual(member.member.identity?.key);
    expect(member.member.peerKeys.get(room.peerId)).toEqual(host.member.identity?.key);

    const reports: Message[] = [];
    host.member.on('hash-report', (_from, message) => reports.push(message));
    await member.member.send(room.peerId, { kind: 'hash-report', fragment: 0, round: 1, hash: 'ab'.repeat(16) });
    // the same link, the same peer id, another key
    const impostor = new Member(member.mesh, member.member.codec, wallClock, member.member.runId, {
      identity: await createIdentity(),
    });
    await impostor.send(room.peerId, { kind: 'hash-report', fragment: 0, round: 2, hash: 'cd'.repeat(16) });

    // a client that announces no key (an older one, or one opting out): nothing it sends is signed
    const olderSignal = await SignalClient.connect(signalUrl(server.url), WebSocket as unknown as WebSocketConstructor);
    const olderJoined = await olderSignal.join(room.roomId, room.joinToken);
    const older: RoomLink = await joinMesh(olderSignal, olderJoined, [olderJoined.hostId], wrtc);
    cleanups.push(() => older.close());
    await older.member.waitForPeer(room.peerId);
    expect(host.member.peerKeys.get(olderJoined.peerId)).toBeNull();
    await older.member.send(room.peerId, { kind: 'hash-report', fragment: 0, round: 3, hash: 'ef'.repeat(16) });

    await until(() => host.member.counters.total('signature') === 2, 10_000, 'two reports refused');
    expect(reports).toEqual([expect.objectContaining({ round: 1, signature: expect.stringMatching(/^[\w-]{86}$/) })]);
    expect(host.member.counters.recent()).toEqual([
      expect.objectContaining({ from: joined.peerId, kind: 'hash-report', reason: 'signature' }),
      expect.objectContaining({
        from: olderJoined.peerId,
        kind: 'hash-report',
        detail: expect.stringMatching(/no key/),
      }),
    ]);
  });
});
