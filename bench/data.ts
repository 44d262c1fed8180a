/**
 * Does the data path ever hold a step up? (`npm run bench:data`) A stub engine consumes batches
 * from a ShardWalker at a fixed rate — each step awaits a timer for its duration, the way a GPU
 * step leaves the CPU free — while the walker fetches, hashes and prefetches shards of a packed
 * dataset. The dataset (seeded text, --dataset-mib in --shard-mib shards, one of them validation)
 * is generated in a temp folder and served two ways: read from the folder, and over HTTP from a
 * node:http static server in this process. For each source and rate, --walk shards are walked
 * (the first is always waited for: nothing was prefetched yet).
 *
 *   npm run bench:data -- [--rates 500000] [--batch 16] [--seq 256] [--dataset-mib 256]
 *     [--shard-mib 16] [--walk 3] [--out bench/results/data-<cores>core.json] [--no-save]
 *
 * "fetch wait" is time next() awaited a shard (the walker's count): after the first shard it should
 * be 0. "next() after" is all time spent in next() after the first shard, drawing included.
 * Prints a table and one JSON line; unless
 * --no-save, writes the JSON to --out. About 35 s per shard walked at the defaults.
 *
 * Figures: docs/data.md.
 */
import { createReadStream, writeFileSync } from 'node:fs';
import { mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import {
  batchesInShard,
  type DatasetManifest,
  type DatasetSource,
  dirDatasetSource,
  MANIFEST_FILE,
  MIB,
  openDataset,
  ShardWalker,
  sha256Hex,
  urlDatasetSource,
} from '../packages/data/src/dataset/index.node.ts';
import { formatJson } from './format-json.ts';

const { values: args } = parseArgs({
  options: {
    rates: { type: 'string', default: '500000' },
    batch: { type: 'string', default: '16' },
    seq: { type: 'string', default: '256' },
    'dataset-mib': { type: 'string', default: '256' },
    'shard-mib': { type: 'string', default: '16' },
    walk: { type: 'string', default: '3' },
    out: { type: 'string', default: `bench/results/data-${cpus().length}core.json` },
    'no-save': { type: 'boolean', default: false },
  },
});
const rates = String(args.rates).split(',').map(Number);
const batchSize = Number(args.batch);
const seqLen = Number(args.seq);
const shardBytes = Number(args['shard-mib']) * MIB;
const shardCount = Math.max(2, Math.round(Number(args['dataset-mib']) / Number(args['shard-mib'])));
const walk = Number(args.walk);

/** Seeded text-like bytes (xorshift32, four letters a draw): fast enough for hundreds of MiB. */
function seededShard(length: number, seed: number): Uint8Array {
  const bytes = new Uint8Array(length);
  let x = (seed * 0x9e3779b9) >>> 0 || 1;
  for (let i = 0; i < length; i += 4) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    for (let k = 0; k < 4 && i + k < length; k++) {
      const v = (x >>> (8 * k)) & 0xff;
      bytes[i + k] = v < 20 ? 10 : v < 60 ? 32 : 97 + (v % 26);
    }
  }
  return bytes;
}

/** Writes shards and a manifest into a new temp folder: shardCount − 1 training shards, one validation. */
async function generate(dir: string): Promise<{ genMs: number; hashMiBps: number }> {
  const started = performance.now();
  let hashMs = 0;
  const shards: DatasetManifest['shards'] = [];
  for (let i = 0; i < shardCount; i++) {
    const split = i === shardCount - 1 ? 'validation' : 'train';
    const file = `${split}-${String(split === 'train' ? i : 0).padStart(5, '0')}.txt`;
    const bytes = seededShard(shardBytes, i + 1);
    const hashStart = performance.now();
    const sha256 = await sha256Hex(bytes);
    hashMs += performance.now() - hashStart;
    await writeFile(join(dir, file), bytes);
    shards.push({ file, sha256, bytes: bytes.length, split });
  }
  const manifest: DatasetManifest = {
    format: 'shoal-dataset',
    version: 1,
    name: 'bench-data',
    sources: ['bench/data.ts'],
    licence: 'CC0-1.0',
    shardBytes,
    pieceBytes: 64 * 1024,
    validationFraction: 1 / shardCount,
    documents: shardCount,
    bytes: shardCount * shardBytes,
    shards,
  };
  await writeFile(join(dir, MANIFEST_FILE), JSON.stringify(manifest, null, 2));
  return { genMs: performance.now() - started, hashMiBps: (shardCount * shardBytes) / MIB / (hashMs / 1000) };
}

