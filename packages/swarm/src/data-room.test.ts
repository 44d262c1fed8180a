import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  assignShards,
  batchesInShard,
  type Dataset,
  dirDatasetSource,
  MemoryShardCache,
  openDataset,
  packDataset,
} from '@shoal/data';
import type { DatasetRef, RunConfig } from '@shoal/protocol';
import { roomCheckpointOf } from '@shoal/room';
import { createServiceRoom } from '@shoal/room/test-services';
import { beforeAll, describe, expect, it } from 'vitest';
import { dataMembers, drawnIn, RoomDataLedger } from './data-ledger.ts';

/** Seeded words, so the dataset is the same on every run: about `bytes` of them. */
function seededText(bytes: number, seed: number): string {
  const words = [
    'whale',
    'sea',
    'ship',
    'captain',
    'harpoon',
    'deck',
    'wind',
    'sail',
    'ocean',
    'boat',
    'rope',
    'storm',
  ];
  let state = seed >>> 0;
  const parts: string[] = [];
  let length = 0;
  while (length < bytes) {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    const word = words[state % words.length] as string;
    const end = state % 17 === 0 ? '.\n' : ' ';
    parts.push(word + end);
    length += word.length + end.length;
  }
  return parts.join('');
}

let dir: string;
let ref: DatasetRef;
const SHARD_BYTES = 64 * 1024;

beforeAll(async () => {
  const root = mkdtempSync(join(tmpdir(), 'shoal-data-room-'));
  writeFileSync(join(root, 'text.txt'), seededText(10 * SHARD_BYTES, 7));
  dir = join(root, 'dataset');
  const packed = await packDataset([join(root, 'text.txt')], {
    outDir: dir,
    shardBytes: SHARD_BYTES,
    validationFraction: 0.1,
  });
  const dataset = await openDataset(dirDatasetSource(dir));
  ref = {
    manifest: packed.hash,
    url: '/datasets/test/',
    trainShards: dataset.loaded.train.length,
    validationShards: dataset.loaded.validation.length,
    trainBytes: dataset.loaded.train.reduce((sum, shard) => sum + shard.bytes, 0),
  };
});

const withDataset = (config: RunConfig): RunConfig => ({
  ...config,
  train: { ...config.train, batchSize: 16, seqLen: 64 },
  data: { ...config.data, corpus: 'test', dataset: ref },
});

describe('a dataset room', () => {
  it('deals each volunteer only its shards, moves a crashed volunteer’s shards on where they were, and saves the ledger', async () => {
    const room = await createServiceRoom({ configure: withDataset });
    room.service.start();
    const fetched = new Map<string, Set<number>>();
    const datasets = new Map<string, Dataset>();
    const volunteer = (peer: string) => {
      fetched.set(peer, new Set());
      return room.addVolunteer(peer, {
        openDataset: async (config) => {
          // a cache of three shards: the walker holds the current and the next one
          const opened = await room.clock.track(
            openDataset(dirDatasetSource(dir), {
              expectHash: config.data.dataset?.manifest,
              cache: new MemoryShardCache(3 * SHARD_BYTES),
            }),
          );
          const shard = opened.shard.bind(opened);
          opened.shard = (which) => {
            const index = typeof which === 'number' ? which : opened.loaded.train.indexOf(which);
            fetched.get(peer)?.add(index);
            return room.clock.track(shard(which));
          };
          datasets.set(peer, opened);
          return opened;
        },
      });
    };
    const volunteers = ['v0', 'v1', 'v2'].map((peer) => [peer, volunteer(peer)] as const);
    for (const [, service] of volunteers) void service.start().catch(() => {});
    await room.clock.runAsync({ until: 6_000 });

    const members = dataMembers([...room.service.host.coordinator.members.values()]);
    expect(members).toEqual(['v0', 'v1', 'v2']);
    const assignment = assignShards(ref.trainShards, members, { seed: room.config.data.seed, epoch: 0 });
    for (const [peer, service] of volunteers) {
      // a few shards, never the dataset: the current one and the one fetched ahead, under each
      // roster it saw (v0 was alone in the room at first, and dealt everything then)
      expect(fetched.get(peer)?.size ?? 0, peer).toBeLessThanOrEqual(4);
      expect(ref.trainShards).toBeGreaterThanOrEqual(8);
      expect(service.feed?.stats?.maxHeldBytes ?? 0).toBeLessThanOrEqual(3 * SHARD_BYTES);
      expect(service.worker.metrics.innerStep).toBeGreaterThan(0);
      // what it draws from now is its own
      const current = service.feed?.state()?.shard;
      expect(assignment.get(peer)).toContain(current);
    }
    const ledger = room.service.host.coordinator.ledger?.message();
    const before = drawnIn(ledger, 0);
    expect([...before.values()].reduce((a, b) => a + b, 0)).toBeGreaterThan(0);

    // v2 crashes: its shards go to v0 and v1, which start them where v2's heartbeats left them
    const v2Shards = assignment.get('v2') ?? [];
    room.network.crash('v2');
    await room.clock.runAsync({ until: 12_000 });
    const after = dataMembers([...room.service.host.coordinator.members.values()]);
    expect(after).toEqual(['v0', 'v1']);
    const moved = assignShards(ref.trainShards, after, { seed: room.config.data.seed, epoch: 0 });
    const startedOn = v2Shards.filter((shard) => (before.get(shard) ?? 0) > 0);
    expect(startedOn.length).toBeGreaterThan(0);
    const drawnNow = drawnIn(room.service.host.coordinator.ledger?.message(), 0);
    for (const shard of startedOn) {
      const owner = [...moved].find(([, shards]) => shards.includes(shard))?.[0] as string;
      expect(['v0', 'v1']).toContain(owner);
      // the count only goes on from where v2 stood, and the new owner knows it
      expect(drawnNow.get(shard) ?? 0).toBeGreaterThanOrEqual(before.get(shard) ?? 0);
      const heir = volunteers.find(([peer]) => peer === owner)?.[1];
      expect(heir?.feed?.state()?.drawn[String(shard)] ?? 0).toBeGreaterThanOrEqual(before.get(shard) ?? 0);
    }
    // the checkpoints carry the ledger
    expect(room.saved.length).toBeGreaterThan(0);
    expect(roomCheckpointOf(room.service.host).state.data).toEqual(room.service.host.coordinator.ledger?.message());
    expect(room.saved.at(-1)?.state.data?.epochs[0]?.epoch).toBe(0);
    expect(room.errors).toEqual([]);
    for (const [, service] of volunteers) service.destroy();
  }, 120_000);
});

