/**
 * A room on a packed dataset that no server serves: `shoal server` without --datasets, `shoal host
 * --dataset DIR` (a folder on the host's machine only) and one `shoal worker --backend cpu`, as
 * child processes over real WebRTC on loopback. The room's url is 'mesh:', so the worker fetches
 * the manifest and every shard it trains on from the host over the mesh, checks them, and trains.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { packDataset } from '@shoal/data';
import { MESH_DATASET_URL } from '@shoal/protocol';
import { RUN_CONFIG } from '@shoal/protocol/test-fixtures';
import type { RoomCheckpoint } from '@shoal/room';
import { afterAll, describe, expect, it } from 'vitest';
import { hostData } from './host-data.ts';
import { loadWrtc } from './room.ts';
import { eventsOf, freePort, shoalProcesses } from './test-processes.ts';

const { start, until, killAll } = shoalProcesses();
afterAll(killAll);

/** `bytes` of seeded English-like text: words picked by an LCG, a paragraph break now and then. */
function seededText(bytes: number, seed: number): string {
  const words = 'the whale sea ship captain harpoon deck wind sail ocean boat rope storm mast crew'.split(' ');
  let state = seed >>> 0;
  const next = () => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return state >>> 8;
  };
  let text = '';
  while (text.length < bytes) text += `${words[next() % words.length]}${next() % 23 === 0 ? '.\n\n' : ' '}`;
  return text.slice(0, bytes);
}

describe('a dataset room whose folder no server serves', () => {
  it('volunteers fetch their shards from the host over the mesh, and rounds commit', { timeout: 120_000 }, async () => {
    await loadWrtc(); // fails loudly (never skips) without WebRTC in Node
    const root = mkdtempSync(join(tmpdir(), 'shoal-mesh-dataset-'));
    try {
      const input = join(root, 'seeded.txt');
      writeFileSync(input, seededText(400 * 1024, 7));
      const folder = join(root, 'seeded');
      // 64 KiB shards; one piece in five held out, so the small text has a validation shard
      const packed = await packDataset([input], { outDir: folder, shardBytes: 64 * 1024, validationFraction: 0.2 });
      expect(packed.shards).toBeGreaterThanOrEqual(6);

      const port = await freePort();
      const server = start('server', ['server', '--port', String(port), '--host', '127.0.0.1', '--no-persist']);
      await until(() => server.text.some((line) => line.startsWith('Shoal is running')), 30_000, 'the server');
      const url = `http://127.0.0.1:${port}`;
      const host = start('host', [
        'host',
        ...['--server', url, '--dataset', folder],
        ...['--preset', 'nano', '--batch', '4', '--inner-steps', '4', '--steps', '1000000', '--eval-bytes', '16384'],
        ...['--metrics-every-ms', '1000', '--json'],
      ]);
      const room = await until(() => eventsOf(host, 'room')[0], 60_000, 'the room line');
      // the folder is not refused: the host says it serves it itself
      expect(host.stderr.join('')).toMatch(
        /volunteers fetch shards from this host over the mesh; serve the folder with shoal server --datasets/,
      );
      const worker = start('worker', [
        'worker',
        ...['--server', url, '--room', String(room.roomId), '--token', String(room.joinToken)],
        ...['--backend', 'cpu', '--cache-dir', 'none', '--json'],
      ]);
      const opened = await until(() => eventsOf(worker, 'dataset')[0], 60_000, 'the worker opening the dataset');
      expect(opened).toMatchObject({ manifest: packed.hash, url: 'the host over the mesh' });
      await until(() => eventsOf(worker, 'shard').length >= 1, 60_000, 'a shard fetched over the mesh');
      const committed = await until(
        () => eventsOf(host, 'round-committed')[0],
        90_000,
        'a round committed by the worker',
      );
      expect(committed.participants).toBe(1);

      worker.child.kill('SIGINT');
      host.child.kill('SIGINT');
      expect(await worker.exit).toBe(0);
      expect(await host.exit).toBe(0);
      server.child.kill('SIGINT');
      await server.exit;
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});

describe('a resumed room whose dataset only its host served', () => {
  it('needs its folder again (--dataset DIR): there is no URL to open', async () => {
    const dataset = {
      manifest: 'ab'.repeat(32),
      url: MESH_DATASET_URL,
      trainShards: 6,
      validationShards: 1,
      trainBytes: 1,
    };
    const config = { ...RUN_CONFIG, data: { ...RUN_CONFIG.data, corpus: 'seeded', dataset } };
    const saved = { state: { config } } as unknown as RoomCheckpoint;
    await expect(hostData({ evalBatches: 1, evalBytes: 65536 }, config, saved, 'http://127.0.0.1:1')).rejects.toThrow(
      /fetch seeded from its host only: pass its folder again with --dataset DIR/,
    );
  });
});