/** A static file server over `dir`, as a CDN or `python -m http.server` would be. */
async function serve(dir: string): Promise<{ url: string; close(): Promise<void> }> {
  const server = createServer(async (request, response) => {
    const name = (request.url ?? '/').slice(1);
    const path = join(dir, name);
    if (!/^[a-z0-9.-]+$/.test(name)) {
      response.writeHead(404, 'Not Found').end();
      return;
    }
    try {
      const info = await stat(path);
      response.writeHead(200, { 'content-type': 'text/plain; charset=utf-8', 'content-length': info.size });
      createReadStream(path).pipe(response);
    } catch {
      response.writeHead(404, 'Not Found').end();
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

interface Row {
  source: string;
  shards: number;
  targetTokensPerS: number;
  achievedTokensPerS: number;
  steps: number;
  shardsWalked: number;
  /** Time next() waited for a shard to arrive (the walker's own count), in the first shard and after it. */
  fetchWaitFirstMs: number;
  fetchWaitAfterMs: number;
  /** Time spent in next() after the first shard: waits plus drawing the batches, and the worst single call. */
  nextAfterMs: number;
  worstNextAfterMs: number;
  prefetched: number;
  maxHeldMiB: number;
  hashMiBps: number;
}

/** One member walks `walk` shards at `rate` tokens/s; every step's wait for next() is timed. */
async function run(name: string, source: DatasetSource, rate: number): Promise<Row> {
  const dataset = await openDataset(source);
  const walker = new ShardWalker(dataset, {
    batchSize,
    seqLen,
    seed: 1,
    member: 'bench',
    members: ['bench'],
    budgetBytes: 2 * shardBytes, // current + prefetched
  });
  const tokensPerStep = batchSize * seqLen;
  const stepMs = (1000 * tokensPerStep) / rate;
  const steps = walk * batchesInShard(shardBytes, { batchSize, seqLen });
  const firstShardSteps = batchesInShard(shardBytes, { batchSize, seqLen });
  let fetchWaitFirstMs = 0;
  let nextAfterMs = 0;
  let worstNextAfterMs = 0;
  const started = performance.now();
  for (let step = 0; step < steps; step++) {
    const before = performance.now();
    await walker.next();
    const waited = performance.now() - before;
    if (step < firstShardSteps) fetchWaitFirstMs = walker.stats.waitsMs;
    else {
      nextAfterMs += waited;
      worstNextAfterMs = Math.max(worstNextAfterMs, waited);
    }
    // The step: on a GPU the CPU is free meanwhile, so it is a timer, not a busy loop. Timers
    // fire late, so the schedule is kept against the clock rather than step by step.
    const due = started + (step + 1) * stepMs - performance.now();
    if (due > 0) await new Promise((resolve) => setTimeout(resolve, due));
  }
  const elapsedS = (performance.now() - started) / 1000;
  const { counters } = dataset;
  return {
    source: name,
    shards: dataset.loaded.manifest.shards.length,
    targetTokensPerS: rate,
    achievedTokensPerS: (steps * tokensPerStep) / elapsedS,
    steps,
    shardsWalked: walk,
    fetchWaitFirstMs,
    fetchWaitAfterMs: walker.stats.waitsMs - fetchWaitFirstMs,
    nextAfterMs,
    worstNextAfterMs,
    prefetched: walker.stats.prefetched,
    maxHeldMiB: walker.stats.maxHeldBytes / MIB,
    hashMiBps: counters.fetchedBytes / MIB / (counters.hashMs / 1000),
  };
}

const dir = await mkdtemp(join(tmpdir(), 'bench-data-'));
const server = await serve(dir);
try {
  const generated = await generate(dir);
  console.log(
    `dataset: ${shardCount} shards of ${shardBytes / MIB} MiB (${shardCount - 1} training), generated in ` +
      `${(generated.genMs / 1000).toFixed(1)} s; B ${batchSize}, T ${seqLen}; ${walk} shards walked per run`,
  );
  const rows: Row[] = [];
  console.log(
    '| source | shards | target tokens/s | achieved tokens/s | fetch wait, 1st shard | fetch wait after | ' +
      'next() after (worst call) | prefetched | held MiB | hash MiB/s |',
  );
  console.log('| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |');
  for (const rate of rates) {
    for (const [name, source] of [
      ['folder', dirDatasetSource(dir)],
      ['http', urlDatasetSource(server.url)],
    ] as const) {
      const row = await run(name, source, rate);
      rows.push(row);
      const cells = [
        row.source,
        row.shards,
        Math.round(row.targetTokensPerS),
        Math.round(row.achievedTokensPerS),
        `${row.fetchWaitFirstMs.toFixed(1)} ms`,
        `${row.fetchWaitAfterMs.toFixed(1)} ms`,
        `${row.nextAfterMs.toFixed(0)} ms (${row.worstNextAfterMs.toFixed(2)} ms)`,
        row.prefetched,
        row.maxHeldMiB,
        Math.round(row.hashMiBps),
      ];
      console.log(`| ${cells.join(' | ')} |`);
    }
  }
  const json = {
    machine: `${cpus().length} × ${cpus()[0]?.model ?? 'unknown CPU'}, Node ${process.version}`,
    options: { ...args, rates, shardCount },
    generation: generated,
    rows,
  };
  console.log(JSON.stringify(json));
  if (!args['no-save']) writeFileSync(String(args.out), formatJson(json));
} finally {
  await server.close();
  await rm(dir, { recursive: true, force: true });
}
