/**
 * How much of the time a GPU volunteer's engine has a step queued (`npm run bench:queue`): `shoal
 * train` alone, then a room on this machine (a signaling server in this process, `shoal host`, two
 * `shoal worker --backend webgpu` over WebRTC on loopback) at each --pipeline-depth. Each worker's
 * figure is its `left` event's queue.fraction: the wall time since its first step during which at
 * least one submitted step had not finished. Waits for rounds (stalledMs) count as idle, as they
 * are. Prints a table, then one JSON line, and writes the JSON to --out.
 *
 *   npm run bench:queue -- [--preset nano] [--batch 4] [--steps 120] [--inner-steps 20]
 *     [--overlap 5] [--depths 1,3] [--repeats 1] [--out bench/results/volunteer-queue-<cores>core.json]
 * About a minute per room on 2 cores with lavapipe and the defaults.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { startServer } from '@shoal/server';
import { eventsOf, shoalProcesses } from '../apps/cli/src/test-processes.ts';
import { formatJson } from './format-json.ts';

const { values: args } = parseArgs({
  options: {
    preset: { type: 'string', default: 'nano' },
    batch: { type: 'string', default: '4' },
    steps: { type: 'string', default: '120' },
    'inner-steps': { type: 'string', default: '20' },
    overlap: { type: 'string', default: '5' },
    depths: { type: 'string', default: '1,3' },
    repeats: { type: 'string', default: '1' },
    out: { type: 'string', default: `bench/results/volunteer-queue-${cpus().length}core.json` },
  },
});
const [preset, batch, steps] = [String(args.preset), String(args.batch), String(args.steps)];
const depths = (args.depths ?? '').split(',').map(Number);
const repeats = Number(args.repeats);
// (its `until` fails once any process exits, and here each run's processes exit when it ends)
const { start, killAll } = shoalProcesses();
const dir = mkdtempSync(join(tmpdir(), 'volunteer-queue-'));

/** Polls `condition` every 200 ms until it gives a value; fails naming `what` after `timeoutMs`. */
async function poll<T>(condition: () => T | undefined | false, timeoutMs: number, what: string): Promise<T> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const value = condition();
    if (value) return value;
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

interface WorkerFigures {
  fraction: number;
  steps: number;
  stalledMs: number;
  merges: number;
}

/** `shoal train` alone on the same model, batch and steps, validation off: its queue fraction. */
async function trainAlone(): Promise<{ fraction: number; adapter: string }> {
  const train = start('train', [
    'train',
    ...['--backend', 'webgpu', '--preset', preset, '--batch', batch, '--steps', steps],
    ...['--eval-every', '0', '--checkpoint-dir', join(dir, 'train'), '--json'],
  ]);
  const line = await poll(() => train.lines.find((l) => 'queued' in l), 900_000, 'shoal train');
  await train.exit;
  return { fraction: Number(line.queued), adapter: String(line.adapter) };
}

/** A room of two WebGPU workers at `depth`, until the host's schedule ends: each worker's figures. */
async function room(url: string, depth: number): Promise<{ workers: WorkerFigures[]; commits: number }> {
  const host = start('host', [
    'host',
    ...['--server', url, '--preset', preset, '--batch', batch, '--steps', steps],
    ...['--inner-steps', String(args['inner-steps']), '--overlap', String(args.overlap)],
    ...['--eval-every-ms', '600000', '--checkpoint-dir', join(dir, `room-${depth}`), '--json'],
  ]);
  const opened = await poll(() => eventsOf(host, 'room')[0], 60_000, 'the room');
  const workers = [0, 1].map((i) =>
    start(`worker ${i}`, [
      'worker',
      ...['--server', url, '--room', String(opened.roomId), '--token', String(opened.joinToken)],
      ...['--backend', 'webgpu', '--pipeline-depth', String(depth), '--json'],
    ]),
  );
  const left = await poll(
    () => {
      const lines = workers.map((w) => eventsOf(w, 'left')[0]);
      return lines.every(Boolean) && lines;
    },
    1_800_000,
    'both workers to leave at the end of the schedule',
  );
  await Promise.all([host.exit, ...workers.map((w) => w.exit)]);
  return {
    commits: eventsOf(host, 'round-committed').length,
    workers: left.map((line) => {
      const queue = line?.queue as { fraction: number } | undefined;
      const metrics = line?.metrics as Record<string, number>;
      if (!queue) throw new Error(`a worker reported no queue figures: ${JSON.stringify(line)}`);
      return {
        fraction: queue.fraction,
        steps: metrics.innerStep ?? 0,
        stalledMs: metrics.stalledMs ?? 0,
        merges: metrics.merges ?? 0,
      };
    }),
  };
}

const server = await startServer({ port: 0, logger: null });
const percent = (x: number) => `${(100 * x).toFixed(1)}%`;
try {
  const alone = [];
  for (let r = 0; r < repeats; r++) alone.push(await trainAlone());
  console.log(`adapter: ${alone[0]?.adapter}; ${preset}, batch ${batch}, ${steps} steps`);
  console.log(`shoal train alone: a step queued ${alone.map((a) => percent(a.fraction)).join(', ')} of the loop`);
  const rooms = [];
  console.log('| depth | worker | queued | steps | merges | waiting for rounds | commits |');
  console.log('| --- | --- | --- | --- | --- | --- | --- |');
  for (let r = 0; r < repeats; r++) {
    for (const depth of depths) {
      const result = await room(server.url, depth);
      rooms.push({ depth, ...result });
      for (const [i, w] of result.workers.entries()) {
        const cells = [depth, i, percent(w.fraction), w.steps, w.merges, `${w.stalledMs} ms`, result.commits];
        console.log(`| ${cells.join(' | ')} |`);
      }
    }
  }
  const json = {
    machine: `${cpus().length} × ${cpus()[0]?.model ?? 'unknown CPU'}, Node ${process.version}`,
    adapter: alone[0]?.adapter,
    options: { ...args, depths },
    trainAlone: alone.map((a) => a.fraction),
    rooms,
  };
  console.log(JSON.stringify(json));
  writeFileSync(String(args.out), formatJson(json));
} finally {
  killAll();
  await server.close();
}
