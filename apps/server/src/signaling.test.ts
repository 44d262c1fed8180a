import { type SignalClient, SignalError } from '@shoal/signaling';
import { describe, expect, it } from 'vitest';
import type { RunningServer } from './index.ts';
import { startTestServer, testClients, until } from './test-server.ts';

let server: RunningServer;
const { client, raw } = testClients(() => server);
const events = <T>(c: SignalClient, event: 'signal' | 'relay' | 'peer-joined' | 'peer-left' | 'error') => {
  const seen: T[] = [];
  c.on(event, ((message: T) => seen.push(message)) as never);
  return seen;
};

describe('signaling rooms', () => {
  it('creates a room, joins it with the token, and relays signals both ways with server-set sender ids', async () => {
    server = await startTestServer({ iceServers: [{ urls: 'stun:stun.example.org:3478' }] });
    const host = await client();
    const created = await host.create();
    expect(created.iceServers).toEqual([{ urls: 'stun:stun.example.org:3478' }]);
    expect(created.limits.maxFrameBytes).toBe(64 * 1024);
    const joinedEvents = events<{ peer: string }>(host, 'peer-joined');

    const member = await client();
    const joined = await member.join(created.roomId, created.joinToken);
    expect(joined.hostId).toBe(created.peerId);
    expect(joined.peers).toEqual([created.peerId]);
    expect(joined.peerId).not.toBe(created.peerId);
    await until(() => joinedEvents.length === 1);
    expect(joinedEvents[0]?.peer).toBe(joined.peerId);

    const atHost = events<{ from: string; data: unknown }>(host, 'signal');
    const atMember = events<{ from: string; data: unknown }>(member, 'signal');
    member.signal(created.peerId, { type: 'offer', sdp: 'v=0…' });
    host.signal(joined.peerId, { candidate: 'candidate:1 1 udp …' });
    await until(() => atHost.length === 1 && atMember.length === 1);
    expect(atHost[0]).toEqual({ kind: 'signal', from: joined.peerId, data: { type: 'offer', sdp: 'v=0…' } });
    expect(atMember[0]?.from).toBe(created.peerId);
  });

  it('overwrites a spoofed sender id', async () => {
    server = await startTestServer();
    const host = await client();
    const created = await host.create();
    const a = await client();
    const b = await raw();
    const joinedA = await a.join(created.roomId, created.joinToken);
    b.send({ kind: 'join', version: 1, roomId: created.roomId, token: created.joinToken });
    const joinedB = await b.next('joined');
    const atA = events<{ from: string; data: unknown }>(a, 'signal');
    b.send({ kind: 'signal', to: joinedA.peerId, from: created.peerId, data: 'I am the host' });
    await until(() => atA.length === 1);
    expect(atA[0]?.from).toBe(joinedB.peerId);
  });

  it('refuses to relay across rooms', async () => {
    server = await startTestServer();
    const hostA = await client();
    const roomA = await hostA.create();
    const hostB = await raw();
    hostB.send({ kind: 'create', version: 1 });
    await hostB.next('created');
    const atA = events(hostA, 'signal');
    hostB.send({ kind: 'signal', to: roomA.peerId, data: 'hello' });
    expect(await hostB.error()).toBe('unknown-peer');
    hostB.send({ kind: 'relay', to: roomA.peerId, data: 'hello' });
    expect(await hostB.error()).toBe('unknown-peer');
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(atA).toEqual([]);
  });

  it('refuses a wrong token, a wrong secret, an unknown room and another version', async () => {
    server = await startTestServer();
    const host = await client();
    const created = await host.create();
    const member = await client();
    await expect(member.join(created.roomId, 'not-the-token')).rejects.toMatchObject({ code: 'bad-token' });
    await expect(member.join('nosuchroom', created.joinToken)).rejects.toMatchObject({ code: 'no-such-room' });
    await expect(member.reclaim(created.roomId, created.joinToken)).rejects.toMatchObject({ code: 'bad-secret' });
    const old = await raw();
    old.send({ kind: 'join', version: 0, roomId: created.roomId, token: created.joinToken });
    expect(await old.error()).toBe('version');
    // still usable after the refusals
    expect((await member.join(created.roomId, created.joinToken)).hostId).toBe(created.peerId);
  });

  it('refuses a second host while the host is connected; the host reconnects with its secret and takes the room back', async () => {
    server = await startTestServer();
    const host = await client();
    const created = await host.create();
    const member = await client();
    const joined = await member.join(created.roomId, created.joinToken);

    const racers = [await client(), await client()];
    const results = await Promise.allSettled(racers.map((racer) => racer.reclaim(created.roomId, created.hostSecret)));
    expect(results.map((result) => result.status)).toEqual(['rejected', 'rejected']);
    expect((results[0] as PromiseRejectedResult).reason).toMatchObject({ code: 'host-present' });

    const left = events<{ peer: string; reason: string }>(member, 'peer-left');
    const back = events<{ peer: string }>(member, 'peer-joined');
    host.close();
    await until(() => left.length === 1);
    expect(left[0]).toMatchObject({ peer: created.peerId, reason: 'closed' });

    // two reconnecting hosts race: exactly one wins
    const outcomes = await Promise.allSettled(racers.map((racer) => racer.reclaim(created.roomId, created.hostSecret)));
    expect(outcomes.filter((outcome) => outcome.status === 'fulfilled')).toHaveLength(1);
    const winner = outcomes.find((outcome) => outcome.status === 'fulfilled') as PromiseFulfilledResult<{
      peerId: string;
      peers: string[];
    }>;
    expect(winner.value.peerId).toBe(created.peerId);
    expect(winner.value.peers).toEqual([joined.peerId]);
    await until(() => back.length === 1);
    expect(back[0]?.peer).toBe(created.peerId);
  });

  it('lets the host kick a member and rotate the token; members cannot', async () => {
    server = await startTestServer();
    const host = await client();
    const created = await host.create();
    const a = await client();
    const b = await client();
    const joinedA = await a.join(created.roomId, created.joinToken);
    const joinedB = await b.join(created.roomId, created.joinToken);

    const errors = events<{ code: string }>(a, 'error');
    a.kick(joinedB.peerId);
    await until(() => errors.length === 1);
    expect(errors[0]?.code).toBe('not-host');
    await expect(a.rotateToken()).rejects.toMatchObject({ code: 'not-host' });

    const kicked: string[] = [];
    const closes: number[] = [];
    a.on('kicked', (message) => kicked.push(message.reason));
    a.on('close', (event) => closes.push(event.code));
    const leftAtB = events<{ peer: string; reason: string }>(b, 'peer-left');
    host.kick(joinedA.peerId, 'spamming');
    await until(() => closes.length === 1);
    expect(kicked).toEqual(['spamming']);
    expect(closes).toEqual([4001]);
    await until(() => leftAtB.length === 1);
    expect(leftAtB[0]).toEqual({ kind: 'peer-left', peer: joinedA.peerId, reason: 'kicked' });

    const token = await host.rotateToken();
    expect(token).not.toBe(created.joinToken);
    const late = await client();
    await expect(late.join(created.roomId, created.joinToken)).rejects.toBeInstanceOf(SignalError);
    expect((await late.join(created.roomId, token)).peers.sort()).toEqual([created.peerId, joinedB.peerId].sort());
  });

  it('relays control messages host → one member, host → all, member → host only', async () => {
    server = await startTestServer();
    const host = await client();
    const created = await host.create();
    const a = await client();
    const b = await client();
    const joinedA = await a.join(created.roomId, created.joinToken);
    const joinedB = await b.join(created.roomId, created.joinToken);
    const atA = events<{ from: string; data: unknown }>(a, 'relay');
    const atB = events<{ from: string; data: unknown }>(b, 'relay');
    const atHost = events<{ from: string; data: unknown }>(host, 'relay');
    host.relay({ round: 1 });
    host.relay({ only: 'a' }, joinedA.peerId);
    a.relay({ status: 'ready' });
    const errorsAtA = events<{ code: string }>(a, 'error');
    a.relay({ sneaky: true }, joinedB.peerId);
    await until(() => atA.length === 2 && atB.length === 1 && atHost.length === 1 && errorsAtA.length === 1);
    expect(atB).toEqual([{ kind: 'relay', from: created.peerId, data: { round: 1 } }]);
    expect(atHost).toEqual([{ kind: 'relay', from: joinedA.peerId, data: { status: 'ready' } }]);
    expect(errorsAtA[0]?.code).toBe('unknown-peer');
  });

  it('spends the host relay budget per delivery and refuses beyond it', async () => {
    server = await startTestServer({ limits: { hostRelayBurst: 4, hostRelayPerSecond: 0.001 } });
    const host = await raw();
    host.send({ kind: 'create', version: 1 });
    const created = await host.next('created');
    for (let i = 0; i < 2; i++) {
      const member = await client();
      await member.join(created.roomId, created.joinToken);
    }
    host.send({ kind: 'relay', data: 1 }); // 2 deliveries
    host.send({ kind: 'relay', data: 2 }); // 2 more: budget spent
    host.send({ kind: 'relay', data: 3 });
    expect(await host.error()).toBe('relay-budget');
  });

  it('caps peers per room (the host seat stays reserved) and rooms per server', async () => {
    server = await startTestServer({ limits: { maxPeersPerRoom: 3, maxRooms: 2 } });
    const host = await client();
    const created = await host.create();
    for (let i = 0; i < 2; i++) await (await client()).join(created.roomId, created.joinToken);
    await expect((await client()).join(created.roomId, created.joinToken)).rejects.toMatchObject({ code: 'room-full' });
    host.close();
    await until(() => server.signalingStats().peers === 2);
    // the host is away, but its seat is not given to a member
    await expect((await client()).join(created.roomId, created.joinToken)).rejects.toMatchObject({ code: 'room-full' });

    await (await client()).create();
    await expect((await client()).create()).rejects.toMatchObject({ code: 'too-many-rooms' });
  });

  it('deletes an empty room after the grace period, and keeps it if the host comes back in time', async () => {
    server = await startTestServer({ limits: { emptyRoomGraceMs: 150 } });
    const host = await client();
    const created = await host.create();
    host.close();
    await until(() => server.signalingStats().peers === 0);
    const back = await client();
    await back.reclaim(created.roomId, created.hostSecret);
    await new Promise((resolve) => setTimeout(resolve, 250));
    expect(server.signalingStats().rooms).toBe(1);
    back.close();
    await until(() => server.signalingStats().rooms === 0, 1000);
    await expect((await client()).reclaim(created.roomId, created.hostSecret)).rejects.toMatchObject({
      code: 'no-such-room',
    });
  });

  it('members leave with a reason the others see', async () => {
    server = await startTestServer();
    const host = await client();
    const created = await host.create();
    const member = await client();
    const joined = await member.join(created.roomId, created.joinToken);
    const left = events<{ peer: string; reason: string }>(host, 'peer-left');
    member.leave();
    await until(() => left.length === 1);
    expect(left[0]).toMatchObject({ peer: joined.peerId, reason: 'left' });
  });
});
