/**
 * ReconnectingSignal (@shoal/signaling) against a real server that goes away and comes back on the
 * same port and rooms directory: host, member and watcher each enter again as themselves, say so
 * through their state, and keep one key registry; a refusal that cannot heal ends the retrying.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createIdentity } from '@shoal/protocol';
import {
  memberEntry,
  ReconnectingSignal,
  type ReconnectState,
  type Reentry,
  type RoomEntry,
  SignalClient,
  signalUrl,
} from '@shoal/signaling';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import type { RunningServer } from './index.ts';
import { roomView, startTestServer, until } from './test-server.ts';

let server: RunningServer | null = null;
let dir: string;
const open: ReconnectingSignal[] = [];
const fast = { initialMs: 20, maxMs: 100 };

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'shoal-reconnect-'));
});
afterEach(async () => {
  for (const signal of open.splice(0)) signal.close();
  await server?.close();
  server = null;
  // a debounced view save may still be landing in the directory: retry instead of failing on it
  await rm(dir, { recursive: true, force: true, maxRetries: 5, retryDelay: 100 });
});

async function connect(identity = false): Promise<SignalClient> {
  if (!server) throw new Error('no server');
  return SignalClient.connect(signalUrl(server.url), WebSocket, identity ? { identity: await createIdentity() } : {});
}

function track(signal: ReconnectingSignal): { states: ReconnectState['kind'][]; reentries: Reentry[] } {
  open.push(signal);
  const states: ReconnectState['kind'][] = [];
  const reentries: Reentry[] = [];
  signal.onState((state) => states.push(state.kind));
  signal.on('reentered', (reply) => reentries.push(reply));
  return { states, reentries };
}

describe('ReconnectingSignal', () => {
  it('brings host, member and watcher back into the same room as themselves after a server restart', async () => {
    server = await startTestServer({ roomsDir: dir, viewSaveIntervalMs: 10 });
    const url = signalUrl(server.url);
    const hostClient = await connect(true);
    const created = await hostClient.create();
    const host = new ReconnectingSignal(hostClient, {
      url,
      WebSocketImpl: WebSocket,
      entry: { role: 'host', roomId: created.roomId, hostSecret: created.hostSecret },
      backoff: fast,
    });
    const memberClient = await connect(true);
    const joined = await memberClient.join(created.roomId, created.joinToken);
    const member = new ReconnectingSignal(memberClient, {
      url,
      WebSocketImpl: WebSocket,
      entry: memberEntry(joined),
      backoff: fast,
    });
    const watcherClient = await connect();
    await watcherClient.watch(created.roomId, created.watchKey as string);
    const watcher = new ReconnectingSignal(watcherClient, {
      url,
      WebSocketImpl: WebSocket,
      entry: { role: 'watcher', roomId: created.roomId, key: created.watchKey as string },
      backoff: fast,
    });
    const [h, m, w] = [track(host), track(member), track(watcher)];
    const keys = member.peerKeys;
    expect(keys.get(created.peerId)).toBeTruthy();
    host.publish(roomView(created.roomId, [1_000]));
    await until(() => (server?.signalingStats().viewBytes ?? 0) > 0);

    const port = server.port;
    await server.close();
    await until(() => [h, m, w].every((t) => t.states.includes('reconnecting')));
    expect(member.state.kind).toBe('reconnecting');
    server = await startTestServer({ roomsDir: dir, port, viewSaveIntervalMs: 10 });
    await until(() => [host, member, watcher].every((s) => s.state.kind === 'connected'), 5_000);

    expect(host.peerId).toBe(created.peerId);
    expect(member.peerId).toBe(joined.peerId);
    expect(m.reentries[0]).toMatchObject({ kind: 'joined', peerId: joined.peerId, hostId: created.peerId });
    expect(w.reentries[0]).toMatchObject({ kind: 'watching', roomId: created.roomId });
    expect(member.peerKeys).toBe(keys); // the registry the mesh holds is the one kept up to date
    await until(() => server?.signalingStats().peers === 2);
    expect(keys.get(created.peerId)).toBeTruthy();

    // events of the new socket reach the old handlers
    const relayed: unknown[] = [];
    host.on('relay', ({ data }) => relayed.push(data));
    member.relay({ hello: 1 });
    await until(() => relayed.length === 1);
    const views: unknown[] = [];
    watcher.on('view', (message) => views.push(message));
    host.publish(roomView(created.roomId, [2_000]));
    await until(() => views.length === 1);
    expect(h.states.at(-1)).toBe('connected');
  });

  it('gives up when the restarted server forgot the room, and when the member was kicked', async () => {
    server = await startTestServer({ roomsDir: null });
    const url = signalUrl(server.url);
    const hostClient = await connect();
    const created = await hostClient.create();
    const kickedClient = await connect();
    const kickedJoin = await kickedClient.join(created.roomId, created.joinToken);
    const kicked = new ReconnectingSignal(kickedClient, {
      url,
      WebSocketImpl: WebSocket,
      entry: memberEntry(kickedJoin),
      backoff: fast,
    });
    track(kicked);
    hostClient.kick(kickedJoin.peerId);
    await until(() => kicked.state.kind === 'gave-up');
    expect(kicked.state).toMatchObject({ kind: 'gave-up', error: { code: 'kicked' } });

    const host = new ReconnectingSignal(hostClient, {
      url,
      WebSocketImpl: WebSocket,
      entry: { role: 'host', roomId: created.roomId, hostSecret: created.hostSecret },
      backoff: fast,
    });
    const h = track(host);
    const closes: string[] = [];
    host.on('close', ({ reason }) => closes.push(reason));
    const port = server.port;
    await server.close();
    server = await startTestServer({ roomsDir: null, port });
    await until(() => host.state.kind === 'gave-up', 5_000);
    expect(host.state).toMatchObject({ kind: 'gave-up', error: { code: 'no-such-room' } });
    expect(h.states[0]).toBe('reconnecting');
    expect(closes).toHaveLength(1);
  });

  it('joins anew with the join token when the server no longer knows its member secret, and gives up once the token is rotated', async () => {
    server = await startTestServer({ roomsDir: dir, viewSaveIntervalMs: 10 });
    const url = signalUrl(server.url);
    const hostClient = await connect(true);
    const created = await hostClient.create();
    const host = new ReconnectingSignal(hostClient, {
      url,
      WebSocketImpl: WebSocket,
      entry: { role: 'host', roomId: created.roomId, hostSecret: created.hostSecret },
      backoff: fast,
    });
    track(host);
    const memberClient = await connect(true);
    const joined = await memberClient.join(created.roomId, created.joinToken);
    // as a server that lost this member would see it: a secret it does not know
    const forgotten = { ...memberEntry(joined, created.joinToken), memberSecret: 'forgotten' } as RoomEntry;
    const member = new ReconnectingSignal(memberClient, {
      url,
      WebSocketImpl: WebSocket,
      entry: forgotten,
      backoff: fast,
    });
    const m = track(member);
    const anew: string[] = [];
    member.on('joined-anew', (reply) => anew.push(reply.peerId));

    const restart = async () => {
      const port = server?.port;
      await server?.close();
      server = await startTestServer({ roomsDir: dir, port, viewSaveIntervalMs: 10 });
    };
    await restart();
    await until(() => member.state.kind === 'connected' && m.reentries.length === 1, 5_000);
    const newId = member.peerId as string;
    expect(newId).not.toBe(joined.peerId);
    expect(anew).toEqual([newId]);
    expect(m.reentries[0]).toMatchObject({ kind: 'joined', peerId: newId, hostId: created.peerId });

    // its new seat is its own now: after another restart it rejoins as the new id, with the new secret
    await until(() => host.state.kind === 'connected');
    await restart();
    await until(() => m.reentries.length === 2, 5_000);
    expect(m.reentries[1]).toMatchObject({ kind: 'joined', peerId: newId });
    expect(anew).toHaveLength(1);

    // a member without a token to fall back on gives up, as does one whose token was rotated
    await until(() => host.state.kind === 'connected', 5_000);
    const tokenless = await connect(true);
    const tokenlessJoined = await tokenless.join(created.roomId, created.joinToken);
    const stale = await connect(true);
    const staleJoined = await stale.join(created.roomId, created.joinToken);
    await host.rotateToken();
    const a = new ReconnectingSignal(tokenless, {
      url,
      WebSocketImpl: WebSocket,
      entry: { ...(memberEntry(tokenlessJoined) as RoomEntry), memberSecret: 'forgotten' } as RoomEntry,
      backoff: fast,
    });
    const b = new ReconnectingSignal(stale, {
      url,
      WebSocketImpl: WebSocket,
      entry: { ...memberEntry(staleJoined, created.joinToken), memberSecret: 'forgotten' } as RoomEntry,
      backoff: fast,
    });
    track(a);
    track(b);
    await restart();
    await until(() => a.state.kind === 'gave-up' && b.state.kind === 'gave-up', 5_000);
    expect(a.state).toMatchObject({ error: { code: 'bad-secret' } });
    expect(b.state).toMatchObject({ error: { code: 'bad-token' } });
  });

  it('keeps trying while the server is away, and stops when closed', async () => {
    server = await startTestServer();
    const url = signalUrl(server.url);
    const client = await connect();
    const created = await client.create();
    const host = new ReconnectingSignal(client, {
      url,
      WebSocketImpl: WebSocket,
      entry: { role: 'host', roomId: created.roomId, hostSecret: created.hostSecret },
      backoff: fast,
    });
    const attempts: number[] = [];
    host.onState((state) => {
      if (state.kind === 'reconnecting' && state.nextTryMs > 0) attempts.push(state.attempt);
    });
    open.push(host);
    await server.close();
    server = null;
    await until(() => attempts.length >= 4, 3_000);
    expect(attempts.slice(0, 4)).toEqual([1, 2, 3, 4]);
    host.close();
    const after = attempts.length;
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(attempts.length).toBe(after);
    expect(host.state.kind).toBe('closed');
  });
});
