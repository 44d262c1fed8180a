import { describe, expect, it } from 'vitest';
import { assignShards } from './assign.ts';
import { MemoryShardCache } from './cache.ts';
import { type Dataset, openDataset } from './dataset.ts';
import {
  batchesInShard,
  ShardWalker,
  type ShardWalkerOptions,
  shardBatch,
  shardBatchOffsets,
} from './sharded-sampler.ts';
import type { DatasetSource } from './source.ts';
import { fixtureFiles, memorySource, seededText } from './test-fixture.node.ts';

describe('shardBatch', () => {
  it('draws windows inside the shard with targets shifted by one, over a grid of shapes', () => {
    for (const batchSize of [1, 3, 8]) {
      for (const seqLen of [1, 7, 64]) {
        for (const length of [seqLen + 1, seqLen + 2, 1000, 4097]) {
          const bytes = seededText(length, length);
          for (const index of [0, 1, 2 ** 33]) {
            const key = { batchSize, seqLen, seed: 5, epoch: 1, shard: 9, index };
            const offsets = shardBatchOffsets(length, key);
            const batch = shardBatch(bytes, key);
            expect(batch.inputs).toHaveLength(batchSize * seqLen);
            offsets.forEach((offset, row) => {
              expect(offset).toBeGreaterThanOrEqual(0);
              expect(offset + seqLen).toBeLessThan(length);
              const window = bytes.subarray(offset, offset + seqLen + 1);
              expect(Array.from(batch.inputs.subarray(row * seqLen, (row + 1) * seqLen))).toEqual(
                Array.from(window.subarray(0, seqLen)),
              );
              expect(Array.from(batch.targets.subarray(row * seqLen, (row + 1) * seqLen))).toEqual(
                Array.from(window.subarray(1)),
              );
            });
            expect(shardBatch(bytes, key)).toEqual(batch);
          }
        }
      }
    }
  });

  it('depends on seed, epoch, shard and index', () => {
    const key = { batchSize: 16, seqLen: 8, seed: 1, epoch: 0, shard: 0, index: 0 };
    const base = shardBatchOffsets(100_000, key);
    for (const change of [{ seed: 2 }, { epoch: 1 }, { shard: 1 }, { index: 1 }]) {
      expect(shardBatchOffsets(100_000, { ...key, ...change })).not.toEqual(base);
    }
  });

  it('refuses a shard shorter than one window', () => {
    expect(() =>
      shardBatch(new Uint8Array(8), { batchSize: 1, seqLen: 8, seed: 0, epoch: 0, shard: 3, index: 0 }),
    ).toThrow('shard 3 has 8 bytes, fewer than one window of seqLen + 1 = 9');
  });

  it('counts batches per shard, at least one', () => {
    expect(batchesInShard(10_000, { batchSize: 4, seqLen: 100 })).toBe(25);
    expect(batchesInShard(10, { batchSize: 4, seqLen: 100 })).toBe(1);
  });
});

/** A source that answers each read after `delayMs`. */
function slow(source: DatasetSource, delayMs: number): DatasetSource {
  return {
    where: source.where,
    read: async (file) => {
      await new Promise((resolve) => setTimeout(resolve, delayMs));
      return source.read(file);
    },
  };
}

async function fixtureDataset(train: number[], delayMs = 0): Promise<Dataset> {
  const files = await fixtureFiles({ train, validation: [1000] });
  return openDataset(slow(memorySource(files), delayMs));
}

const shape = { batchSize: 4, seqLen: 16 }; // 64 bytes a batch
const options = (member: string, members: string[]): ShardWalkerOptions => ({ ...shape, seed: 11, member, members });

/** Draws one batch and names it (epoch:shard:index) from the walker's state. */
async function draw(walker: ShardWalker): Promise<string> {
  await walker.next();
  const { epoch, shard, batch } = walker.state();
  return `${epoch}:${shard}:${batch - 1}`;
}

