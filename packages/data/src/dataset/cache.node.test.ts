import { readdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DirShardCache } from './cache.node.ts';
import { checkBudget, MemoryShardCache, MIB } from './cache.ts';
import { openDataset } from './dataset.ts';
import { sha256Hex } from './manifest.ts';
import { fixtureFiles, memorySource, seededText, writeFixture } from './test-fixture.node.ts';

async function shard(size: number, seed: number): Promise<[string, Uint8Array]> {
  const bytes = seededText(size, seed);
  return [await sha256Hex(bytes), bytes];
}

describe('MemoryShardCache', () => {
  it('evicts the least recently used shard and never exceeds its budget', async () => {
    const cache = new MemoryShardCache(250);
    const [a, b, c] = await Promise.all([shard(100, 1), shard(100, 2), shard(100, 3)]);
    expect(await cache.put(...a)).toBe(true);
    expect(await cache.put(...b)).toBe(true);
    await cache.get(a[0]); // b is now the least recently used
    expect(await cache.put(...c)).toBe(true);
    expect(cache.usedBytes()).toBe(200);
    expect(await cache.get(b[0])).toBeNull();
    expect(await cache.get(a[0])).toEqual(a[1]);
    expect(await cache.get(c[0])).toEqual(c[1]);
  });

  it('refuses a put that only fits by evicting pinned shards', async () => {
    const cache = new MemoryShardCache(250);
    const [a, b, c, big] = await Promise.all([shard(100, 1), shard(100, 2), shard(100, 3), shard(300, 4)]);
    await cache.put(...a);
    await cache.put(...b);
    cache.pin(a[0]);
    cache.pin(b[0]);
    expect(await cache.put(...c)).toBe(false);
    expect(await cache.put(...big)).toBe(false);
    expect(cache.usedBytes()).toBe(200);
    cache.unpin(b[0]);
    expect(await cache.put(...c)).toBe(true);
    expect(await cache.get(a[0])).toEqual(a[1]);
    expect(await cache.get(b[0])).toBeNull();
    expect(cache.usedBytes()).toBe(200);
  });
});

describe('DirShardCache', () => {
  it('keeps files named by SHA-256 within its budget on disk, oldest use out first', async () => {
    const fixture = await writeFixture(new Map());
    try {
      const dir = join(fixture.dir, 'cache');
      const cache = new DirShardCache(dir, 2500);
      const [a, b, c] = await Promise.all([shard(1000, 1), shard(1000, 2), shard(1000, 3)]);
      await cache.put(...a);
      await cache.put(...b);
      await new Promise((resolve) => setTimeout(resolve, 20));
      await cache.get(a[0]);
      expect(await cache.put(...c)).toBe(true);
      expect((await readdir(dir)).sort()).toEqual([a[0], c[0]].sort());
      let onDisk = 0;
      for (const name of await readdir(dir)) onDisk += (await stat(join(dir, name))).size;
      expect(onDisk).toBeLessThanOrEqual(2500);
      // A second cache over the same folder finds what the first left.
      const again = new DirShardCache(dir, 2500);
      expect(await again.get(c[0])).toEqual(c[1]);
      expect(again.usedBytes()).toBe(2000);
    } finally {
      await fixture.remove();
    }
  });

  it('deletes a file damaged on disk instead of returning it', async () => {
    const fixture = await writeFixture(new Map());
    try {
      const cache = new DirShardCache(fixture.dir, 10_000);
      const [key, bytes] = await shard(1000, 5);
      await cache.put(key, bytes);
      const damaged = new Uint8Array(await readFile(join(fixture.dir, key)));
      damaged[0] = (damaged[0] as number) ^ 1;
      await writeFile(join(fixture.dir, key), damaged);
      expect(await cache.get(key)).toBeNull();
      expect(await readdir(fixture.dir)).toEqual([]);
      expect(cache.usedBytes()).toBe(0);
    } finally {
      await fixture.remove();
    }
  });

  it('serves a dataset’s shards a second time without the source', async () => {
    const files = await fixtureFiles({ train: [2000, 2000], validation: [1000] });
    const fixture = await writeFixture(new Map());
    try {
      const source = memorySource(files);
      const first = await openDataset(source, { cache: new DirShardCache(fixture.dir, 10_000) });
      await first.shard(0);
      const second = await openDataset(source, { cache: new DirShardCache(fixture.dir, 10_000) });
      expect(await second.shard(0)).toEqual(files.get('train-00000.txt'));
      expect(second.counters).toMatchObject({ fetched: 0, cacheHits: 1 });
      expect(source.reads.get('train-00000.txt')).toBe(1);
    } finally {
      await fixture.remove();
    }
  });
});

describe('checkBudget', () => {
  it('refuses a budget smaller than one shard, saying how much is needed', async () => {
    const files = await fixtureFiles({ train: [3 * MIB, 5 * MIB - 10], validation: [1000] });
    const { loaded } = await openDataset(memorySource(files));
    expect(() => checkBudget(2 * MIB, loaded)).toThrow(
      'a cache budget of 2 MiB cannot hold one shard of this dataset (largest 5.0 MiB): give at least 5 MiB',
    );
    expect(() => checkBudget(5 * MIB, loaded)).not.toThrow();
  });
});
