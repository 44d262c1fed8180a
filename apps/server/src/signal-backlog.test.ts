/**
 * No sender can get another connection closed: a member floods a host and a
 * member whose sockets are slow with large signals. The sender is held to a byte budget, frames to
 * a backlogged receiver are dropped, the sender is told which (signal-budget, receiver-busy) and
 * it is counted; the receivers stay connected and signal on once they read again.
 */
import { describe, expect, it } from 'vitest';
import type { RunningServer, ServerOptions } from './index.ts';
import { type RawClient, roomView, startTestServer, testClients, until } from './test-server.ts';

let server: RunningServer;
const { raw } = testClients(() => server);

/** A host, a victim member and an attacker member in one room; host and victim stop reading. */
async function slowRoom(options: Partial<ServerOptions>) {
  server = await startTestServer(options);
  const host = await raw();
  host.send({ kind: 'create', version: 1 });
  const created = await host.next('created');
  const join = async () => {
    const c = await raw();
    c.send({ kind: 'join', version: 1, roomId: created.roomId, token: created.joinToken });
    return { c, joined: await c.next('joined') };
  };
  const victim = await join();
  const attacker = await join();
  host.socket.pause();
  victim.c.socket.pause();
  return { host, created, victim, attacker };
}

/** 190 signal frames of 60 KB (11.4 MB), to the host and the victim in turn. */
function flood(attacker: RawClient, targets: string[]): void {
  const data = 'x'.repeat(60_000);
  for (let i = 0; i < 190; i++) attacker.send({ kind: 'signal', to: targets[i % targets.length], data });
}

/** Host and victim read again: neither was closed, and a signal between them still flows. */
async function stillConnected(host: RawClient, victim: RawClient, victimId: string, hostId: string) {
  host.socket.resume();
  victim.socket.resume();
  await new Promise((resolve) => setTimeout(resolve, 300));
  expect(host.closed).toBeNull();
  expect(victim.closed).toBeNull();
  victim.send({ kind: 'signal', to: hostId, data: { sdp: 'still here' } });
  await until(
    () => host.messages.some((m) => m.kind === 'signal' && m.from === victimId && typeof m.data === 'object'),
    5_000,
  );
  expect(server.signalingStats().peers).toBe(3);
}

const codesOf = (client: RawClient) => client.messages.flatMap((m) => (m.kind === 'error' ? [m.code] : []));

describe('a signal flood at slow receivers', () => {
  it('holds the sender to its byte budget and keeps both receivers connected', async () => {
    const { host, created, victim, attacker } = await slowRoom({});
    flood(attacker.c, [created.peerId, victim.joined.peerId]);
    await new Promise((resolve) => setTimeout(resolve, 2_000)); // the receivers stay slow for 2 s
    await stillConnected(host, victim.c, victim.joined.peerId, created.peerId);
    expect(codesOf(attacker.c)).toContain('signal-budget');
    expect(attacker.c.closed).toBeNull();
    expect(server.signalingStats().rejections['signal-budget']).toBeGreaterThan(100);
    expect(server.signalingStats().rejections.backpressure).toBeUndefined();
  });

  it('drops frames to a backlogged receiver (receiver-busy) when the sender is within its budget', async () => {
    // a byte budget that does not bind, and a small send queue: only the receiver side can hold
    const limits = { signalBytesPerSecond: 1e9, signalBurstBytes: 1e9, maxBufferedBytes: 256 * 1024 };
    const { host, created, victim, attacker } = await slowRoom({ limits });
    flood(attacker.c, [created.peerId, victim.joined.peerId]);
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    await stillConnected(host, victim.c, victim.joined.peerId, created.peerId);
    expect(codesOf(attacker.c)).toContain('receiver-busy');
    const busy = attacker.c.messages.find((m) => m.kind === 'error' && m.code === 'receiver-busy');
    expect(busy).toMatchObject({ ref: 'signal' });
    expect(server.signalingStats().rejections['receiver-busy']).toBeGreaterThan(0);
    expect(server.signalingStats().rejections.backpressure).toBeUndefined();
  });
  it("keeps a watcher that is not reading connected through the host's views; it gets the points it missed later", async () => {
    const limits = { maxBufferedBytes: 64 * 1024, publishesPerSecond: 1000, publishBurst: 1000, watchBurstBytes: 1e9 };
    server = await startTestServer({ limits });
    const host = await raw();
    host.send({ kind: 'create', version: 1 });
    const created = await host.next('created');
    const watcher = await raw();
    watcher.send({ kind: 'watch', version: 1, roomId: created.roomId, key: created.watchKey });
    await watcher.next('watching');
    watcher.socket.pause();
    // 60 views of about 150 KB (1,000 new points each): 9 MB
    for (let i = 0; i < 60; i++) {
      const ts = Array.from({ length: 1000 }, (_, j) => 1_000 + i * 1000 + j);
      host.send({ kind: 'publish', data: roomView(created.roomId, ts) });
    }
    host.send({ kind: 'rotate-token' }); // answered once every publish before it is handled
    await host.next('token', 10_000);
    await new Promise((resolve) => setTimeout(resolve, 500));
    watcher.socket.resume();
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(watcher.closed).toBeNull();
    expect(server.signalingStats().rejections['receiver-busy']).toBeGreaterThan(0);
    expect(server.signalingStats().rejections.backpressure).toBeUndefined();
    host.send({ kind: 'publish', data: roomView(created.roomId, [999_999]) });
    await until(
      () => watcher.messages.some((m) => m.kind === 'view' && m.data.points.some((p) => p.t === 999_999)),
      5_000,
    );
  });
});
