import { createHash } from 'node:crypto';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { assignShards, MIN_SHARD_BYTES, packDataset, parseManifest } from '@shoal/data';
import { readSafetensors } from '@shoal/model';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runShoal, type ShoalRun } from './test-processes.ts';

const dir = mkdtempSync(join(tmpdir(), 'shoal-train-dataset-'));
const SEED = 7;

type Result = ShoalRun;

/** `shoal train` on the CPU engine at nano with tiny steps, without blocking (a server runs here). */
function train(args: string[], env: NodeJS.ProcessEnv = {}): Promise<Result> {
  const argv = ['train', '--backend', 'cpu', '--threads', '1', '--preset', 'nano', '--batch', '2', '--seq', '16'];
  return runShoal([...argv, '--seed', String(SEED), '--eval-bytes', '1KiB', ...args], {
    XDG_CACHE_HOME: join(dir, 'xdg-cache'),
    ...env,
  });
}

function lastJson(result: Result): Record<string, unknown> {
  expect(result.status, result.stderr).toBe(0);
  return JSON.parse(result.stdout.trim().split('\n').at(-1) ?? '');
}

/** ~`bytes` of seeded words and line breaks (an LCG). */
function seededText(bytes: number, seed: number): string {
  const words = ['shoal', 'whale', 'sea', 'ship', 'white', 'and', 'of', 'a', 'captain', 'café'];
  let state = seed;
  let text = '';
  while (text.length < bytes) {
    state = (Math.imul(state, 1_664_525) + 1_013_904_223) >>> 0;
    text += words[state % words.length] + (state % 11 === 0 ? '.\n' : ' ');
  }
  return text;
}

const sha256 = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');

/**
 * A dataset written by hand with shards far below the packer's 64 KiB (the schema allows any
 * shard up to shardBytes): 100-byte training shards hold 3 batches of 2 × 16, so a few steps
 * cross shard boundaries.
 */
function writeTinyDataset(out: string, trainShards: number): void {
  mkdirSync(out, { recursive: true });
  const text = new TextEncoder().encode(seededText(100 * trainShards + 4_000, 3));
  const shards = [];
  for (let i = 0; i <= trainShards; i++) {
    const split = i < trainShards ? 'train' : 'validation';
    const file = `${split}-${String(i < trainShards ? i : 0).padStart(5, '0')}.txt`;
    const bytes = i < trainShards ? text.subarray(100 * i, 100 * (i + 1)) : text.subarray(100 * i);
    writeFileSync(join(out, file), bytes);
    shards.push({ file, sha256: sha256(bytes), bytes: bytes.length, split });
  }
  const manifest = {
    format: 'shoal-dataset',
    version: 1,
    name: 'tiny',
    sources: ['seeded'],
    licence: 'CC0-1.0',
    shardBytes: MIN_SHARD_BYTES,
    pieceBytes: 65_536,
    validationFraction: 0.05,
    documents: 1,
    bytes: text.length,
    shards,
  };
  writeFileSync(join(out, 'manifest.json'), JSON.stringify(manifest));
}

const packed = join(dir, 'packed');
const tiny = join(dir, 'tiny');
let server: Server;
let baseUrl = '';

