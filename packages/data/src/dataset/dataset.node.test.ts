import { describe, expect, it } from 'vitest';
import { MemoryShardCache } from './cache.ts';
import { DatasetSourcesError, ManifestChangedError, newCounters, openDataset, ShardHashError } from './dataset.ts';
import { MANIFEST_FILE } from './manifest.ts';
import { dirDatasetSource } from './source.node.ts';
import { DatasetFetchError } from './source.ts';
import { fixtureFiles, memorySource, writeFixture } from './test-fixture.node.ts';

const shape = { train: [3000, 3000, 2000], validation: [1500] };

async function rejection(promise: Promise<unknown>): Promise<Error> {
  return promise.then(
    () => {
      throw new Error('expected a rejection');
    },
    (error: Error) => error,
  );
}

describe('openDataset', () => {
  it('opens a folder and hands out shards whose bytes match the manifest', async () => {
    const files = await fixtureFiles(shape);
    const fixture = await writeFixture(files);
    try {
      const dataset = await openDataset([dirDatasetSource(fixture.dir)]);
      expect(dataset.loaded.train).toHaveLength(3);
      expect(dataset.loaded.validation).toHaveLength(1);
      expect(await dataset.shard(1)).toEqual(files.get('train-00001.txt'));
      expect(await dataset.shard(dataset.loaded.validation[0] as never)).toEqual(files.get('validation-00000.txt'));
      expect(dataset.counters).toMatchObject({ fetched: 2, fetchedBytes: 4500, refused: 0, fetchErrors: 0 });
      await expect(dataset.shard(3)).rejects.toThrow(/training shard 3 does not exist/);
    } finally {
      await fixture.remove();
    }
  });

  it('refuses a corrupted shard and fetches it from the fallback source', async () => {
    const files = await fixtureFiles(shape);
    const damaged = new Map(files);
    const bytes = new Uint8Array(files.get('train-00002.txt') as Uint8Array);
    bytes[100] = (bytes[100] as number) ^ 1;
    damaged.set('train-00002.txt', bytes);
    const primary = memorySource(damaged, 'primary');
    const mirror = memorySource(files, 'mirror');

    const alone = await openDataset(primary);
    const error = await rejection(alone.shard(2));
    expect(error).toBeInstanceOf(ShardHashError);
    const hashError = error as ShardHashError;
    expect(hashError.file).toBe('train-00002.txt');
    expect(hashError.expected).toBe(alone.loaded.train[2]?.sha256);
    expect(hashError.message).toMatch(
      /^shard train-00002\.txt does not match its hash: manifest says [0-9a-f]{16}…, its bytes hash to [0-9a-f]{16}…/,
    );
    expect(alone.counters.refused).toBe(1);

    const counters = newCounters();
    const dataset = await openDataset([primary, mirror], { counters });
    expect(await dataset.shard(2)).toEqual(files.get('train-00002.txt'));
    expect(counters).toMatchObject({ refused: 1, fetched: 1 });
    expect(mirror.reads.get('train-00002.txt')).toBe(1);
  });

  it('names every source’s reason when all fail', async () => {
    const files = await fixtureFiles(shape);
    const missing = new Map(files);
    missing.delete('train-00000.txt');
    const dataset = await openDataset([memorySource(missing, 'a'), memorySource(missing, 'b')]);
    const error = await rejection(dataset.shard(0));
    expect(error).toBeInstanceOf(DatasetSourcesError);
    expect((error as DatasetSourcesError).errors).toHaveLength(2);
    expect(error.cause).toBeInstanceOf(DatasetFetchError);
    expect(error.message).toMatch(/a\/train-00000\.txt does not exist; b\/train-00000\.txt does not exist/);
    expect(dataset.counters.fetchErrors).toBe(2);
  });

  it('reads the manifest from a mirror when the primary is down', async () => {
    const files = await fixtureFiles(shape);
    const dataset = await openDataset([memorySource(new Map(), 'down'), memorySource(files, 'up')]);
    expect(dataset.loaded.train).toHaveLength(3);
  });

  it('refuses a dataset whose manifest is not the one the room trains on', async () => {
    const files = await fixtureFiles(shape);
    const other = await fixtureFiles({ ...shape, seed: 2 });
    const expected = (await openDataset(memorySource(other))).hash;
    const error = await rejection(openDataset(memorySource(files, 'copy'), { expectHash: expected }));
    expect(error).toBeInstanceOf(ManifestChangedError);
    expect(error.message).toMatch(
      new RegExp(`^dataset copy manifest hash is [0-9a-f]{64}, the room trains on ${expected}`),
    );
  });

  it('notices a manifest that changed under a running room', async () => {
    const files = await fixtureFiles(shape);
    const fixture = await writeFixture(files);
    try {
      const source = dirDatasetSource(fixture.dir);
      const dataset = await openDataset(source);
      await dataset.recheckManifest();
      const { writeFile } = await import('node:fs/promises');
      const changed = (await fixtureFiles({ ...shape, seed: 7 })).get(MANIFEST_FILE) as Uint8Array;
      await writeFile(`${fixture.dir}/${MANIFEST_FILE}`, changed);
      await expect(dataset.recheckManifest()).rejects.toBeInstanceOf(ManifestChangedError);
    } finally {
      await fixture.remove();
    }
  });

  it('serves repeated shards from the cache, and one fetch for concurrent asks', async () => {
    const files = await fixtureFiles(shape);
    const source = memorySource(files);
    const dataset = await openDataset(source, { cache: new MemoryShardCache(1 << 20) });
    const [a, b] = await Promise.all([dataset.shard(0), dataset.shard(0)]);
    expect(a).toBe(b);
    expect(await dataset.shard(0)).toEqual(files.get('train-00000.txt'));
    expect(source.reads.get('train-00000.txt')).toBe(1);
    expect(dataset.counters).toMatchObject({ fetched: 1, cacheHits: 1 });
  });
});
