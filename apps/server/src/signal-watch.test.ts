/**
 * The watch link at /signal: a host publishes its room view, watchers with the room's watch key
 * get the kept history and then every publish, and nobody else can publish, watch or signal.
 */
import { MAX_VIEW_HISTORY, roomViewUpdateSchema } from '@shoal/protocol';
import type { ServerMessageOf } from '@shoal/signaling';
import { describe, expect, it } from 'vitest';
import type { RunningServer } from './index.ts';
import { RoomViewHistory } from './signal-watch.ts';
import { type RawClient, roomView, startTestServer, testClients, until } from './test-server.ts';

let server: RunningServer;
const { client, raw } = testClients(() => server);
/** A host (raw, so tests can send anything) in a new room. */
async function rawHost() {
  const host = await raw();
  host.send({ kind: 'create', version: 1 });
  return { host, created: await host.next('created') };
}

describe('watching a room', () => {
  it('gives a watcher the kept history, then every later publish; the watch key survives a reclaim', async () => {
    server = await startTestServer();
    const host = await client();
    const created = await host.create();
    expect(created.watchKey).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(created.limits.maxPublishBytes).toBe(256 * 1024);
    host.publish(roomView(created.roomId, [1_000, 2_000], { status: 'waiting' }));
    host.publish(roomView(created.roomId, [3_000]));
    const joinToken = await host.rotateToken(); // a reply on the host's socket: the publishes are in
    const watcher = await client();
    const watching = await watcher.watch(created.roomId, created.watchKey as string);
    expect(watching.roomId).toBe(created.roomId);
    // the latest update's tables, with every point kept so far
    expect(watching.view?.status).toBe('running');
    expect(watching.view?.points.map((p) => p.t)).toEqual([1_000, 2_000, 3_000]);
    expect(roomViewUpdateSchema.safeParse(watching.view).success).toBe(true);

    const views: ServerMessageOf<'view'>[] = [];
    watcher.on('view', (message) => views.push(message));
    host.publish(roomView(created.roomId, [4_000, 5_000], { status: 'paused' }));
    await until(() => views.length === 1);
    expect(views[0]?.data.status).toBe('paused');
    expect(views[0]?.data.points.map((p) => p.t)).toEqual([4_000, 5_000]);

    // not a member: nobody sees it join, it takes no seat
    const member = await client();
    const joined = await member.join(created.roomId, joinToken);
    expect(joined.peers).toEqual([created.peerId]);
    expect(server.signalingStats()).toMatchObject({ peers: 2, watchers: 1 });

    // the host comes back: the same watch key, and the watcher stayed on
    host.close();
    await until(() => server.signalingStats().peers === 1);
    const back = await client();
    const reclaimed = await back.reclaim(created.roomId, created.hostSecret);
    expect(reclaimed.watchKey).toBe(created.watchKey);
    back.publish(roomView(created.roomId, [6_000]));
    await until(() => views.length === 2);
    const later = await (await client()).watch(created.roomId, created.watchKey as string);
    expect(later.view?.points.map((p) => p.t)).toEqual([1_000, 2_000, 3_000, 4_000, 5_000, 6_000]);
  });

  it('answers a room without publishes with a null view', async () => {
    server = await startTestServer();
    const { created } = await rawHost();
    const watching = await (await client()).watch(created.roomId, created.watchKey as string);
    expect(watching).toEqual({ kind: 'watching', roomId: created.roomId, view: null });
  });

  it('refuses a bad key and an unknown room; a watcher cannot signal, relay, publish, join or watch again', async () => {
    server = await startTestServer();
    const { host, created } = await rawHost();
    const key = created.watchKey as string;
    const stranger = await client();
    await expect(stranger.watch(created.roomId, created.joinToken)).rejects.toMatchObject({ code: 'bad-key' });
    await expect(stranger.watch('nosuchroom', key)).rejects.toMatchObject({ code: 'no-such-room' });

    const watcher = await raw();
    watcher.send({ kind: 'watch', version: 0, roomId: created.roomId, key });
    expect(await watcher.error()).toBe('version');
    watcher.send({ kind: 'watch', version: 1, roomId: created.roomId, key });
    await watcher.next('watching');
    const cases: [unknown, string][] = [
      [{ kind: 'signal', to: created.peerId, data: { sdp: 'x' } }, 'not-in-room'],
      [{ kind: 'relay', data: 1 }, 'not-in-room'],
      [{ kind: 'publish', data: roomView(created.roomId, [1]) }, 'not-in-room'],
      [{ kind: 'rotate-token' }, 'not-in-room'],
      [{ kind: 'join', version: 1, roomId: created.roomId, token: created.joinToken }, 'already-in-room'],
      [{ kind: 'watch', version: 1, roomId: created.roomId, key }, 'already-in-room'],
    ];
    for (const [frame, code] of cases) {
      watcher.send(frame);
      expect(await watcher.error(), JSON.stringify(frame).slice(0, 60)).toBe(code);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(host.messages.filter((m) => m.kind !== 'error')).toEqual([]); // nothing reached the host
    expect(watcher.closed).toBeNull();
    expect(server.signalingStats().rejections).toMatchObject({ 'bad-key': 1, 'no-such-room': 1, 'not-in-room': 4 });
  });

  it('refuses publishes from members, for another room, invalid, oversized or too frequent, and counts them', async () => {
    server = await startTestServer({
      limits: { maxPublishBytes: 8 * 1024, publishBurst: 2, publishesPerSecond: 0.01 },
    });
    const { host, created } = await rawHost();
    const member = await raw();
    member.send({ kind: 'join', version: 1, roomId: created.roomId, token: created.joinToken });
    await member.next('joined');
    const watcher = await raw();
    watcher.send({ kind: 'watch', version: 1, roomId: created.roomId, key: created.watchKey });
    await watcher.next('watching');

    member.send({ kind: 'publish', data: roomView(created.roomId, [1]) });
    expect(await member.error()).toBe('not-host');
    host.send({ kind: 'publish', data: roomView('another-room', [1]) });
    expect(await host.error()).toBe('schema');
    const invalid = [
      { ...roomView(created.roomId, [1]), version: 2 },
      roomView(created.roomId, [-1]),
      { ...roomView(created.roomId, [1]), metrics: { trainLoss: 'low' } },
    ];
    for (const data of invalid) {
      host.send({ kind: 'publish', data });
      expect((await host.next('error')).ref).toBe('publish');
    }
    expect(server.signalingStats().rejections).toMatchObject({ 'not-host': 1, schema: 4 });
    // over maxPublishBytes (a host may exceed maxFrameBytes with a publish only)
    host.send({
      kind: 'publish',
      data: roomView(
        created.roomId,
        Array.from({ length: 200 }, (_, i) => i),
      ),
    });
    expect(await host.error()).toBe('too-big');
    expect(host.closed).toBeNull();
    // two fit the burst, the third is over the rate
    for (const t of [1, 2, 3]) host.send({ kind: 'publish', data: roomView(created.roomId, [t]) });
    expect(await host.error()).toBe('rate-limited');
    await until(() => watcher.messages.filter((m) => m.kind === 'view').length === 2);
    await new Promise((resolve) => setTimeout(resolve, 50));
    const seen = watcher.messages.flatMap((m) => (m.kind === 'view' ? m.data.points.map((p) => p.t) : []));
    expect(seen).toEqual([1, 2]);
  });

  it('holds other frames to maxFrameBytes (a host included) and closes what ws cannot take with 1009', async () => {
    server = await startTestServer({ limits: { maxFrameBytes: 4096, maxPublishBytes: 16 * 1024 } });
    const { host, created } = await rawHost();
    const member = await raw();
    member.send({ kind: 'join', version: 1, roomId: created.roomId, token: created.joinToken });
    await member.next('joined');
    member.send({ kind: 'relay', data: 'x'.repeat(5000) });
    expect(await member.error()).toBe('too-big');
    host.send({ kind: 'relay', data: 'x'.repeat(5000) });
    expect(await host.next('error')).toMatchObject({ code: 'too-big', ref: 'relay' });
    const bigView = roomView(
      created.roomId,
      Array.from({ length: 40 }, (_, i) => i),
    );
    expect(JSON.stringify(bigView).length).toBeGreaterThan(4096);
    host.send({ kind: 'publish', data: bigView });
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(host.messages.filter((m) => m.kind === 'error')).toEqual([]);
    member.send({ kind: 'relay', data: 'x'.repeat(20_000) });
    expect(await member.closedWith()).toBe(1009);
  });

  it('caps watchers per room, and closes them with 4002 when the room ends', async () => {
    server = await startTestServer({ limits: { maxWatchersPerRoom: 2, emptyRoomGraceMs: 100 } });
    const { host, created } = await rawHost();
    const watchers = [await raw(), await raw(), await raw()];
    for (const w of watchers) w.send({ kind: 'watch', version: 1, roomId: created.roomId, key: created.watchKey });
    await watchers[0]?.next('watching');
    await watchers[1]?.next('watching');
    expect(await watchers[2]?.error()).toBe('room-full');
    // one leaves: a seat for another
    watchers[0]?.close();
    await until(() => server.signalingStats().watchers === 1);
    watchers[2]?.send({ kind: 'watch', version: 1, roomId: created.roomId, key: created.watchKey });
    await watchers[2]?.next('watching');

    host.close(); // the room is empty: it ends after its grace period, watchers do not keep it
    for (const w of watchers.slice(1)) expect(await w.closedWith()).toBe(4002);
    expect(watchers[1]?.closed?.reason).toBe('room closed');
    expect(server.signalingStats()).toMatchObject({ rooms: 0, watchers: 0 });
  });

  it('holds the fan-out to a room’s watchers to its byte budget; a watcher that missed a view gets its points later', async () => {
    let clock = 1_000_000;
    const viewBytes = JSON.stringify({ kind: 'view', data: roomView('x'.repeat(12), [1]) }).length;
    server = await startTestServer({
      now: () => clock,
      limits: { watchBytesPerSecond: 1000, watchBurstBytes: 3 * viewBytes + 400 },
    });
    const { host, created } = await rawHost();
    const watchers = [await raw(), await raw(), await raw()];
    for (const w of watchers) {
      w.send({ kind: 'watch', version: 1, roomId: created.roomId, key: created.watchKey });
      await w.next('watching'); // a snapshot without a view: under 100 bytes
    }
    const viewsOf = (w: RawClient) =>
      w.messages.flatMap((m) => (m.kind === 'view' ? [m.data.points.map((p) => p.t)] : []));
    host.send({ kind: 'publish', data: roomView(created.roomId, [1]) }); // all three: most of the burst
    await until(() => watchers.every((w) => viewsOf(w).length === 1));
    host.send({ kind: 'publish', data: roomView(created.roomId, [2]) }); // enough left for one
    await until(() => server.signalingStats().rejections['watch-budget'] === 1);
    clock += 60_000; // refilled
    host.send({ kind: 'publish', data: roomView(created.roomId, [3]) });
    await until(() => watchers.every((w) => viewsOf(w).length >= 2) && viewsOf(watchers[0] as RawClient).length === 3);
    await new Promise((resolve) => setTimeout(resolve, 50));
    // the first watcher had every view; the two skipped ones get the missed point with the next:
    // nobody loses a point or gets one twice
    expect(watchers.map(viewsOf)).toEqual([
      [[1], [2], [3]],
      [[1], [2, 3]],
      [[1], [2, 3]],
    ]);
    expect(host.messages.filter((m) => m.kind === 'error')).toEqual([]); // the host's publishes were all kept
  });

  it('refuses a watch whose first snapshot the room’s budget cannot pay for', async () => {
    server = await startTestServer({ limits: { watchBytesPerSecond: 1, watchBurstBytes: 1000 } });
    const { host, created } = await rawHost();
    host.send({ kind: 'publish', data: roomView(created.roomId, [1, 2, 3]) });
    host.send({ kind: 'rotate-token' });
    await host.next('token'); // the publish is in
    const first = await raw();
    first.send({ kind: 'watch', version: 1, roomId: created.roomId, key: created.watchKey });
    expect((await first.next('watching')).view?.points).toHaveLength(3); // over the burst: paid by debt
    const second = await raw();
    second.send({ kind: 'watch', version: 1, roomId: created.roomId, key: created.watchKey });
    expect(await second.next('error')).toMatchObject({ code: 'watch-budget', ref: 'watch' });
    expect(server.signalingStats()).toMatchObject({ watchers: 1, rejections: { 'watch-budget': 1 } });
  });

  it('is not timed out for not entering a room', async () => {
    server = await startTestServer({ limits: { helloTimeoutMs: 100 } });
    const { created } = await rawHost();
    const watcher = await raw();
    watcher.send({ kind: 'watch', version: 1, roomId: created.roomId, key: created.watchKey });
    await watcher.next('watching');
    await new Promise((resolve) => setTimeout(resolve, 250));
    expect(watcher.closed).toBeNull();
  });
});

describe('the kept view history', () => {
  it('keeps the latest tables and a thinned series, bounded in points and in bytes', () => {
    const history = new RoomViewHistory(64 * 1024);
    expect(history.view()).toBeNull();
    for (let i = 0; i < 30; i++) {
      history.add(
        roomView(
          'r',
          Array.from({ length: 100 }, (_, k) => i * 100 + k),
          { status: 'running' },
        ),
      );
    }
    history.add(roomView('r', [], { status: 'stopped' }));
    const view = history.view();
    expect(view?.status).toBe('stopped');
    const ts = view?.points.map((p) => p.t) ?? [];
    expect(ts.length).toBeLessThanOrEqual(MAX_VIEW_HISTORY);
    expect(JSON.stringify(view?.points).length).toBeLessThanOrEqual(64 * 1024 + ts.length);
    expect(ts[0]).toBe(0); // the whole run, at a coarser grain
    expect(ts.at(-1)).toBe(2_999);
    expect([...ts].sort((a, b) => a - b)).toEqual(ts);

    expect(history.bytes).toBeLessThanOrEqual(64 * 1024);

    const unbounded = new RoomViewHistory(Number.POSITIVE_INFINITY);
    for (let i = 0; i < 30; i++)
      unbounded.add(
        roomView(
          'r',
          Array.from({ length: 100 }, (_, k) => i * 100 + k),
        ),
      );
    expect(unbounded.view()?.points.length).toBeLessThanOrEqual(MAX_VIEW_HISTORY);
    expect(unbounded.view()?.points.length).toBeGreaterThan(MAX_VIEW_HISTORY / 2);
  });

  it('counts the latest tables toward the bytes a room keeps, not only the chart points', () => {
    const peers = Array.from({ length: 64 }, (_, i) => ({
      peer: `peer-${i}`,
      role: 'worker' as const,
      status: 'synced',
      reason: '',
      backend: 'webgpu',
      adapter: 'a'.repeat(200),
      tokensPerSecond: 500,
      innerStep: 10,
      loss: 3,
      lastSeenMs: 100,
      roundsContributed: 2,
      rejected: {},
      bytesSent: 1,
      bytesReceived: 2,
    }));
    const tablesBytes = JSON.stringify({ ...roomView('r', [], { peers }), points: [] }).length;
    expect(tablesBytes).toBeGreaterThan(16 * 1024);
    const maxBytes = 32 * 1024;
    const history = new RoomViewHistory(maxBytes);
    for (let i = 0; i < 20; i++) {
      history.add(
        roomView(
          'r',
          Array.from({ length: 100 }, (_, k) => i * 100 + k),
          { peers },
        ),
      );
    }
    // the whole kept view, as a watcher would get it, fits the budget
    expect(JSON.stringify(history.view()).length).toBeLessThanOrEqual(maxBytes);
    expect(history.bytes).toBeLessThanOrEqual(maxBytes);
    expect(history.view()?.peers).toHaveLength(64);
    expect(history.view()?.points.at(-1)?.t).toBe(1_999);
  });
});
