/**
 * Bad input at /signal: every class answers an error or a 1008/1009 close, and a bystander pair
 * in another room keeps exchanging signals afterwards.
 */
import { connect } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { RunningServer } from './index.ts';
import { RawClient, startTestServer, until } from './test-server.ts';

let server: RunningServer;
const clients: RawClient[] = [];
afterEach(async () => {
  for (const client of clients.splice(0)) client.close();
  await server?.close();
});

async function raw(options?: { autoPong?: boolean }): Promise<RawClient> {
  const c = await RawClient.open(server.signalUrl, options);
  clients.push(c);
  return c;
}

/** A host and a member in their own room, and a check that signals still flow between them. */
async function bystanders(): Promise<() => Promise<void>> {
  const host = await raw();
  host.send({ kind: 'create', version: 1 });
  const created = await host.next('created');
  const member = await raw();
  member.send({ kind: 'join', version: 1, roomId: created.roomId, token: created.joinToken });
  const joined = await member.next('joined');
  return async () => {
    member.send({ kind: 'signal', to: created.peerId, data: { n: 1 } });
    expect(await host.next('signal')).toEqual({ kind: 'signal', from: joined.peerId, data: { n: 1 } });
    expect(member.closed).toBeNull();
  };
}

describe('signaling under bad input', () => {
  it('answers each malformed frame with a reason code and keeps the socket open', async () => {
    server = await startTestServer();
    const stillWorks = await bystanders();
    const attacker = await raw();
    const cases: [unknown, string][] = [
      ['{not json', 'bad-json'],
      ['', 'bad-json'],
      ['42', 'schema'],
      ['null', 'schema'],
      [{ kind: 7 }, 'schema'],
      [{ kind: 'launch-missiles' }, 'unknown-kind'],
      [{ kind: 'join', version: 1, roomId: 5, token: null }, 'schema'],
      [{ kind: 'join', version: 1, roomId: 'a b', token: 'x' }, 'schema'],
      [{ kind: 'signal', to: 'x' }, 'schema'],
      [{ kind: 'signal', to: 'x', data: 1 }, 'not-in-room'],
      [{ kind: 'rotate-token' }, 'not-in-room'],
      [`${'['.repeat(5000)}${']'.repeat(5000)}`, 'too-deep'],
      [
        JSON.stringify({ kind: 'signal', to: 'x', data: JSON.parse(`${'{"a":'.repeat(40)}1${'}'.repeat(40)}`) }),
        'too-deep',
      ],
    ];
    for (const [frame, code] of cases) {
      attacker.send(frame);
      expect(await attacker.error(), JSON.stringify(frame).slice(0, 80)).toBe(code);
    }
    attacker.socket.send(Buffer.from([0xff, 0x00, 0xde, 0xad, 0xbe, 0xef]));
    expect(await attacker.error()).toBe('binary-frame');
    expect(attacker.closed).toBeNull();
    expect(server.signalingStats().rejections).toMatchObject({ 'bad-json': 2, 'unknown-kind': 1, 'too-deep': 2 });
    await stillWorks();
  });

  it('closes an oversized frame with 1009', async () => {
    server = await startTestServer({ limits: { maxFrameBytes: 4096, maxPublishBytes: 4096 } });
    const stillWorks = await bystanders();
    const attacker = await raw();
    attacker.send({ kind: 'signal', to: 'x', data: 'x'.repeat(5000) });
    expect(await attacker.closedWith()).toBe(1009);
    await stillWorks();
  });

  it('drops a flood over the budget, says so, then closes with 1008', async () => {
    server = await startTestServer({ limits: { messagesPerSecond: 10, messageBurst: 20, maxDroppedMessages: 50 } });
    const stillWorks = await bystanders();
    const attacker = await raw();
    attacker.send({ kind: 'create', version: 1 });
    await attacker.next('created');
    for (let i = 0; i < 500; i++) attacker.send({ kind: 'rotate-token' });
    expect(await attacker.closedWith()).toBe(1008);
    const codes = attacker.messages.filter((m) => m.kind === 'error').map((m) => m.kind === 'error' && m.code);
    expect(codes).toContain('rate-limited');
    // 20 (burst) answered, plus a little refill; the rest dropped without an answer each
    expect(attacker.messages.filter((m) => m.kind === 'token').length).toBeLessThan(30);
    expect(server.signalingStats().rejections.flood).toBe(1);
    await stillWorks();
  });

  it('terminates a socket that stops answering pings, and one that never joins a room', async () => {
    server = await startTestServer({ limits: { heartbeatIntervalMs: 30, idleTimeoutMs: 100, helloTimeoutMs: 5000 } });
    const stillWorks = await bystanders();
    const silent = await raw({ autoPong: false });
    silent.send({ kind: 'create', version: 1 });
    await silent.next('created');
    expect(await silent.closedWith(1000)).toBe(1006); // terminated, no close frame
    await stillWorks();
    await server.close();

    server = await startTestServer({ limits: { helloTimeoutMs: 100 } });
    const lurker = await raw();
    expect(await lurker.closedWith()).toBe(1008);
    expect(lurker.messages).toMatchObject([{ kind: 'error', code: 'hello-timeout' }]);
  });

  it('survives connection churn and half-open garbage, and frees everything', async () => {
    server = await startTestServer({ limits: { maxConnections: 50 } });
    const stillWorks = await bystanders();
    for (let round = 0; round < 5; round++) {
      const batch = await Promise.all(Array.from({ length: 20 }, () => RawClient.open(server.signalUrl)));
      batch.forEach((c, i) => {
        if (i % 2) c.send({ kind: 'create', version: 1 });
      });
      for (const c of batch) c.close();
    }
    // raw TCP garbage on the upgrade path and a bad WebSocket frame
    await new Promise<void>((resolve) => {
      const socket = connect(server.port, '127.0.0.1', () => {
        socket.end('GET /signal HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n\x00\xff garbage');
      });
      socket.on('error', () => {});
      socket.on('close', () => resolve());
      socket.resume();
    });
    const bad = await raw();
    bad.socket.send(Buffer.from([0xff]), { binary: false }); // invalid UTF-8 in a text frame: ws closes 1007
    expect(await bad.closedWith()).toBe(1007);
    await until(() => server.signalingStats().connections === 2);
    await stillWorks();
    // the rooms churners created are empty and within their grace period; capacity is bounded by maxRooms
    expect(server.signalingStats().peers).toBe(2);
  });

  it('refuses sockets beyond maxConnections with 1013', async () => {
    server = await startTestServer({ limits: { maxConnections: 3 } });
    const stillWorks = await bystanders();
    await raw();
    const extra = await raw();
    expect(await extra.closedWith()).toBe(1013);
    expect(extra.messages).toMatchObject([{ kind: 'error', code: 'server-full' }]);
    await stillWorks();
  });

  it('answers 404 to upgrades on other paths', async () => {
    server = await startTestServer();
    await expect(RawClient.open(server.signalUrl.replace('/signal', '/other'))).rejects.toThrow(/404/);
  });
});
