import { jsonDepth } from '@shoal/protocol';
import { SignalClient } from '@shoal/signaling';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { WebSocket } from 'ws';
import type { RunningServer } from './index.ts';
import { DEFAULT_SIGNALING_LIMITS, resolveIceServers, resolveSignalingLimits } from './signal-config.ts';
import { startTestServer, until } from './test-server.ts';

let server: RunningServer | undefined;
afterEach(async () => {
  vi.unstubAllEnvs();
  await server?.close();
  server = undefined;
});

describe('signaling configuration', () => {
  it('takes ICE servers from the option, else SHOAL_ICE_SERVERS, else none', () => {
    const turn = { urls: ['turn:turn.example.org:3478'], username: 'u', credential: 'c' };
    expect(resolveIceServers([turn], '[]')).toEqual([turn]);
    expect(resolveIceServers(undefined, JSON.stringify([turn]))).toEqual([turn]);
    expect(resolveIceServers(undefined, undefined)).toEqual([]);
    expect(() => resolveIceServers(undefined, '[{')).toThrow(/SHOAL_ICE_SERVERS is not JSON/);
    expect(() => resolveIceServers(undefined, '[{"url":"stun:x"}]')).toThrow(/SHOAL_ICE_SERVERS must be/);
  });

  it('hands the ICE servers of SHOAL_ICE_SERVERS to clients', async () => {
    vi.stubEnv('SHOAL_ICE_SERVERS', '[{"urls":"stun:stun.example.org"}]');
    server = await startTestServer();
    const client = await SignalClient.connect(server.signalUrl, WebSocket);
    expect((await client.create()).iceServers).toEqual([{ urls: 'stun:stun.example.org' }]);
    client.close();
  });

  it('checks limits and fills in defaults', () => {
    expect(resolveSignalingLimits({ maxRooms: 5 })).toEqual({ ...DEFAULT_SIGNALING_LIMITS, maxRooms: 5 });
    expect(() => resolveSignalingLimits({ maxFrameBytes: 0 })).toThrow(/maxFrameBytes/);
    expect(() => resolveSignalingLimits({ messagesPerSecond: Number.NaN })).toThrow(/messagesPerSecond/);
  });

  it('writes one JSON line per event to the injected logger', async () => {
    const lines: string[] = [];
    server = await startTestServer({ logger: (line) => lines.push(line) });
    const client = await SignalClient.connect(server.signalUrl, WebSocket);
    await client.create();
    client.close();
    await until(() => lines.some((line) => line.includes('"disconnect"')));
    const events = lines.map((line) => JSON.parse(line));
    expect(events.map((event) => event.event)).toEqual(['connect', 'room-created', 'peer-left', 'disconnect']);
    expect(events[0].t).toMatch(/^\d{4}-\d\d-\d\dT/);
  });

  it('measures JSON nesting without counting brackets inside strings', () => {
    expect(jsonDepth('{"a":[1,{"b":2}]}')).toBe(3);
    expect(jsonDepth('{"a":"[[[[{{{{\\"[["}')).toBe(1);
    expect(jsonDepth('1')).toBe(0);
  });
});
