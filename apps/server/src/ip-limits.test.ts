/**
 * One client cannot take the server from everyone: per-address caps on sockets and rooms and a
 * room-creation rate, each refused with its own reason code and counted, while a host from
 * another address still gets in; rooms nobody joined expire fast. Clients at other addresses
 * connect from 127.0.0.2, 127.0.0.3, … (all of 127.0.0.0/8 is loopback).
 */

import type { ServerMessageOf } from '@shoal/signaling';
import { describe, expect, it } from 'vitest';
import type { RunningServer } from './index.ts';
import { addressKey, IpLimits } from './ip-limits.ts';
import { DEFAULT_SIGNALING_LIMITS } from './signal-config.ts';
import { type RawClient, startTestServer, testClients, until } from './test-server.ts';

let server: RunningServer;
const { raw } = testClients(() => server);

const ATTACKER = '127.0.0.2';
const HONEST_HOST = '127.0.0.3';

/** `n` sockets from `from`, each sending `create`: the outcome of each ('created' or a code). */
async function createRooms(n: number, from: string) {
  const clients: RawClient[] = [];
  const outcomes: string[] = [];
  const created: ServerMessageOf<'created'>[] = [];
  for (let i = 0; i < n; i++) {
    const c = await raw({ from });
    c.send({ kind: 'create', version: 1 });
    await until(() => c.messages.length > 0);
    const reply = c.messages[0];
    if (reply?.kind === 'created') created.push(reply);
    outcomes.push(await c.outcome());
    clients.push(c);
  }
  return { outcomes, clients, created };
}

const times = (n: number, what: string) => Array.from({ length: n }, () => what);

