/**
 * `shoal server` killed with SIGKILL and started again on the same port and rooms directory while
 * `shoal host` and two `shoal worker --backend cpu` run: all three say they
 * are reconnecting, enter the same room again as the same peers (the host reclaims, the workers
 * rejoin), and rounds go on committing; nobody opens a new room.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadWrtc } from './room.ts';
import { eventsOf, freePort, type Proc, shoalProcesses } from './test-processes.ts';

const { start, until, killAll } = shoalProcesses();
afterAll(killAll);

const committed = (p: Proc) => eventsOf(p, 'round-committed').length;
const signaling = (p: Proc) => eventsOf(p, 'signaling').map((line) => line.state);

describe('shoal server restarted under a running room', () => {
  it('keeps the room: host and workers reconnect as themselves and rounds commit again', {
    timeout: 240_000,
  }, async () => {
    await loadWrtc(); // fails loudly (never skips) without WebRTC in Node
    const dir = mkdtempSync(join(tmpdir(), 'shoal-server-restart-'));
    const port = await freePort();
    const serverArgs = ['server', '--port', String(port), '--host', '127.0.0.1', '--rooms-dir', dir];
    const url = `http://127.0.0.1:${port}`;
    try {
      let server = start('server', serverArgs);
      await until(() => server.text.some((line) => line.includes('Shoal is running')), 30_000, 'the server');
      const training = ['--preset', 'nano', '--inner-steps', '4', '--batch', '2', '--eval-batches', '1'];
      const host = start('host', ['host', '--server', url, ...training, '--metrics-every-ms', '500', '--json']);
      const room = await until(() => host.lines[0], 30_000, 'the room line');
      const roomId = String(room.roomId);
      const workerArgs = ['worker', '--server', url, '--room', roomId, '--token', String(room.joinToken)];
      const workers = [0, 1].map((i) => start(`worker ${i}`, [...workerArgs, '--backend', 'cpu', '--json']));
      const peerIds = await Promise.all(
        workers.map((w) => until(() => eventsOf(w, 'joined')[0]?.peer as string | undefined, 30_000, 'a join')),
      );
      await until(() => committed(host) >= 4, 120_000, 'four commits before the restart');

      server.child.kill('SIGKILL');
      await server.exit;
      await until(
        () => [host, ...workers].every((p) => signaling(p).includes('reconnecting')),
        30_000,
        'everyone reconnecting',
      );
      const before = committed(host);
      server = start('server again', serverArgs);
      await until(
        () => [host, ...workers].every((p) => signaling(p).at(-1) === 'connected'),
        60_000,
        'everyone back in the room',
      );
      expect(server.text.join('\n')).toMatch(/\(1 taken back\)/);
      // the same room and peers: the host reclaimed it, the workers rejoined with their own ids
      const reclaimed = server.lines.filter((line) => line.event === 'host-reclaimed');
      expect(reclaimed.map((line) => line.room)).toEqual([roomId]);
      const rejoined = server.lines.filter((line) => line.event === 'peer-joined' && line.rejoin === true);
      expect(rejoined.map((line) => line.peer).sort()).toEqual([...peerIds].sort());
      expect(eventsOf(host, 'room')).toHaveLength(1);
      await until(() => committed(host) >= before + 4, 120_000, 'four commits after the restart');
      for (const w of workers) expect(w.child.exitCode).toBeNull();
    } finally {
      killAll();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