describe('a dataset room’s volunteer whose shards do not come', () => {
  it('asks again (1, 2, 4 s), trains on once a shard comes, and stops with a sentence when none does', async () => {
    const room = await createServiceRoom({ configure: withDataset });
    room.service.start();
    const flaky = (peer: string, failures: number) =>
      room.addVolunteer(peer, {
        openDataset: async (config) => {
          const opened = await room.clock.track(
            openDataset(dirDatasetSource(dir), { expectHash: config.data.dataset?.manifest }),
          );
          const shard = opened.shard.bind(opened);
          let left = failures;
          opened.shard = (which) =>
            left-- > 0
              ? Promise.reject(new Error(`dataset URL /datasets/test/ answered HTTP 503 Service Unavailable`))
              : room.clock.track(shard(which));
          return opened;
        },
      });
    const patient = flaky('v0', 2);
    const hopeless = flaky('v1', 1_000);
    void patient.start().catch(() => {});
    const ended = hopeless.start().then(
      () => null,
      (error: Error) => error,
    );
    await room.clock.runAsync({ until: 20_000 });
    // (its second failure may be the prefetch's, which is asked again when it is due)
    expect(patient.feed?.fetchFailures).toBeGreaterThanOrEqual(1);
    expect(patient.worker.metrics.innerStep).toBeGreaterThan(0);
    expect(hopeless.feed?.fetchFailures).toBe(4);
    expect((await ended)?.message).toMatch(/^no batch after 4 tries to fetch a shard: dataset URL .* HTTP 503/);
    expect(hopeless.worker.metrics.innerStep).toBe(0);
    patient.destroy();
    hopeless.destroy();
  }, 60_000);
});

describe('RoomDataLedger', () => {
  const config = { train: { batchSize: 16, seqLen: 64 }, data: { seed: 1 } } as RunConfig;
  const dataset = { manifest: 'a'.repeat(64), url: '/d/', trainShards: 8, validationShards: 1, trainBytes: 8 * 65536 };
  const members = ['a', 'b', 'c'];
  const owned = assignShards(8, members, { seed: 1, epoch: 0 });
  const shardOf = (peer: string) => owned.get(peer)?.[0] as number;

  it('takes a volunteer’s claims only for its own shards, forward, within a shard’s batches', () => {
    const ledger = new RoomDataLedger(dataset, config);
    expect(ledger.note('a', [{ epoch: 0, shard: shardOf('a'), drawn: 5 }], members)).toBe(true);
    expect(ledger.note('a', [{ epoch: 0, shard: shardOf('a'), drawn: 3 }], members)).toBe(false); // backwards
    expect(ledger.note('a', [{ epoch: 0, shard: shardOf('b'), drawn: 9 }], members)).toBe(false); // b's shard
    const cap = batchesInShard(dataset.trainBytes, config.train);
    expect(ledger.note('a', [{ epoch: 0, shard: shardOf('a'), drawn: cap + 1 }], members)).toBe(false);
    expect(ledger.note('a', [{ epoch: 0, shard: 99, drawn: 1 }], members)).toBe(false);
    expect(ledger.refused).toBe(3);
    expect(drawnIn(ledger.message(), 0)).toEqual(new Map([[shardOf('a'), 5]]));
  });

  it('keeps two epochs open, and resumes from a saved ledger', () => {
    const ledger = new RoomDataLedger(dataset, config);
    const at = (epoch: number, peer: string) =>
      ledger.note(
        peer,
        [{ epoch, shard: assignShards(8, members, { seed: 1, epoch }).get(peer)?.[0] as number, drawn: 1 }],
        members,
      );
    expect(at(0, 'a')).toBe(true);
    expect(at(1, 'b')).toBe(true);
    expect(at(2, 'c')).toBe(true);
    expect(ledger.message().epochs.map((open) => open.epoch)).toEqual([1, 2]);
    expect(at(0, 'a')).toBe(false); // closed
    const resumed = new RoomDataLedger(dataset, config, ledger.message());
    expect(resumed.message()).toEqual(ledger.message());
  });
});
