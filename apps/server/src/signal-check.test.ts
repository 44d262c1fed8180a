/**
 * `check` at /signal: a join page asks whether a room exists and its token admits, and what the
 * room trains, before a person consents; nothing is seated and a wrong token learns nothing more.
 */
import { buildLayout, PRESETS } from '@shoal/model';
import { RUN_CONFIG } from '@shoal/protocol/test-fixtures';
import { describe, expect, it } from 'vitest';
import type { RunningServer } from './index.ts';
import { roomView, startTestServer, testClients, until } from './test-server.ts';

let server: RunningServer;
const { client, raw } = testClients(() => server);

describe('checking a room before joining', () => {
  it('tells the host’s presence, the status and what the room trains, and seats nobody', async () => {
    server = await startTestServer();
    const host = await client();
    const created = await host.create();
    const visitor = await client();
    // before the host's first publish: the room exists, nothing is known of its run
    expect(await visitor.check(created.roomId, created.joinToken)).toEqual({
      roomId: created.roomId,
      hostPresent: true,
      status: null,
      about: null,
    });
    const tiny = { ...RUN_CONFIG, model: { ...PRESETS.tiny } };
    host.publish(roomView(created.roomId, [1_000], { status: 'running', config: tiny }));
    const token = await host.rotateToken(); // a reply on the host's socket: the publish is in
    const checked = await visitor.check(created.roomId, token);
    expect(checked).toEqual({
      roomId: created.roomId,
      hostPresent: true,
      status: 'running',
      about: { preset: 'tiny', params: buildLayout(PRESETS.tiny).size, corpus: RUN_CONFIG.data.corpus },
    });
    expect(server.signalingStats().peers).toBe(1);

    // a custom shape names no preset; the host away is told
    host.publish(
      roomView(created.roomId, [2_000], { config: { ...RUN_CONFIG, model: { ...PRESETS.tiny, nLayer: 3 } } }),
    );
    host.close();
    await until(() => server.signalingStats().peers === 0);
    const away = await visitor.check(created.roomId, token);
    expect(away.hostPresent).toBe(false);
    expect(away.about?.preset).toBeNull();
    expect(away.about?.params).toBe(buildLayout({ ...PRESETS.tiny, nLayer: 3 }).size);

    // the same socket may still join afterwards
    const joined = await visitor.join(created.roomId, token);
    expect(joined.roomId).toBe(created.roomId);
  });

  it('refuses an unknown room and a wrong or rotated token with the codes join uses, telling nothing else', async () => {
    server = await startTestServer();
    const host = await client();
    const created = await host.create();
    host.publish(roomView(created.roomId, [1_000]));
    const visitor = await client();
    await expect(visitor.check('nosuchroom', created.joinToken)).rejects.toMatchObject({ code: 'no-such-room' });
    await expect(visitor.check(created.roomId, created.watchKey as string)).rejects.toMatchObject({
      code: 'bad-token',
    });
    const old = created.joinToken;
    await host.rotateToken();
    const probe = await raw();
    probe.send({ kind: 'check', version: 1, roomId: created.roomId, token: old });
    const refusal = await probe.next('error');
    expect(refusal).toEqual({ kind: 'error', code: 'bad-token', message: 'wrong or rotated join token', ref: 'check' });
    expect(probe.messages).toEqual([]);
    probe.send({ kind: 'check', version: 0, roomId: created.roomId, token: old });
    expect(await probe.error()).toBe('version');
  });

  it('is held to the message budget like every frame', async () => {
    server = await startTestServer({ limits: { messagesPerSecond: 1, messageBurst: 3 } });
    const host = await client();
    const created = await host.create();
    const probe = await raw();
    for (let i = 0; i < 6; i++)
      probe.send({ kind: 'check', version: 1, roomId: created.roomId, token: created.joinToken });
    await until(() => probe.messages.some((m) => m.kind === 'error' && m.code === 'rate-limited'));
    expect(probe.messages.filter((m) => m.kind === 'checked').length).toBe(3);
  });
  it('answers at most a budget of checks per address; another address still checks', async () => {
    server = await startTestServer({ limits: { checksPerMinutePerIp: 60, checkBurstPerIp: 10 } });
    const created = await (await client()).create();
    const guesser = await raw({ from: '127.0.0.2' });
    for (let i = 0; i < 100; i++)
      guesser.send({ kind: 'check', version: 1, roomId: created.roomId, token: `wrong${i}` });
    await until(() => guesser.messages.length === 100, 5_000);
    const codes = guesser.messages.map((m) => (m.kind === 'error' ? m.code : m.kind));
    expect(codes.filter((code) => code === 'bad-token').length).toBeLessThanOrEqual(11);
    expect(codes.filter((code) => code === 'check-rate-limited').length).toBeGreaterThanOrEqual(89);
    expect(server.signalingStats().rejections['check-rate-limited']).toBeGreaterThanOrEqual(89);
    expect(guesser.closed).toBeNull();
    const visitor = await client();
    expect((await visitor.check(created.roomId, created.joinToken)).roomId).toBe(created.roomId);
  });
});
