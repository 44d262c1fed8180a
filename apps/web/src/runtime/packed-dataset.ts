/**
 * Packed datasets in the browser (docs/cli.md, `shoal data pack`): what the host's form, the host's
 * room worker and a volunteer's room worker share. A room names its dataset by manifest hash and
 * URL (an http(s) URL, or /datasets/NAME/ on the room's own server, which each page reads from its
 * own origin); volunteers fetch only their training shards, into a cache of a budget they choose.
 * The CLI does the same in apps/cli/src/datasets.ts.
 */
import {
  type Batch,
  BrowserShardCache,
  checkBudget,
  type Dataset,
  DatasetFetchError,
  type DatasetSource,
  defaultShardBudget,
  type LoadedManifest,
  largestTrainShard,
  MemoryShardCache,
  openDataset,
  type ShardCache,
  urlDatasetSource,
  validationSample,
} from '@shoal/data';
import { type DatasetRef, MESH_DATASET_URL, type RunConfig } from '@shoal/protocol';
import { datasetRefOf } from '@shoal/swarm';
import type { DatasetInfo } from './messages.ts';

export const MIB = 1024 * 1024;

/**
 * Validation bytes per evaluation of θ_global in a dataset room: 64 KiB, not `shoal host
 * --eval-bytes`' 1 MiB, because the dashboard evaluates every 5 s (the CLI every 30 s) on one CPU
 * engine in the tab that also coordinates the room; still twice a text room's four batches of the
 * default shape (4 × 16 × 128 bytes).
 */
export const DATASET_EVAL_BYTES = 64 * 1024;

/** A URL the form accepts: http(s)://…, or a path on this server (/datasets/NAME/). */
export function checkDatasetSpec(spec: string): string | undefined {
  const trimmed = spec.trim();
  if (trimmed === '') return 'Give the dataset’s URL (the folder that holds manifest.json).';
  if (/^https?:\/\/\S+$/i.test(trimmed) || /^\/\S*$/.test(trimmed)) return undefined;
  return 'A dataset URL is http(s)://… or a path on this server such as /datasets/NAME/.';
}

/** The room's name for a dataset: as given, a folder (ending in /). */
export function roomDatasetUrl(spec: string): string {
  const trimmed = spec.trim();
  return trimmed.endsWith('/') ? trimmed : `${trimmed}/`;
}

/** Where a page fetches a room's dataset: a path on the room's server resolves against `origin`. */
export function datasetUrlOf(url: string, origin: string): string {
  return url.startsWith('/') ? new URL(url, origin).toString() : url;
}

/** A fetch that failed without a status (offline, or the server does not let this page read it). */
function explain(error: unknown): Error {
  if (error instanceof DatasetFetchError && error.kind === 'network') {
    return new Error(
      `${error.message} (is the URL right, and does its server allow other sites to read it (CORS)? ` +
        '`shoal server --datasets` does)',
    );
  }
  return error as Error;
}

/** Opens the dataset at `url` (absolute); `expectHash`: only the manifest the room names. */
export async function openUrlDataset(
  url: string,
  options: { expectHash?: string; cache?: ShardCache; fallback?: DatasetSource } = {},
): Promise<Dataset> {
  const { fallback, ...open } = options;
  // 'mesh:': the host serves it over the mesh only
  const sources = [...(url === MESH_DATASET_URL ? [] : [urlDatasetSource(url)]), ...(fallback ? [fallback] : [])];
  try {
    return await openDataset(sources, open);
  } catch (error) {
    throw explain(error);
  }
}

/** A room's dataset as a page shows it (`ref`: the room's config names it so). */
export function packedDatasetInfo(ref: DatasetRef, dataset: Dataset): DatasetInfo {
  const { manifest } = dataset.loaded;
  return {
    name: manifest.name,
    bytes: manifest.bytes,
    fingerprint: dataset.hash,
    source: 'url',
    received: manifest.bytes,
    packed: {
      manifest: ref.manifest,
      url: ref.url,
      trainShards: ref.trainShards,
      validationShards: ref.validationShards,
      largestShardBytes: largestTrainShard(dataset.loaded),
    },
  };
}

/**
 * A volunteer's shard budget in bytes: `mib` as chosen, else DEFAULT_BUDGET_SHARDS × the largest
 * training shard; throws checkBudget's error when it cannot hold one shard.
 */
export function shardBudgetOf(loaded: LoadedManifest, mib: number | null): number {
  const budgetBytes = mib === null ? defaultShardBudget(loaded) : Math.round(mib * MIB);
  checkBudget(budgetBytes, loaded);
  return budgetBytes;
}

/** Cache Storage where this page has it (kept across visits), else memory. */
export function shardCacheFor(budgetBytes: number): ShardCache {
  return typeof caches !== 'undefined' ? new BrowserShardCache(budgetBytes) : new MemoryShardCache(budgetBytes);
}

/**
 * A volunteer's copy of the room's dataset: the manifest first (to size the budget from its
 * largest shard), then opened again with the cache and held to the manifest just read.
 */
export async function openVolunteerDataset(
  config: RunConfig,
  origin: string,
  budgetMib: number | null,
  /** Where else to fetch its files when the URL fails: the host over the mesh (meshDatasetSource). */
  fallback?: DatasetSource,
): Promise<{ dataset: Dataset; url: string }> {
  const room = config.data.dataset;
  if (!room) throw new Error(`the room trains on the text ${config.data.corpus}, not a packed dataset`);
  const url = datasetUrlOf(room.url, origin);
  const probe = await openUrlDataset(url, { expectHash: room.manifest, fallback });
  const cache = shardCacheFor(shardBudgetOf(probe.loaded, budgetMib));
  return { dataset: await openUrlDataset(url, { expectHash: probe.hash, cache, fallback }), url };
}

/** The host's validation batches of a dataset room: evenly spaced windows of its held-out shards. */
export async function datasetEvalBatches(dataset: Dataset, config: RunConfig): Promise<Batch[]> {
  const { batchSize, seqLen } = config.train;
  return validationSample(dataset, { batchSize, seqLen, budgetBytes: DATASET_EVAL_BYTES });
}

/**
 * The dataset the host names by `spec` (an http(s) URL, or /datasets/NAME/ on this server), opened
 * from this page (its manifest only): its name and what the room's config says of it. Throws with
 * the reason (404, not a manifest, unreachable or CORS).
 */
export async function openRoomDataset(spec: string, origin: string): Promise<{ name: string; ref: DatasetRef }> {
  const problem = checkDatasetSpec(spec);
  if (problem) throw new Error(problem);
  const url = roomDatasetUrl(spec);
  const dataset = await openUrlDataset(datasetUrlOf(url, origin));
  return { name: dataset.loaded.manifest.name, ref: datasetRefOf(dataset, url) };
}

/** One of the datasets this server serves (`shoal server --datasets`: GET /datasets/). */
export interface ServedDataset {
  name: string;
  url: string;
  manifest: string;
  bytes: number;
  shards: number;
}

/** The datasets this server serves; none when it serves none (404) or answers otherwise. */
export async function listServedDatasets(origin: string, fetchFn: typeof fetch = fetch): Promise<ServedDataset[]> {
  try {
    const response = await fetchFn(new URL('/datasets/', origin).toString());
    if (!response.ok) return [];
    const body = (await response.json()) as { datasets?: unknown };
    if (!Array.isArray(body.datasets)) return [];
    return body.datasets.filter(
      (entry): entry is ServedDataset =>
        typeof entry?.name === 'string' && typeof entry?.url === 'string' && typeof entry?.manifest === 'string',
    );
  } catch {
    return [];
  }
}
