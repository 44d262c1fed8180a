import { largestTrainShard } from '@shoal/data';
import { createRunConfig } from '@shoal/room/run-config';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { type DatasetFixture, datasetFixture, FIXTURE_ORIGIN, FIXTURE_SHARD_BYTES } from './dataset-fixture.ts';
import {
  checkDatasetSpec,
  DATASET_EVAL_BYTES,
  datasetEvalBatches,
  datasetUrlOf,
  listServedDatasets,
  MIB,
  openRoomDataset,
  openUrlDataset,
  openVolunteerDataset,
  packedDatasetInfo,
  roomDatasetUrl,
  shardBudgetOf,
} from './packed-dataset.ts';

let fixture: DatasetFixture;
beforeAll(async () => {
  fixture = await datasetFixture();
  vi.stubGlobal('fetch', fixture.fetch);
});
afterAll(async () => {
  vi.unstubAllGlobals();
  await fixture.remove();
});

describe('a dataset URL in the host form', () => {
  it('is an http(s) URL or a path of this server, named as a folder', () => {
    expect(checkDatasetSpec('')).toMatch(/Give the dataset/);
    expect(checkDatasetSpec('ftp://example.org/d/')).toMatch(/http\(s\)/);
    expect(checkDatasetSpec('datasets/x')).toMatch(/http\(s\)/);
    expect(checkDatasetSpec('/datasets/x/')).toBeUndefined();
    expect(checkDatasetSpec('https://data.example.org/fineweb')).toBeUndefined();
    expect(roomDatasetUrl(' https://data.example.org/fineweb ')).toBe('https://data.example.org/fineweb/');
    expect(datasetUrlOf('/datasets/x/', 'http://room.example:8091')).toBe('http://room.example:8091/datasets/x/');
    expect(datasetUrlOf('https://data.example.org/x/', 'http://room.example')).toBe('https://data.example.org/x/');
  });

  it('opens the manifest: the room names it by hash and by the path volunteers resolve on their origin', async () => {
    const { name, ref } = await openRoomDataset(fixture.path.slice(0, -1), FIXTURE_ORIGIN);
    expect(name).toBe(fixture.name);
    expect(ref).toMatchObject({ manifest: fixture.hash, url: fixture.path, validationShards: 1 });
    expect(ref.trainShards).toBeGreaterThan(4);
    expect(ref.trainBytes).toBeGreaterThan(ref.trainShards * (FIXTURE_SHARD_BYTES / 2));
    // the manifest only: no shard is fetched to create a room
    expect(fixture.asked.at(-1)).toBe(`${FIXTURE_ORIGIN}${fixture.path}manifest.json`);
  });

  it('says why a URL holds no dataset: 404, not a manifest, unreachable (CORS)', async () => {
    await expect(openRoomDataset('/datasets/missing/', FIXTURE_ORIGIN)).rejects.toThrow(/HTTP 404/);
    await expect(openRoomDataset('not a url', FIXTURE_ORIGIN)).rejects.toThrow(/http\(s\)/);
    const notManifest = (async () => Response.json({ hello: 'world' })) as typeof fetch;
    vi.stubGlobal('fetch', notManifest);
    await expect(openRoomDataset('http://other.example/d/', FIXTURE_ORIGIN)).rejects.toThrow(
      /not a Shoal dataset manifest/,
    );
    vi.stubGlobal('fetch', (async () => {
      throw new TypeError('Failed to fetch');
    }) as typeof fetch);
    await expect(openRoomDataset('https://other.example/d/', FIXTURE_ORIGIN)).rejects.toThrow(/CORS/);
    vi.stubGlobal('fetch', fixture.fetch);
  });
});

describe('a volunteer’s copy of the room’s dataset', () => {
  const config = () => {
    const run = createRunConfig({ preset: 'nano', corpus: fixture.name, train: { batchSize: 2, seqLen: 32 } });
    run.data.dataset = {
      manifest: fixture.hash,
      url: fixture.path,
      trainShards: 9,
      validationShards: 1,
      trainBytes: 9 * FIXTURE_SHARD_BYTES,
    };
    return run;
  };

  it('keeps 4 × the largest shard by default, or the budget chosen; less than one shard is refused', async () => {
    const { dataset, url } = await openVolunteerDataset(config(), FIXTURE_ORIGIN, null);
    expect(url).toBe(`${FIXTURE_ORIGIN}${fixture.path}`);
    const largest = largestTrainShard(dataset.loaded);
    expect(largest).toBeGreaterThan(FIXTURE_SHARD_BYTES - 1024); // shards end at a line's end
    expect(dataset.cache?.budgetBytes).toBe(4 * largest);
    expect(shardBudgetOf(dataset.loaded, 1)).toBe(MIB);
    const small = openVolunteerDataset(config(), FIXTURE_ORIGIN, 0.01);
    await expect(small).rejects.toThrow(/cache budget of 0\.0 MiB cannot hold one shard .* give at least 1 MiB/);
    const info = packedDatasetInfo(
      config().data.dataset as NonNullable<ReturnType<typeof config>['data']['dataset']>,
      dataset,
    );
    expect(info).toMatchObject({ name: fixture.name, source: 'url', fingerprint: fixture.hash });
    expect(info.packed?.largestShardBytes).toBe(largest);
  });

  it('refuses a dataset whose manifest is not the room’s', async () => {
    const run = config();
    (run.data.dataset as { manifest: string }).manifest = '0'.repeat(64);
    await expect(openVolunteerDataset(run, FIXTURE_ORIGIN, null)).rejects.toThrow(/the dataset changed/);
  });

  it('gives the host DATASET_EVAL_BYTES of validation windows', async () => {
    const run = config();
    const dataset = await openUrlDataset(`${FIXTURE_ORIGIN}${fixture.path}`, { expectHash: fixture.hash });
    const batches = await datasetEvalBatches(dataset, run);
    expect(batches.length).toBe(DATASET_EVAL_BYTES / (2 * 32));
    expect(batches[0]?.inputs.length).toBe(2 * 32);
  });
});

describe('the datasets this server serves', () => {
  it('lists GET /datasets/, and none when the server serves none or answers garbage', async () => {
    const listing = { datasets: [{ name: 'a', url: '/datasets/a/', manifest: 'f'.repeat(64), bytes: 10, shards: 2 }] };
    expect(await listServedDatasets(FIXTURE_ORIGIN, (async () => Response.json(listing)) as typeof fetch)).toEqual(
      listing.datasets,
    );
    expect(
      await listServedDatasets(FIXTURE_ORIGIN, (async () => new Response('', { status: 404 })) as typeof fetch),
    ).toEqual([]);
    expect(await listServedDatasets(FIXTURE_ORIGIN, (async () => new Response('<html>')) as typeof fetch)).toEqual([]);
  });
});
