// An opened dataset: its manifest, and shards handed out only after their bytes hash to what
// the manifest says. Sources are tried in order (the first is primary, the rest mirrors): a
// shard that fails to arrive, or arrives with the wrong bytes, is fetched from the next one.

import type { ShardCache } from './cache.ts';
import { type LoadedManifest, MANIFEST_FILE, parseManifest, type ShardEntry, sha256Hex } from './manifest.ts';
import { DatasetFetchError, type DatasetSource } from './source.ts';

/** What the data path did: read by the benchmark and by a volunteer's status line. */
export interface DatasetCounters {
  /** Shards fetched from a source and accepted. */
  fetched: number;
  fetchedBytes: number;
  cacheHits: number;
  /** Shards whose bytes did not match the manifest. */
  refused: number;
  /** Reads that failed (HTTP status, timeout, network, missing file). */
  fetchErrors: number;
  /** Time spent hashing fetched shards, ms. */
  hashMs: number;
}

export function newCounters(): DatasetCounters {
  return { fetched: 0, fetchedBytes: 0, cacheHits: 0, refused: 0, fetchErrors: 0, hashMs: 0 };
}

function short(hash: string): string {
  return `${hash.slice(0, 16)}…`;
}

/** A shard whose bytes are not the ones the manifest names. */
export class ShardHashError extends Error {
  override name = 'ShardHashError';
  constructor(
    readonly file: string,
    readonly expected: string,
    readonly got: string,
    where: string,
  ) {
    super(
      `shard ${file} does not match its hash: manifest says ${short(expected)}, its bytes hash to ${short(got)} (from ${where})`,
    );
  }
}

/** The dataset's manifest is not the one the room trains on. */
export class ManifestChangedError extends Error {
  override name = 'ManifestChangedError';
  constructor(
    readonly where: string,
    readonly got: string,
    readonly expected: string,
  ) {
    super(
      `dataset ${where} manifest hash is ${got}, the room trains on ${expected}: ` +
        'the dataset changed (or is another one); restore the packed copy the room was created with',
    );
  }
}

/** Every source failed; `errors` holds each one's reason, `cause` the last. */
export class DatasetSourcesError extends Error {
  override name = 'DatasetSourcesError';
  constructor(
    what: string,
    readonly errors: readonly Error[],
  ) {
    super(
      `${what} could not be read from any of ${errors.length} sources: ${errors.map((e) => e.message).join('; ')}`,
      {
        cause: errors.at(-1),
      },
    );
  }
}

export interface OpenDatasetOptions {
  /** The manifest hash the room trains on; another manifest is refused. */
  expectHash?: string;
  cache?: ShardCache;
  counters?: DatasetCounters;
}

export interface Dataset {
  readonly loaded: LoadedManifest;
  /** SHA-256 of manifest.json: the dataset's name in a room config. */
  readonly hash: string;
  readonly counters: DatasetCounters;
  readonly cache: ShardCache | undefined;
  /** Verified bytes of a shard: an entry, or an index into `loaded.train`. */
  shard(shard: ShardEntry | number): Promise<Uint8Array>;
  /** Reads the manifest again; throws ManifestChangedError if it is no longer the one opened. */
  recheckManifest(): Promise<void>;
}

/** One source's error as is, several wrapped so each source's reason is seen. */
function failure(what: string, errors: Error[]): Error {
  return errors.length === 1 ? (errors[0] as Error) : new DatasetSourcesError(what, errors);
}

export async function openDataset(
  sources: DatasetSource | readonly DatasetSource[],
  { expectHash, cache, counters = newCounters() }: OpenDatasetOptions = {},
): Promise<Dataset> {
  const list = Array.isArray(sources) ? [...sources] : [sources as DatasetSource];
  if (list.length === 0) throw new Error('openDataset needs at least one source');

  async function readManifest(source: DatasetSource): Promise<LoadedManifest> {
    try {
      return await parseManifest(await source.read(MANIFEST_FILE), `${source.where}/${MANIFEST_FILE}`);
    } catch (error) {
      if (error instanceof DatasetFetchError) counters.fetchErrors++;
      throw error;
    }
  }

  const errors: Error[] = [];
  let loaded: LoadedManifest | undefined;
  for (const source of list) {
    try {
      const candidate = await readManifest(source);
      if (expectHash !== undefined && candidate.hash !== expectHash) {
        throw new ManifestChangedError(source.where, candidate.hash, expectHash);
      }
      loaded = candidate;
      break;
    } catch (error) {
      errors.push(error as Error);
    }
  }
  if (!loaded) throw failure(`dataset manifest ${MANIFEST_FILE}`, errors);
  const opened = loaded;

  // One fetch per shard at a time: a prefetch and a draw asking together share it.
  const inFlight = new Map<string, Promise<Uint8Array>>();

  async function fetchShard(entry: ShardEntry): Promise<Uint8Array> {
    const cached = await cache?.get(entry.sha256);
    if (cached) {
      counters.cacheHits++;
      return cached;
    }
    const reasons: Error[] = [];
    for (const source of list) {
      let bytes: Uint8Array;
      try {
        bytes = await source.read(entry.file);
      } catch (error) {
        counters.fetchErrors++;
        reasons.push(error as Error);
        continue;
      }
      const started = performance.now();
      const got = await sha256Hex(bytes);
      counters.hashMs += performance.now() - started;
      if (got !== entry.sha256) {
        counters.refused++;
        reasons.push(new ShardHashError(entry.file, entry.sha256, got, source.where));
        continue;
      }
      counters.fetched++;
      counters.fetchedBytes += bytes.length;
      await cache?.put(entry.sha256, bytes);
      return bytes;
    }
    throw failure(`shard ${entry.file}`, reasons);
  }

  return {
    loaded: opened,
    hash: opened.hash,
    counters,
    cache,
    shard(shard: ShardEntry | number): Promise<Uint8Array> {
      const entry = typeof shard === 'number' ? opened.train[shard] : shard;
      if (!entry) {
        return Promise.reject(new RangeError(`training shard ${shard} does not exist (${opened.train.length} shards)`));
      }
      let pending = inFlight.get(entry.sha256);
      if (!pending) {
        pending = fetchShard(entry).finally(() => inFlight.delete(entry.sha256));
        inFlight.set(entry.sha256, pending);
      }
      return pending;
    },
    async recheckManifest(): Promise<void> {
      const reasons: Error[] = [];
      for (const source of list) {
        let again: LoadedManifest;
        try {
          again = await readManifest(source);
        } catch (error) {
          reasons.push(error as Error);
          continue;
        }
        if (again.hash !== opened.hash) throw new ManifestChangedError(source.where, again.hash, opened.hash);
        return;
      }
      throw failure(`dataset manifest ${MANIFEST_FILE}`, reasons);
    },
  };
}