describe('ShardWalker', () => {
  it('draws the same batches from the same start, shard after shard in the member’s order', async () => {
    const dataset = await fixtureDataset([640, 320, 1000, 700, 256, 900]);
    const members = ['a', 'b'];
    const first = new ShardWalker(dataset, options('a', members));
    const second = new ShardWalker(dataset, options('a', members));
    const mine = assignShards(6, members, { seed: 11, epoch: 0 }).get('a') as number[];
    const shards: number[] = [];
    for (let i = 0; i < 30; i++) {
      expect(await second.next()).toEqual(await first.next());
      const { shard, epoch } = first.state();
      if (epoch === 0 && shards.at(-1) !== shard) shards.push(shard as number);
    }
    expect(shards).toEqual(mine);
  });

  it('resumes mid-shard from a checkpointed state', async () => {
    const dataset = await fixtureDataset([640, 320, 1000, 700]);
    const walker = new ShardWalker(dataset, options('a', ['a']));
    for (let i = 0; i < 13; i++) await walker.next();
    const saved = JSON.parse(JSON.stringify(walker.state()));
    expect(saved.batch).toBeGreaterThan(0);
    const resumed = new ShardWalker(dataset, { ...options('a', ['a']), state: saved });
    for (let i = 0; i < 25; i++) expect(await resumed.next()).toEqual(await walker.next());
    expect(resumed.state()).toEqual(walker.state());
  });

  it('moves to the next epoch, with a fresh assignment, after the member’s last shard', async () => {
    const dataset = await fixtureDataset([640, 320, 1000]);
    const walker = new ShardWalker(dataset, options('a', ['a']));
    const total = [640, 320, 1000].reduce((sum, bytes) => sum + batchesInShard(bytes, shape), 0);
    for (let i = 0; i < total; i++) expect((await draw(walker)).startsWith('0:')).toBe(true);
    expect(await draw(walker)).toMatch(/^1:\d+:0$/);
    expect(Object.keys(walker.state().drawn)).toHaveLength(1);
  });

  it('hands a leaving member’s shards to the others without drawing any batch twice in the epoch', async () => {
    const train = [640, 320, 1000, 700, 256, 900, 512, 800, 1200, 400, 660, 330];
    const dataset = await fixtureDataset(train);
    const all = ['m0', 'm1', 'm2'];
    const walkers = all.map((member) => new ShardWalker(dataset, options(member, all)));
    const drawn: string[] = [];
    for (let round = 0; round < 12; round++) for (const walker of walkers) drawn.push(await draw(walker));
    const leaving = walkers[2] as ShardWalker;
    expect(leaving.state().batch).toBeGreaterThan(0); // it leaves mid-shard
    const stayers = walkers.slice(0, 2);
    for (const walker of stayers) walker.setMembers(['m0', 'm1'], leaving.state().drawn);
    for (const walker of stayers) {
      for (;;) {
        const key = await draw(walker);
        if (key.startsWith('1:')) break;
        drawn.push(key);
      }
    }
    expect(new Set(drawn).size).toBe(drawn.length);
    const expected = train.reduce((sum, bytes) => sum + batchesInShard(bytes, shape), 0);
    expect(drawn).toHaveLength(expected);
  });

  it('gives a joining member shards mid-epoch, stopping a walker whose current shard moved', async () => {
    const train = [640, 320, 1000, 700, 256, 900, 512, 800, 1200, 400, 660, 330];
    const dataset = await fixtureDataset(train);
    const expected = train.reduce((sum, bytes) => sum + batchesInShard(bytes, shape), 0);
    let moved = 0;
    for (const seed of [1, 2, 3, 4, 5, 6]) {
      const walkers = ['a', 'b'].map(
        (member) => new ShardWalker(dataset, { ...shape, seed, member, members: ['a', 'b'] }),
      );
      const drawn: string[] = [];
      for (let round = 0; round < 8; round++) for (const walker of walkers) drawn.push(await draw(walker));
      const known = Object.assign({}, ...walkers.map((walker) => walker.state().drawn));
      const before = walkers.map((walker) => walker.state().shard);
      const room = ['a', 'b', 'c'];
      for (const walker of walkers) walker.setMembers(room, known);
      moved += walkers.filter((walker, i) => walker.state().shard !== before[i]).length;
      walkers.push(new ShardWalker(dataset, { ...shape, seed, member: 'c', members: room, drawn: known }));
      for (const walker of walkers) {
        for (;;) {
          const key = await draw(walker);
          if (key.startsWith('1:')) break;
          drawn.push(key);
        }
      }
      expect(new Set(drawn).size).toBe(drawn.length);
      expect(drawn).toHaveLength(expected);
    }
    expect(moved).toBeGreaterThan(0);
  });

  it('prefetches the next shard so that only the first shard is waited for', async () => {
    const dataset = await fixtureDataset([256, 256, 256, 256, 256], 15);
    const walker = new ShardWalker(dataset, { ...options('a', ['a']), budgetBytes: 512 });
    await walker.next();
    const firstWait = walker.stats.waitsMs;
    expect(firstWait).toBeGreaterThan(5);
    for (let i = 0; i < 15; i++) {
      await new Promise((resolve) => setTimeout(resolve, 10)); // the step
      await walker.next();
    }
    expect(walker.stats.prefetched).toBeGreaterThanOrEqual(4);
    expect(walker.stats.waitsMs - firstWait).toBeLessThan(5);
  });

  it('never holds more shard bytes than its budget, and does not prefetch what would not fit', async () => {
    const train = [1000, 300, 900, 200, 1000, 600, 100];
    const dataset = await fixtureDataset(train);
    for (const budgetBytes of [1000, 1300, 2000]) {
      const walker = new ShardWalker(dataset, { ...options('a', ['a']), budgetBytes });
      for (let i = 0; i < 80; i++) {
        await walker.next();
        expect(walker.heldBytes).toBeLessThanOrEqual(budgetBytes);
      }
      expect(walker.stats.maxHeldBytes).toBeLessThanOrEqual(budgetBytes);
      if (budgetBytes === 2000) expect(walker.stats.prefetched).toBeGreaterThan(5);
    }
    expect(() => new ShardWalker(dataset, { ...options('a', ['a']), budgetBytes: 999 })).toThrow(
      /cannot hold one shard of this dataset/,
    );
  });

  it('takes the cache’s budget when given none, and pins the shards it holds', async () => {
    const files = await fixtureFiles({ train: [1000, 300, 900, 200, 1000, 600, 100], validation: [1000] });
    const cache = new MemoryShardCache(2000);
    const dataset = await openDataset(memorySource(files), { cache });
    const walker = new ShardWalker(dataset, options('a', ['a']));
    for (let i = 0; i < 80; i++) {
      await walker.next();
      expect(walker.heldBytes).toBeLessThanOrEqual(2000);
      expect(cache.usedBytes()).toBeLessThanOrEqual(2000);
    }
    // Whatever the walker holds stays in the cache: a put that needs it evicted is refused.
    const { shard } = walker.state();
    const held = dataset.loaded.train[shard as number];
    expect(await cache.get(held?.sha256 as string)).not.toBeNull();
    expect(await cache.put('f'.repeat(64), new Uint8Array(2001 - (held?.bytes ?? 0)))).toBe(false);
  });

  it('retries a shard whose fetch failed', async () => {
    const files = await fixtureFiles({ train: [640, 640], validation: [1000] });
    const source = memorySource(files);
    let failures = 1;
    const flaky: DatasetSource = {
      where: 'flaky',
      read: (file) =>
        file.startsWith('train') && failures-- > 0 ? Promise.reject(new Error('reset')) : source.read(file),
    };
    const walker = new ShardWalker(await openDataset(flaky), options('a', ['a']));
    await expect(walker.next()).rejects.toThrow('reset');
    const reference = new ShardWalker(await openDataset(source), options('a', ['a']));
    expect(await walker.next()).toEqual(await reference.next());
  });

  it('refuses a member that is not in the room', async () => {
    const dataset = await fixtureDataset([640, 640]);
    expect(() => new ShardWalker(dataset, options('z', ['a', 'b']))).toThrow('member z is not among');
  });
});
