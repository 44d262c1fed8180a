import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { resolveRoomsDir } from '@shoal/server';
import { describe, expect, it } from 'vitest';
import { parseLimits } from './server.ts';

const shoal = fileURLToPath(new URL('../bin/shoal.mjs', import.meta.url));

/** Runs `shoal …`, resolving with the exit code and output once it exits (or is stopped). */
function run(args: string[], stopWhen?: RegExp): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [shoal, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    const collect = (chunk: Buffer) => {
      out += chunk.toString();
      if (stopWhen?.test(out)) child.kill('SIGTERM');
    };
    child.stdout.on('data', collect);
    child.stderr.on('data', collect);
    child.on('exit', (code) => resolve({ code, out }));
  });
}

describe('shoal server flags', () => {
  it('parses --limit NAME=VALUE pairs and names the valid ones on a mistake', () => {
    expect(parseLimits(['maxPeersPerRoom=8', 'maxFrameBytes=1024'])).toEqual({
      maxPeersPerRoom: 8,
      maxFrameBytes: 1024,
    });
    expect(() => parseLimits(['maxPeers=8'])).toThrow(
      /expected NAME=VALUE with NAME one of maxFrameBytes, .*maxPeersPerRoom/,
    );
    expect(() => parseLimits(['maxRooms=0'])).toThrow(/must be a positive number/);
    expect(() => parseLimits(['maxRooms'])).toThrow(/expected NAME=VALUE/);
  });

  it('keeps rooms in --rooms-dir, else SHOAL_ROOMS_DIR, else the per-user state directory; --no-persist or an empty one: memory', () => {
    const env = { HOME: '/home/ann' };
    expect(resolveRoomsDir({ roomsDir: '/srv/rooms' }, { SHOAL_ROOMS_DIR: '/elsewhere' })).toBe('/srv/rooms');
    expect(resolveRoomsDir({}, { SHOAL_ROOMS_DIR: '/elsewhere' })).toBe('/elsewhere');
    expect(resolveRoomsDir({}, { XDG_STATE_HOME: '/state' })).toBe('/state/shoal/rooms');
    expect(resolveRoomsDir({}, env)).toMatch(/\/\.local\/state\/shoal\/rooms$/);
    expect(resolveRoomsDir({ persist: false, roomsDir: '/srv/rooms' }, env)).toBeNull();
    expect(resolveRoomsDir({ roomsDir: '' }, env)).toBeNull();
    expect(resolveRoomsDir({}, { SHOAL_ROOMS_DIR: '' })).toBeNull();
  });

  it('starts with limits and ICE servers, and refuses bad ones in one line', { timeout: 30_000 }, async () => {
    const ok = await run(
      [
        'server',
        '--port',
        '0',
        '--host',
        '127.0.0.1',
        '--limit',
        'maxPeersPerRoom=8',
        '--ice-servers',
        '[{"urls":"stun:stun.example.org"}]',
        '--no-persist',
      ],
      /Shoal is running/,
    );
    expect(ok.out).toMatch(/Rooms are kept in memory only/);
    expect(ok.out).toMatch(/Shoal is running\. Open http:\/\/localhost:\d+/);
    const badLimit = await run(['server', '--port', '0', '--limit', 'nope=1']);
    expect(badLimit.code).toBe(1);
    expect(badLimit.out.trim()).toMatch(/^shoal: --limit nope=1: expected NAME=VALUE/);
    const badIce = await run(['server', '--port', '0', '--ice-servers', '[{"url":1}]']);
    expect(badIce.code).toBe(1);
    expect(badIce.out).toMatch(/^shoal: --ice-servers: /);
    expect(badIce.out).not.toMatch(/\n\s+at /); // no stack trace
  });
});
