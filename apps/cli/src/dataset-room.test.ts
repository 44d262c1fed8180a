/**
 * A room on a packed dataset of more than 1 GB, end to end as people run it: text written in the
 * test by a seeded generator, `shoal data pack`, `shoal server --datasets`, `shoal host --dataset`
 * and three `shoal worker --backend cpu` processes on real WebRTC over loopback. Each worker fetches
 * only the shards the roster deals it and never holds more than its budget; a worker killed moves
 * its shards to the others; a host stopped and resumed goes on from every shard's position.
 */

import { spawnSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync, statSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { assignShards, dirDatasetSource, openDataset } from '@shoal/data';
import { decodeRoomCheckpoint } from '@shoal/room';
import { afterAll, describe, expect, it } from 'vitest';
import { loadRoomCheckpoint } from './host-resume.ts';
import { loadWrtc } from './room.ts';
import { eventsOf, freePort, type Proc, shoalProcesses } from './test-processes.ts';

const { start, until, killAll } = shoalProcesses();
const SHOAL = fileURLToPath(new URL('../bin/shoal.mjs', import.meta.url));
afterAll(killAll);

const GB = 1_000_000_000;

/**
 * `bytes` of seeded English-like text: 4,096 sentences made once from a word list by an LCG, then
 * picked by the LCG 4 MiB at a time (fast enough for a gigabyte, and never the same twice in a row).
 */
function writeSeededText(path: string, bytes: number, seed: number): void {
  const words =
    'the whale sea ship captain harpoon deck wind sail ocean boat rope storm mast crew oil night day white'.split(' ');
  let state = seed >>> 0;
  const next = () => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return state;
  };
  const sentences = Array.from({ length: 4096 }, () => {
    const length = 6 + (next() % 14);
    const text = Array.from({ length }, () => words[next() % words.length]).join(' ');
    return Buffer.from(`${text[0]?.toUpperCase()}${text.slice(1)}.${next() % 5 === 0 ? '\n\n' : ' '}`);
  });
  const chunk = Buffer.alloc(4 * 1024 * 1024);
  const fd = openSync(path, 'w');
  try {
    for (let written = 0; written < bytes; ) {
      let used = 0;
      for (;;) {
        const sentence = sentences[next() % sentences.length] as Buffer;
        if (used + sentence.length > chunk.length) break;
        sentence.copy(chunk, used);
        used += sentence.length;
      }
      const take = Math.min(used, bytes - written);
      writeSync(fd, chunk, 0, take);
      written += take;
    }
  } finally {
    closeSync(fd);
  }
}

const shardsOf = (p: Proc) =>
  eventsOf(p, 'shard') as { epoch: number; shard: number; from: number; heldBytes: number; budgetBytes: number }[];

