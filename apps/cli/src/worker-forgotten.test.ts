/**
 * A server that comes back without a member (its record lost the member's secret: a rooms
 * directory restored from an older copy, say) refuses that member's secret: `shoal worker` then
 * joins again with the join token, as a new peer, and trains on; before, bad-secret was final
 * and the worker gave up.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadWrtc } from './room.ts';
import { eventsOf, freePort, type Proc, shoalProcesses } from './test-processes.ts';

const { start, until, killAll } = shoalProcesses();
afterAll(killAll);

const committed = (p: Proc) => eventsOf(p, 'round-committed').length;

describe('shoal worker in a room whose server forgot it', () => {
  it('joins again with the join token as a new peer and trains on', { timeout: 240_000 }, async () => {
    await loadWrtc(); // fails loudly (never skips) without WebRTC in Node
    const dir = mkdtempSync(join(tmpdir(), 'shoal-forgotten-'));
    const rooms = join(dir, 'rooms');
    const port = await freePort();
    const serverArgs = ['server', '--port', String(port), '--host', '127.0.0.1', '--rooms-dir', rooms];
    const url = `http://127.0.0.1:${port}`;
    try {
      let server = start('server', serverArgs);
      await until(() => server.text.some((line) => line.includes('Shoal is running')), 30_000, 'the server');
      const training = ['--preset', 'nano', '--inner-steps', '4', '--batch', '2', '--eval-batches', '1'];
      const host = start('host', ['host', '--server', url, ...training, '--metrics-every-ms', '500', '--json']);
      const room = await until(() => host.lines[0], 30_000, 'the room line');
      const roomId = String(room.roomId);
      const worker = start('worker', [
        ...['worker', '--server', url, '--room', roomId, '--token', String(room.joinToken)],
        ...['--backend', 'cpu', '--json'],
      ]);
      const first = await until(() => eventsOf(worker, 'joined')[0]?.peer as string | undefined, 30_000, 'a join');
      await until(() => committed(host) >= 2, 120_000, 'two commits');

      server.child.kill('SIGKILL');
      await server.exit;
      // the kept record forgets the worker's secret
      const file = join(rooms, `${roomId}.room.json`);
      const record = JSON.parse(readFileSync(file, 'utf8'));
      expect(Object.keys(record.members)).toContain(first);
      record.members = {};
      writeFileSync(file, JSON.stringify(record));
      const before = committed(host);
      server = start('server again', serverArgs);

      const rejoining = await until(() => eventsOf(worker, 'rejoining')[0], 60_000, 'the worker joining again');
      expect(rejoining).toMatchObject({ peer: first, why: expect.stringMatching(/secret/) });
      const second = await until(() => eventsOf(worker, 'joined')[1]?.peer as string | undefined, 30_000, 'a new join');
      expect(second).not.toBe(first);
      await until(() => committed(host) >= before + 2, 120_000, 'two commits after it joined again');
      expect(worker.child.exitCode).toBeNull();
    } finally {
      killAll();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