describe('limits per client address', () => {
  it('one address trying to fill maxRooms holds maxRoomsPerIp; a host from another address still creates one', async () => {
    server = await startTestServer({ limits: { maxRooms: 6, maxRoomsPerIp: 2, roomCreateBurstPerIp: 100 } });
    const { outcomes } = await createRooms(6, ATTACKER);
    expect(outcomes).toEqual([...times(2, 'created'), ...times(4, 'too-many-rooms-per-ip')]);
    expect((await createRooms(1, HONEST_HOST)).outcomes).toEqual(['created']);
    expect(server.signalingStats()).toMatchObject({ rooms: 3, rejections: { 'too-many-rooms-per-ip': 4 } });
  });

  it('one address trying to fill maxConnections is closed with 1013; others still connect and create', async () => {
    server = await startTestServer({ limits: { maxConnections: 8, maxConnectionsPerIp: 3 } });
    const held = [await raw({ from: ATTACKER }), await raw({ from: ATTACKER }), await raw({ from: ATTACKER })];
    const extra = await raw({ from: ATTACKER });
    expect(await extra.closedWith()).toBe(1013);
    expect(extra.messages).toMatchObject([{ kind: 'error', code: 'too-many-connections-per-ip' }]);
    expect((await createRooms(1, HONEST_HOST)).outcomes).toEqual(['created']);
    // a closed socket gives its place back
    held[0]?.close();
    await until(() => server.signalingStats().connections === 3);
    const again = await raw({ from: ATTACKER });
    again.send({ kind: 'create', version: 1 });
    expect(await again.outcome()).toBe('created');
    expect(server.signalingStats().rejections).toMatchObject({ 'too-many-connections-per-ip': 1 });
  });

  it('with the default limits, one address creates 10 rooms at once, then one every 10 s, and holds at most 16', async () => {
    let clock = 1_000_000;
    server = await startTestServer({ now: () => clock });
    const first = await createRooms(12, ATTACKER);
    expect(first.outcomes).toEqual([...times(10, 'created'), ...times(2, 'room-rate-limited')]);
    expect((await createRooms(1, HONEST_HOST)).outcomes).toEqual(['created']);
    clock += 10_000;
    expect((await createRooms(2, ATTACKER)).outcomes).toEqual(['created', 'room-rate-limited']);
    clock += 60 * 60_000; // the rate no longer binds: the number held does
    const later = await createRooms(7, ATTACKER);
    expect(later.outcomes).toEqual([...times(5, 'created'), ...times(2, 'too-many-rooms-per-ip')]);
    expect(server.signalingStats().rooms).toBe(17);
    expect(DEFAULT_SIGNALING_LIMITS.maxRoomsPerIp).toBeLessThanOrEqual(DEFAULT_SIGNALING_LIMITS.maxRooms / 16);
    expect(DEFAULT_SIGNALING_LIMITS.maxConnectionsPerIp).toBeLessThanOrEqual(
      DEFAULT_SIGNALING_LIMITS.maxConnections / 16,
    );
  });

  it('expires a room nobody joined soon after its host leaves, and frees its place; a joined room keeps its grace', async () => {
    server = await startTestServer({
      limits: { neverJoinedRoomGraceMs: 100, emptyRoomGraceMs: 60_000, maxRoomsPerIp: 3 },
    });
    const { clients, created } = await createRooms(3, ATTACKER);
    const [abandoned, leftAfterAMember, present] = clients as [RawClient, RawClient, RawClient];
    const [abandonedRoom, joinedRoom] = created as [ServerMessageOf<'created'>, ServerMessageOf<'created'>];
    const member = await raw();
    member.send({ kind: 'join', version: 1, roomId: joinedRoom.roomId, token: joinedRoom.joinToken });
    expect(await member.outcome()).toBe('joined');
    for (const c of [abandoned, leftAfterAMember, member]) c.close();
    await until(() => server.signalingStats().rooms === 2, 1000);
    await new Promise((resolve) => setTimeout(resolve, 200));
    // the once-joined room waits for its host; the one whose host stayed is not touched
    expect(server.signalingStats().rooms).toBe(2);
    expect(present.closed).toBeNull();
    const back = await raw();
    back.send({ kind: 'reclaim', version: 1, roomId: joinedRoom.roomId, hostSecret: joinedRoom.hostSecret });
    expect(await back.outcome()).toBe('reclaimed');
    back.send({ kind: 'leave' });
    const late = await raw();
    late.send({ kind: 'reclaim', version: 1, roomId: abandonedRoom.roomId, hostSecret: abandonedRoom.hostSecret });
    expect(await late.outcome()).toBe('no-such-room');
    expect((await createRooms(1, ATTACKER)).outcomes).toEqual(['created']); // the expired room's place
  });

  it('reads X-Forwarded-For only when told the server is behind a proxy', async () => {
    const forwarded = (address: string) => ({ from: ATTACKER, headers: { 'x-forwarded-for': `6.6.6.6, ${address}` } });
    server = await startTestServer({ limits: { maxConnectionsPerIp: 1 } });
    await raw(forwarded('10.0.0.1'));
    const spoofing = await raw(forwarded('10.0.0.2'));
    expect(await spoofing.closedWith()).toBe(1013);
    await server.close();

    server = await startTestServer({ limits: { maxConnectionsPerIp: 1 }, trustProxy: true });
    const one = await raw(forwarded('10.0.0.1'));
    const two = await raw(forwarded('10.0.0.2'));
    const sameAsOne = await raw(forwarded('10.0.0.1'));
    expect(await sameAsOne.closedWith()).toBe(1013);
    expect([one.closed, two.closed]).toEqual([null, null]);
  });

  it('forgets a quiet address only once its creation budget has refilled, so reconnecting gives no fresh burst', () => {
    let clock = 0;
    const limits = {
      ...DEFAULT_SIGNALING_LIMITS,
      maxConnectionsPerIp: 2,
      maxRoomsPerIp: 5,
      roomCreatesPerMinutePerIp: 6,
      roomCreateBurstPerIp: 2,
    };
    const perIp = new IpLimits(limits, () => clock);
    expect([perIp.connect('a'), perIp.connect('a'), perIp.connect('a')?.code]).toEqual([
      null,
      null,
      'too-many-connections-per-ip',
    ]);
    perIp.disconnect('a');
    perIp.disconnect('a');
    expect(perIp.size).toBe(0);
    perIp.connect('a');
    expect([perIp.admitRoom('a'), perIp.admitRoom('a'), perIp.admitRoom('a')?.code]).toEqual([
      null,
      null,
      'room-rate-limited',
    ]);
    perIp.roomEnded('a');
    perIp.roomEnded('a');
    perIp.disconnect('a');
    expect(perIp.size).toBe(1); // nothing open, but the budget is spent
    expect(perIp.admitRoom('a')?.code).toBe('room-rate-limited');
    clock += 20_000; // two rooms at 6 a minute
    perIp.sweep();
    expect(perIp.size).toBe(0);
  });

  it('counts an IPv6 /64 as one address, and IPv4-mapped IPv6 as the IPv4 address', () => {
    expect(addressKey('127.0.0.2')).toBe('127.0.0.2');
    expect(addressKey('::ffff:127.0.0.2')).toBe('127.0.0.2');
    expect(addressKey('2001:db8:1:2:3:4:5:6')).toBe('2001:db8:1:2::/64');
    expect(addressKey('2001:DB8:1:2::9')).toBe('2001:db8:1:2::/64');
    expect(addressKey('2001:db8:1:3::1')).toBe('2001:db8:1:3::/64');
    expect(addressKey('::1')).toBe('0:0:0:0::/64');
    expect(addressKey('fe80::1%eth0')).toBe('fe80:0:0:0::/64');
    expect(addressKey('64:ff9b::192.0.2.1')).toBe('64:ff9b:0:0::/64');
  });
  it('paces joins and checks per address, each on its own budget, and forgets the address once both refilled', () => {
    let clock = 0;
    const limits = {
      ...DEFAULT_SIGNALING_LIMITS,
      joinsPerMinutePerIp: 6,
      joinBurstPerIp: 2,
      checksPerMinutePerIp: 60,
      checkBurstPerIp: 3,
    };
    const perIp = new IpLimits(limits, () => clock);
    expect([perIp.admitJoin('a'), perIp.admitJoin('a'), perIp.admitJoin('a')?.code]).toEqual([
      null,
      null,
      'join-rate-limited',
    ]);
    expect(perIp.admitJoin('b')).toBeNull(); // another address has its own
    expect([perIp.admitCheck('a'), perIp.admitCheck('a'), perIp.admitCheck('a'), perIp.admitCheck('a')?.code]).toEqual([
      null,
      null,
      null,
      'check-rate-limited',
    ]);
    clock += 10_000; // one join at 6 a minute, ten checks at 60
    expect([perIp.admitJoin('a'), perIp.admitJoin('a')?.code]).toEqual([null, 'join-rate-limited']);
    expect(perIp.admitCheck('a')).toBeNull();
    perIp.sweep();
    expect(perIp.size).toBe(1); // a: nothing open, but budgets are spent (b has refilled)
    clock += 20_000;
    perIp.sweep();
    expect(perIp.size).toBe(0);
  });
});