describe('a room on a 1 GB packed dataset', () => {
  it('three workers fetch only their shards within budget; a killed one’s shards move; a resumed host goes on', {
    timeout: 420_000,
  }, async () => {
    await loadWrtc(); // fails loudly (never skips) without WebRTC in Node
    const root = mkdtempSync(join(tmpdir(), 'shoal-gb-'));
    try {
      const text = join(root, 'seeded.txt');
      writeSeededText(text, GB, 42);
      expect(statSync(text).size).toBe(GB);
      const datasets = join(root, 'datasets');
      // packed by the CLI, as a person packs (a process of its own, outside the room's)
      const pack = spawnSync(
        process.execPath,
        [SHOAL, 'data', 'pack', text, '--out', join(datasets, 'seeded'), '--shard-mib', '0.0625', '--json'],
        { encoding: 'utf8' },
      );
      expect(pack.status, pack.stderr).toBe(0);
      rmSync(text); // the room reads the shards only
      const packed = JSON.parse(pack.stdout.trim().split('\n').at(-1) as string) as { bytes: number };
      expect(packed.bytes).toBeGreaterThanOrEqual(GB - 1_000_000); // separators and cut points aside
      const dataset = await openDataset(dirDatasetSource(join(datasets, 'seeded')));
      const trainShards = dataset.loaded.train.length;

      const port = await freePort();
      const server = start('server', [
        'server',
        '--port',
        String(port),
        '--host',
        '127.0.0.1',
        '--no-persist',
        '--datasets',
        datasets,
      ]);
      await until(() => server.text.some((line) => line.startsWith('Shoal is running')), 30_000, 'the server');
      const url = `http://127.0.0.1:${port}`;
      const checkpoints = join(root, 'checkpoints');
      const training = [
        '--preset',
        'nano',
        '--inner-steps',
        '4',
        '--batch',
        '4',
        '--steps',
        '1000000',
        '--eval-bytes',
        '65536',
      ];
      const reporting = ['--metrics-every-ms', '500', '--publish-every-ms', '1000', '--json'];
      const host = start('host', [
        'host',
        ...['--server', url, '--dataset', join(datasets, 'seeded'), '--checkpoint-dir', checkpoints],
        ...training,
        ...reporting,
      ]);
      const room = await until(() => host.lines.find((line) => line.event === 'room'), 60_000, 'the room line');
      const workerArgs = [
        'worker',
        ...['--server', url, '--room', String(room.roomId), '--token', String(room.joinToken)],
        ...['--backend', 'cpu', '--cache-mib', '0.25', '--cache-dir', 'none', '--json'],
      ];
      const workers = ['w0', 'w1', 'w2'].map((name) => start(name, workerArgs));
      const peers = await Promise.all(
        workers.map((w) =>
          until(() => eventsOf(w, 'joined')[0]?.peer as string | undefined, 60_000, `${w.name} joined`),
        ),
      );
      // every worker has moved on to a second shard of its own (each shard is 256 batches of 4 × 64)
      await until(() => workers.every((w) => shardsOf(w).length >= 2), 180_000, 'every worker on its second shard');
      const three = assignShards(trainShards, peers, { seed: 1, epoch: 0 });
      for (const [i, w] of workers.entries()) {
        const mine = three.get(peers[i] as string) ?? [];
        // after the first roster of all three (a worker alone at first is dealt everything)
        const later = shardsOf(w).slice(1);
        for (const start of later) expect(mine, `${w.name} shard ${start.shard}`).toContain(start.shard);
        for (const start of shardsOf(w)) {
          expect(start.budgetBytes).toBe(4 * 64 * 1024); // --cache-mib 0.25: four shards
          expect(start.heldBytes).toBeLessThanOrEqual(start.budgetBytes);
        }
      }

      // w2 dies: its shards go to w0 and w1, who start the ones it had begun where it left them
      const [w0, w1, w2] = workers as [Proc, Proc, Proc];
      w2.child.kill('SIGKILL');
      await until(() => eventsOf(host, 'peer-left').some((e) => e.peer === peers[2]), 60_000, 'the host to drop w2');
      const two = assignShards(trainShards, peers.slice(0, 2), { seed: 1, epoch: 0 });
      const wasW2 = new Set(three.get(peers[2] as string));
      const moved = await until(
        () => {
          const after = [w0, w1].flatMap((w) => shardsOf(w)).filter((s) => wasW2.has(s.shard));
          return after.length > 0 && after;
        },
        180_000,
        'a survivor on one of w2’s shards',
      );
      for (const [i, w] of [w0, w1].entries()) {
        const mine = two.get(peers[i] as string) ?? [];
        for (const start of shardsOf(w).filter((s) => wasW2.has(s.shard))) expect(mine).toContain(start.shard);
      }
      expect(moved.length).toBeGreaterThan(0);

      // the host stops (a checkpoint on exit) and comes back from it: every shard's count goes on
      host.child.kill('SIGINT');
      expect(await host.exit).toBe(0);
      const saved = loadRoomCheckpoint(checkpoints);
      const ledger = saved.state.data?.epochs.find((open) => open.epoch === 0)?.drawn ?? [];
      const drawnBefore = ledger.map((drawn, shard) => [shard, drawn] as const).filter(([, drawn]) => drawn > 0);
      expect(drawnBefore.length).toBeGreaterThanOrEqual(3);
      const again = start('host again', [
        'host',
        ...['--server', url, '--resume', checkpoints, '--checkpoint-dir', checkpoints],
        ...reporting,
      ]);
      // the workers train on under the resumed host (their heartbeats feed its ledger): 200 batches
      // past its first metrics line
      const first = (await until(() => eventsOf(again, 'metrics')[0], 60_000, 'the resumed host’s metrics'))
        .tokens as number;
      await until(
        () => eventsOf(again, 'metrics').some((m) => (m.tokens as number) > first + 200 * 256),
        120_000,
        'training after the resume',
      );
      for (const w of [w0, w1]) w.child.kill('SIGINT');
      await Promise.all([w0.exit, w1.exit]);
      again.child.kill('SIGINT');
      expect(await again.exit).toBe(0);
      const last = decodeRoomCheckpoint(
        readFileSync(join(checkpoints, 'shoal-room.safetensors')),
        readFileSync(join(checkpoints, 'shoal-room.state.safetensors')),
      );
      const after = last.state.data?.epochs.find((open) => open.epoch === 0)?.drawn ?? [];
      for (const [shard, drawn] of drawnBefore)
        expect(after[shard] ?? 0, `shard ${shard}`).toBeGreaterThanOrEqual(drawn);
      expect(after.reduce((a, b) => a + b, 0)).toBeGreaterThan(drawnBefore.reduce((a, [, b]) => a + b, 0));
      // and the workers that came back after the resume went on where the ledger said
      const resumedStarts = [w0, w1].flatMap((w) => shardsOf(w)).filter((s) => s.from > 0);
      expect(resumedStarts.length).toBeGreaterThan(0);
      server.child.kill('SIGINT');
      await server.exit;
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});
