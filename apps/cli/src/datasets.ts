/**
 * Packed datasets on the command line: what `shoal train`, `shoal host` and `shoal worker` share
 * (the shard cache and its budget, the options that set them, the start-up line), and how a host
 * names its dataset in the room (a URL volunteers can fetch from).
 */
import { homedir } from 'node:os';
import { join } from 'node:path';
import {
  checkBudget,
  type Dataset,
  type DatasetSource,
  DirShardCache,
  defaultShardBudget,
  MemoryShardCache,
  openDataset,
  type ShardCache,
} from '@shoal/data';
import { MESH_DATASET_URL } from '@shoal/protocol';
import { InvalidArgumentError, Option } from 'commander';
import { parseBytes } from './simulate.ts';
import { UsageError } from './usage.ts';

export const MIB = 1024 * 1024;

/** Validation bytes per evaluation of a dataset (--eval-bytes' default): 1 MiB. */
export const DEFAULT_EVAL_BYTES = MIB;

export const mib = (bytes: number) => {
  const value = bytes / MIB;
  return Number.isInteger(value) ? `${value}` : value.toFixed(value < 1 ? 2 : 1);
};

/** Where fetched shards are kept between runs: $XDG_CACHE_HOME/shoal/shards, else ~/.cache/shoal/shards. */
export function defaultShardCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  const cacheHome = env.XDG_CACHE_HOME?.trim() || join(homedir(), '.cache');
  return join(cacheHome, 'shoal', 'shards');
}

export interface ShardCacheOptions {
  /** Shard budget in MiB (memory, and disk for a disk cache); default 4 × the largest shard. */
  cacheMib?: number;
  /** A folder for the shards; none: in memory only. */
  cacheDir?: string;
}

/** --cache-mib, one definition for every command that fetches shards. */
export function cacheMibOption(): Option {
  return new Option(
    '--cache-mib <n>',
    "MiB of dataset shards held at once, in memory and in --cache-dir (default: 4 × the dataset's largest shard)",
  ).argParser((value) => {
    const n = Number(value);
    if (!(n > 0)) throw new InvalidArgumentError('expected a positive number of MiB');
    return n;
  });
}

/** --eval-bytes: validation bytes per evaluation of a dataset's held-out shards. */
export function evalBytesOption(): Option {
  return new Option('--eval-bytes <n>', "a dataset's validation tokens per evaluation (bytes, or 512KiB, 4MB, …)")
    .argParser((value) => {
      try {
        return parseBytes(value);
      } catch (error) {
        throw new InvalidArgumentError((error as Error).message);
      }
    })
    .default(DEFAULT_EVAL_BYTES);
}

/** Any failure to read or check a dataset: one line, exit 1, never a stack trace. */
export function asUsage(error: unknown): UsageError {
  return error instanceof UsageError ? error : new UsageError((error as Error).message);
}

/**
 * Opens a dataset from `sources` with a shard cache of the budget asked for (checked against its
 * largest training shard) and, given `expectHash`, only the manifest a room names.
 */
export async function openBudgetedDataset(
  sources: DatasetSource | readonly DatasetSource[],
  options: ShardCacheOptions & { expectHash?: string },
): Promise<Dataset> {
  try {
    // The manifest first, to size the default budget from its largest shard.
    const probe = await openDataset(sources, { expectHash: options.expectHash });
    const budgetBytes =
      options.cacheMib !== undefined ? Math.round(options.cacheMib * MIB) : defaultShardBudget(probe.loaded);
    checkBudget(budgetBytes, probe.loaded);
    const cache: ShardCache =
      options.cacheDir !== undefined
        ? new DirShardCache(options.cacheDir, budgetBytes)
        : new MemoryShardCache(budgetBytes);
    // Opened again with the cache, and held to the manifest just read.
    return await openDataset(sources, { expectHash: probe.hash, cache });
  } catch (error) {
    throw asUsage(error);
  }
}

/** One line for people: the dataset, its size, its manifest, where it comes from, the cache. */
export function describeDataset(dataset: Dataset, where: string): string {
  const { manifest, train, validation } = dataset.loaded;
  const cacheDir = dataset.cache instanceof DirShardCache ? dataset.cache.dir : null;
  const budget = dataset.cache?.budgetBytes ?? 0;
  return (
    `dataset ${manifest.name}: ${train.length} train + ${validation.length} validation shards, ` +
    `${mib(manifest.bytes)} MiB, manifest ${dataset.hash.slice(0, 12)}, from ${where}; ` +
    `cache ${mib(budget)} MiB ${cacheDir ? `in ${cacheDir}` : 'in memory'}`
  );
}

/** Where volunteers fetch a room's dataset, and a line for people when that is the host itself. */
export interface RoomDatasetUrl {
  /** An http(s) URL, a path on the room's server, or MESH_DATASET_URL ('mesh:'). */
  url: string;
  /** Why the host serves the shards itself, and how to do better; null otherwise. */
  note: string | null;
}

/**
 * Where volunteers fetch a dataset the host names by `spec`: an http(s) URL as given (a folder,
 * so it ends in /); a folder on this machine at the room's server when it serves it
 * (`shoal server --datasets`, found there by its manifest hash), else 'mesh:': only from this
 * host over the mesh (every volunteer falls back on the host anyway when its URL fails).
 */
export async function roomDatasetUrl(spec: string, dataset: Dataset, serverBase: string): Promise<RoomDatasetUrl> {
  if (/^https?:\/\//i.test(spec)) return { url: spec.endsWith('/') ? spec : `${spec}/`, note: null };
  let why: string;
  try {
    const response = await fetch(`${serverBase}/datasets/`);
    if (!response.ok) throw new Error(`HTTP ${response.status}`);
    const listing = (await response.json()) as { datasets?: { url?: unknown; manifest?: unknown }[] };
    const served = listing.datasets?.find((entry) => entry.manifest === dataset.hash && typeof entry.url === 'string');
    if (served) return { url: served.url as string, note: null };
    why = `${serverBase} does not serve it`;
  } catch (error) {
    why = `${serverBase}/datasets/: ${(error as Error).message}`;
  }
  return {
    url: MESH_DATASET_URL,
    note:
      `--dataset ${spec}: ${why}, so volunteers fetch shards from this host over the mesh; ` +
      'serve the folder with shoal server --datasets for more throughput',
  };
}
