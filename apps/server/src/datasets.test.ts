import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { type RunningServer, startServer } from './index.ts';

let server: RunningServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

/** DIR/books with a manifest and one shard, DIR/unfinished without a manifest, DIR/secret.txt. */
function datasetsDir(): { dir: string; shard: Buffer; manifest: Buffer } {
  const dir = mkdtempSync(join(tmpdir(), 'shoal-datasets-'));
  mkdirSync(join(dir, 'books'));
  mkdirSync(join(dir, 'unfinished'));
  const shard = Buffer.from('Call me Ishmael. '.repeat(1000));
  writeFileSync(join(dir, 'books', 'train-00000.txt'), shard);
  writeFileSync(join(dir, 'unfinished', 'train-00000.txt'), shard);
  const manifest = Buffer.from(`${JSON.stringify({ bytes: shard.length, shards: [{ file: 'train-00000.txt' }] })}\n`);
  writeFileSync(join(dir, 'books', 'manifest.json'), manifest);
  writeFileSync(join(dir, 'secret.txt'), 'not a dataset');
  return { dir, shard, manifest };
}

/** A raw request (fetch normalises paths, so a traversal would never reach the server). */
function rawGet(url: string, path: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const request = httpRequest(`${url}/`, { path }, (response) => {
      response.resume();
      resolve(response.statusCode ?? 0);
    });
    request.on('error', reject);
    request.end();
  });
}

describe('shoal server --datasets', () => {
  it('lists the folder’s datasets, serves manifests to revalidate and shards with ranges, ETags and CORS', async () => {
    const { dir, shard, manifest } = datasetsDir();
    server = await startServer({ port: 0, host: '127.0.0.1', datasetsDir: dir, logger: null });
    const index = await fetch(`${server.url}/datasets/`);
    expect(index.headers.get('access-control-allow-origin')).toBe('*');
    expect(await index.json()).toEqual({
      datasets: [
        {
          name: 'books',
          url: '/datasets/books/',
          manifest: createHash('sha256').update(manifest).digest('hex'),
          bytes: shard.length,
          shards: 1,
        },
      ],
    });

    const got = await fetch(`${server.url}/datasets/books/manifest.json`);
    expect(got.headers.get('cache-control')).toBe('no-cache');
    expect(got.headers.get('cross-origin-resource-policy')).toBe('cross-origin');
    expect(Buffer.from(await got.arrayBuffer()).equals(manifest)).toBe(true);

    const whole = await fetch(`${server.url}/datasets/books/train-00000.txt`);
    expect(whole.headers.get('cache-control')).toBe('public, max-age=86400');
    expect(Buffer.from(await whole.arrayBuffer()).equals(shard)).toBe(true);
    const etag = whole.headers.get('etag');
    expect(etag).toBeTruthy();
    const again = await fetch(`${server.url}/datasets/books/train-00000.txt`, {
      headers: { 'if-none-match': etag as string },
    });
    expect(again.status).toBe(304);

    const part = await fetch(`${server.url}/datasets/books/train-00000.txt`, { headers: { range: 'bytes=100-199' } });
    expect(part.status).toBe(206);
    expect(part.headers.get('content-range')).toBe(`bytes 100-199/${shard.length}`);
    expect(Buffer.from(await part.arrayBuffer()).equals(shard.subarray(100, 200))).toBe(true);

    const preflight = await fetch(`${server.url}/datasets/books/train-00000.txt`, { method: 'OPTIONS' });
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get('access-control-allow-headers')).toContain('range');
  });

  it('answers 404 for a missing file, 405 for a write, and never serves outside the folder', async () => {
    const { dir } = datasetsDir();
    server = await startServer({ port: 0, host: '127.0.0.1', datasetsDir: join(dir, 'books'), logger: null });
    const missing = await fetch(`${server.url}/datasets/train-99999.txt`);
    expect(missing.status).toBe(404);
    expect(await missing.text()).toContain('no such dataset file');
    expect((await fetch(`${server.url}/datasets/train-00000.txt`, { method: 'POST', body: 'x' })).status).toBe(405);
    expect(await rawGet(server.url, '/datasets/../secret.txt')).not.toBe(200);
    expect(await rawGet(server.url, '/datasets/%2e%2e/secret.txt')).not.toBe(200);
  });

  it('is off without --datasets', async () => {
    server = await startServer({ port: 0, host: '127.0.0.1', staticDir: '/nonexistent', logger: null });
    expect((await fetch(`${server.url}/datasets/`)).status).not.toBe(200);
  });
});
