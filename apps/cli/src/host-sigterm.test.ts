/**
 * `shoal host` stops on SIGTERM even when the signaling server goes away at the same moment: a `shoal server`, a host with --checkpoint-dir and one `shoal worker --backend cpu`
 * as child processes on real WebRTC over loopback. Once rounds commit, the server is frozen
 * (SIGSTOP: a server whose machine vanished, whose end of the socket never closes or answers) and
 * the host gets SIGTERM at the same moment. The host must exit cleanly within 10 s (not wait out
 * ws's 30 s closing handshake), and the checkpoint it leaves must load and hold every round
 * it printed as committed.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { decodeRoomCheckpoint } from '@shoal/room';
import { afterAll, describe, expect, it } from 'vitest';
import { CHECKPOINT_NAME, STATE_NAME } from './host-resume.ts';
import { loadWrtc } from './room.ts';
import { eventsOf, shoalProcesses } from './test-processes.ts';

const { start, until, killAll } = shoalProcesses();

afterAll(killAll);

describe('shoal host on SIGTERM', () => {
  it('exits within 10 s with a checkpoint that loads when the server goes away at the same moment', {
    timeout: 150_000,
  }, async () => {
    await loadWrtc(); // fails loudly (never skips) without WebRTC in Node
    const dir = mkdtempSync(join(tmpdir(), 'shoal-sigterm-'));
    try {
      const server = start('server', ['server', '--port', '0', '--host', '127.0.0.1']);
      const url = await until(
        () => server.text.map((line) => /Open (http:\/\/\S+?)\.? in a browser/.exec(line)?.[1]).find(Boolean),
        30_000,
        'the server’s URL',
      );
      const training = ['--preset', 'nano', '--inner-steps', '4', '--batch', '2', '--eval-batches', '1'];
      const host = start('host', ['host', '--server', url, ...training, '--checkpoint-dir', dir, '--json']);
      const room = await until(() => host.lines[0], 30_000, 'the room line');
      expect(room.event).toBe('room');
      start('worker', [
        'worker',
        ...['--server', url, '--room', String(room.roomId), '--token', String(room.joinToken)],
        ...['--backend', 'cpu', '--json'],
      ]);
      await until(() => eventsOf(host, 'round-committed').length >= 2, 90_000, 'two commits');

      const stoppedAt = performance.now();
      server.child.kill('SIGSTOP'); // killAll SIGKILLs it
      host.child.kill('SIGTERM');
      const exit = await Promise.race([host.exit, new Promise((resolve) => setTimeout(resolve, 10_000, 'running'))]);
      const seconds = (performance.now() - stoppedAt) / 1000;
      console.log(
        `SIGTERM, the server gone: the host ${exit === 'running' ? 'still ran' : 'exited'} after ${seconds.toFixed(1)} s`,
      );
      expect(exit, `the host's exit code within 10 s of SIGTERM\n${host.stderr.join('').slice(-2000)}`).toBe(0);

      const saved = decodeRoomCheckpoint(readFileSync(join(dir, CHECKPOINT_NAME)), readFileSync(join(dir, STATE_NAME)));
      const committed = eventsOf(host, 'round-committed');
      for (const [p, f] of saved.state.fragments.entries()) {
        const last = committed.filter((e) => e.fragment === p).at(-1);
        expect(f.round, `fragment ${p}`).toBe(last?.round ?? 0);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