beforeAll(async () => {
  writeFileSync(join(dir, 'corpus.txt'), seededText(300_000, 1));
  await packDataset([join(dir, 'corpus.txt')], {
    outDir: packed,
    shardBytes: MIN_SHARD_BYTES,
    validationFraction: 0.2,
  });
  writeTinyDataset(tiny, 5);
  // The packed folder over HTTP; anything else is a 404.
  server = createServer((request, response) => {
    const name = (request.url ?? '').replace(/^\/data\//, '');
    const path = join(packed, name);
    if (!request.url?.startsWith('/data/') || name.includes('/') || !existsSync(path)) {
      response.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
      return;
    }
    response.writeHead(200, { 'content-type': 'application/octet-stream' }).end(readFileSync(path));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

describe.concurrent('shoal train --dataset', () => {
  it('trains on a packed folder: bits per byte are the nats ÷ ln 2, the dataset and its counters in --json', async () => {
    const result = await train([
      '--dataset',
      packed,
      '--steps',
      '4',
      '--checkpoint-dir',
      join(dir, 'folder'),
      '--json',
    ]);
    const json = lastJson(result);
    const { hash } = await parseManifest(readFileSync(join(packed, 'manifest.json')), packed);
    expect(json.valBitsPerByte).toBe((json.valLoss as number) / Math.LN2);
    expect(json.trainBitsPerByte).toBe((json.trainLoss as number) / Math.LN2);
    expect(json).toMatchObject({
      steps: 4,
      tokens: 4 * 32,
      dataset: { name: 'corpus.txt', manifest: hash, trainShards: 4, validationShards: 1 },
      shards: { refused: 0, cacheHits: 0 },
    });
    expect((json.shards as { fetched: number }).fetched).toBeGreaterThanOrEqual(2); // a training and the validation shard
    expect((json.walker as { maxHeldBytes: number }).maxHeldBytes).toBeGreaterThan(0);
  });

  it('prints the dataset line and bits per byte with nats beside them', async () => {
    const result = await train(['--dataset', packed, '--steps', '2', '--checkpoint-dir', join(dir, 'human')]);
    expect(result.status, result.stderr).toBe(0);
    const { hash } = await parseManifest(readFileSync(join(packed, 'manifest.json')), packed);
    expect(result.stderr).toContain(
      `dataset corpus.txt: 4 train + 1 validation shards, 0.29 MiB, manifest ${hash.slice(0, 12)}, from ${packed}; cache 0.25 MiB in memory`,
    );
    expect(result.stdout).toMatch(
      /train \d+\.\d{3} bits\/byte \(\d+\.\d{3} nats\), val \d+\.\d{3} bits\/byte \(\d+\.\d{3} nats\)/,
    );
  });

  it('a text run (--data) reports bits per byte too, and no dataset keys', async () => {
    const json = lastJson(
      await train(['--data', join(dir, 'corpus.txt'), '--steps', '2', '--checkpoint-dir', join(dir, 'text'), '--json']),
    );
    expect(json.valBitsPerByte).toBe((json.valLoss as number) / Math.LN2);
    expect(json.trainBitsPerByte).toBe((json.trainLoss as number) / Math.LN2);
    expect(json.dataset).toBeUndefined();
  });

  it('resumes the walker exactly across shards: 4 + 5 steps end where 9 in one go do', async () => {
    const run = (name: string, extra: string[]) =>
      train(['--dataset', tiny, '--eval-every', '0', '--checkpoint-dir', join(dir, name), '--json', ...extra]);
    const [whole] = await Promise.all([
      run('straight', ['--steps', '9']),
      run('split', ['--steps', '9', '--stop-after', '4']),
    ]);
    const resumed = lastJson(
      await run('split', ['--steps', '5', '--resume', join(dir, 'split', 'shoal-nano.safetensors')]),
    );
    const straight = lastJson(whole);
    expect(resumed.steps).toBe(9);
    expect(resumed.valLoss).toBe(straight.valLoss);
    const a = readSafetensors(readFileSync(join(dir, 'straight', 'shoal-nano.safetensors'))).tensors;
    const b = readSafetensors(readFileSync(join(dir, 'split', 'shoal-resumed.safetensors'))).tensors;
    for (const [name, entry] of a) expect(b.get(name)?.data, name).toEqual(entry.data);

    // the checkpoint names the dataset; another manifest is refused
    const other = await train([
      '--dataset',
      packed,
      '--steps',
      '1',
      '--resume',
      join(dir, 'split', 'shoal-nano.safetensors'),
    ]);
    expect(other.status).toBe(1);
    expect(other.stderr).toMatch(/checkpoint was trained on dataset tiny@[0-9a-f]{64} \(manifest [0-9a-f]{12}\)/);
    const text = await train(['--steps', '1', '--resume', join(dir, 'split', 'shoal-nano.safetensors')]);
    expect(text.status).toBe(1);
    expect(text.stderr).toContain('pass the same --dataset');
  });

  it('refuses a shard changed after packing, naming the file and both hashes, before training on it', async () => {
    const copy = join(dir, 'tampered');
    cpSync(packed, copy, { recursive: true });
    const { train: shards } = await parseManifest(readFileSync(join(copy, 'manifest.json')), copy);
    const first = shards[assignShards(shards.length, ['local'], { seed: SEED, epoch: 0 }).get('local')?.[0] ?? -1];
    if (!first) throw new Error('no first shard');
    const path = join(copy, first.file);
    const bytes = readFileSync(path);
    bytes[100] = (bytes[100] as number) ^ 1;
    writeFileSync(path, bytes);
    const result = await train(['--dataset', copy, '--steps', '2', '--checkpoint-dir', join(dir, 'tampered-ck')]);
    expect(result.status).toBe(1);
    expect(result.stderr).toContain(
      `shard ${first.file} does not match its hash: manifest says ${first.sha256.slice(0, 16)}…, its bytes hash to ${sha256(bytes).slice(0, 16)}…`,
    );
    expect(result.stderr).not.toMatch(/\n\s+at /);
    expect(existsSync(join(dir, 'tampered-ck', 'shoal-nano.safetensors')), 'no checkpoint of a run on it').toBe(false);
  });

  it('trains on a dataset URL, keeping its shards under $XDG_CACHE_HOME/shoal/shards; a 404 exits 1', async () => {
    const xdg = join(dir, 'url-cache');
    const json = lastJson(
      await train(['--dataset', `${baseUrl}/data/`, '--steps', '2', '--checkpoint-dir', join(dir, 'url'), '--json'], {
        XDG_CACHE_HOME: xdg,
      }),
    );
    expect(json.dataset).toMatchObject({ name: 'corpus.txt', trainShards: 4 });
    const cached = readdirSync(join(xdg, 'shoal', 'shards')).filter((name) => /^[0-9a-f]{64}$/.test(name));
    expect(cached.length).toBeGreaterThanOrEqual(2);

    const missing = await train(['--dataset', `${baseUrl}/nothing-here`, '--steps', '2']);
    expect(missing.status).toBe(1);
    expect(missing.stderr).toContain(`shoal: dataset URL ${baseUrl}/nothing-here/manifest.json answered HTTP 404`);
  });

  it('refuses --data with --dataset (exit 2), a manifest off the schema and a budget below one shard (exit 1)', async () => {
    const both = await train(['--data', join(dir, 'corpus.txt'), '--dataset', packed]);
    expect(both.status).toBe(2);
    expect(both.stderr).toMatch(/--dataset .* cannot be used with option '--data/);

    const broken = join(dir, 'broken');
    cpSync(packed, broken, { recursive: true });
    const manifest = JSON.parse(readFileSync(join(broken, 'manifest.json'), 'utf8'));
    manifest.shards[0].sha256 = 'not-a-hash';
    writeFileSync(join(broken, 'manifest.json'), JSON.stringify(manifest));
    const schema = await train(['--dataset', broken, '--steps', '1']);
    expect(schema.status).toBe(1);
    expect(schema.stderr).toContain(
      'is not a Shoal dataset manifest at shards.0.sha256: a SHA-256 is 64 lowercase hex digits',
    );

    const small = await train(['--dataset', packed, '--steps', '1', '--cache-mib', '0.01']);
    expect(small.status).toBe(1);
    expect(small.stderr).toContain('cannot hold one shard of this dataset');
  });
});
