/**
 * For the tests (Node): a small packed dataset in a temporary folder, and a `fetch` that serves
 * it at http://localhost/datasets/NAME/ as `shoal server --datasets` would (404 elsewhere).
 */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { packDataset } from '@shoal/data';

export const FIXTURE_ORIGIN = 'http://localhost';
export const FIXTURE_SHARD_BYTES = 64 * 1024;

export interface DatasetFixture {
  name: string;
  /** SHA-256 of its manifest.json. */
  hash: string;
  /** Where the room names it: /datasets/NAME/. */
  path: string;
  fetch: typeof fetch;
  /** URLs asked for, in order. */
  asked: string[];
  remove(): Promise<void>;
}

/** About 640 KiB of seeded words in 64 KiB shards, one in ten for validation. */
export async function datasetFixture(name = 'fixture-words'): Promise<DatasetFixture> {
  const dir = await mkdtemp(join(tmpdir(), 'shoal-web-dataset-'));
  const words = ['whale', 'sea', 'ship', 'deck', 'sail', 'the', 'of', 'and'];
  let state = 7;
  const parts: string[] = [];
  for (let length = 0; length < 640 * 1024; ) {
    state = (state * 1103515245 + 12345) % 2 ** 31;
    const part = `${words[state % words.length]}${state % 11 === 0 ? '.\n' : ' '}`;
    parts.push(part);
    length += part.length;
  }
  await writeFile(join(dir, 'words.txt'), parts.join(''));
  const outDir = join(dir, name);
  const packed = await packDataset([join(dir, 'words.txt')], {
    outDir,
    name,
    shardBytes: FIXTURE_SHARD_BYTES,
    validationFraction: 0.1,
  });
  const path = `/datasets/${name}/`;
  const asked: string[] = [];
  const fetchFixture = (async (input: string | URL | Request) => {
    const url = String(input instanceof Request ? input.url : input);
    asked.push(url);
    const prefix = `${FIXTURE_ORIGIN}${path}`;
    if (!url.startsWith(prefix)) return new Response('Not found', { status: 404, statusText: 'Not Found' });
    try {
      const bytes = await readFile(join(outDir, url.slice(prefix.length)));
      return new Response(bytes, { headers: { 'content-type': 'application/octet-stream' } });
    } catch {
      return new Response('Not found', { status: 404, statusText: 'Not Found' });
    }
  }) as typeof fetch;
  return { name, hash: packed.hash, path, fetch: fetchFixture, asked, remove: () => rm(dir, { recursive: true }) };
}
