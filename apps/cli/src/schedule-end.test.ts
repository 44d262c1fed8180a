/**
 * The end of the schedule: `shoal host --steps N` with two
 * `shoal worker --backend cpu` stops by itself once the room's step (the median worker's on the
 * learning-rate schedule) reaches N: an `ended` event, a last checkpoint, exit 0. The workers hear
 * it from the host's relayed summary, say the room has ended, leave, and exit 0 too.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadWrtc } from './room.ts';
import { eventsOf, freePort, shoalProcesses } from './test-processes.ts';

const { start, until, killAll } = shoalProcesses();
afterAll(killAll);

const STEPS = 40;

describe('a room at the end of its schedule', () => {
  it('stops by itself: shoal host and its workers end cleanly, exit 0', { timeout: 180_000 }, async () => {
    await loadWrtc(); // fails loudly (never skips) without WebRTC in Node
    const dir = mkdtempSync(join(tmpdir(), 'shoal-schedule-end-'));
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    try {
      const server = start('server', ['server', '--port', String(port), '--host', '127.0.0.1', '--no-persist']);
      await until(() => server.text.some((line) => line.includes('Shoal is running')), 30_000, 'the server');
      const training = ['--preset', 'nano', '--inner-steps', '4', '--batch', '2', '--steps', String(STEPS)];
      const host = start('host', [
        'host',
        '--server',
        url,
        ...training,
        '--eval-batches',
        '1',
        '--metrics-every-ms',
        '500',
        '--publish-every-ms',
        '500',
        '--checkpoint-dir',
        join(dir, 'ckpt'),
        '--json',
      ]);
      const room = await until(() => host.lines[0], 30_000, 'the room line');
      const workerArgs = ['worker', '--server', url, '--room', String(room.roomId), '--token', String(room.joinToken)];
      const workers = [0, 1].map((i) => start(`worker ${i}`, [...workerArgs, '--backend', 'cpu', '--json']));

      expect(await host.exit).toBe(0);
      const [ended] = eventsOf(host, 'ended');
      expect(ended).toMatchObject({ reason: 'schedule' });
      expect(ended?.step).toBeGreaterThanOrEqual(STEPS);
      // the last checkpoint comes after the end
      const lines = host.lines.map((line) => line.event);
      expect(lines.lastIndexOf('checkpoint')).toBeGreaterThan(lines.indexOf('ended'));
      for (const w of workers) {
        expect(await w.exit).toBe(0);
        expect(eventsOf(w, 'room-ended')).toEqual([{ event: 'room-ended', why: 'its schedule is done' }]);
        // each trained about the schedule's steps: the room's step is the median worker's
        const [left] = eventsOf(w, 'left');
        const steps = (left?.metrics as { innerStep: number } | undefined)?.innerStep ?? 0;
        expect(steps).toBeGreaterThan(STEPS / 2);
      }
    } finally {
      killAll();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
