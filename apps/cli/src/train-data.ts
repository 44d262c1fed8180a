/**
 * `shoal train`'s data: a text (Moby Dick or --data, split 90/10 by BatchSampler) or a packed
 * dataset (--dataset DIR|URL: training shards through a ShardWalker, validation on the held-out
 * shards). Either way one interface: the next batch, the evaluation batches, and what a
 * checkpoint records to resume exactly.
 */
import { homedir } from 'node:os';
import { join } from 'node:path';
import {
  type Batch,
  BatchSampler,
  checkBudget,
  type Dataset,
  DirShardCache,
  datasetSource,
  largestTrainShard,
  loadCorpus,
  MemoryShardCache,
  openDataset,
  type SamplerState,
  type ShardCache,
  ShardWalker,
  validationBatches,
  validationSample,
  type WalkerState,
} from '@shoal/data';
import { UsageError } from './usage.ts';

const MIB = 1024 * 1024;
const mib = (bytes: number) => {
  const value = bytes / MIB;
  return Number.isInteger(value) ? `${value}` : value.toFixed(value < 1 ? 2 : 1);
};

/** Validation bytes per evaluation of a dataset run (--eval-bytes' default): 1 MiB. */
export const DEFAULT_EVAL_BYTES = MIB;

export interface TrainDataOptions {
  data?: string;
  dataset?: string;
  /** Shard budget in MiB (memory, and disk for a disk cache); default 4 × the largest shard. */
  cacheMib?: number;
  cacheDir?: string;
  /** Validation tokens per evaluation of a dataset run. */
  evalBytes?: number;
  /** Validation batches per evaluation of a text run. */
  evalBatches: number;
}

/** What the saved run records about its data (beside step, tokens, train config); a type, so it is a RunState. */
export type SavedData = {
  /** The text's fingerprint, or `name@manifest-hash` for a dataset. */
  corpus: string;
  /** A text run's sampler. */
  sampler?: SamplerState;
  /** A dataset run's walker and the SHA-256 of its manifest.json. */
  walker?: WalkerState;
  manifest?: string;
};

export interface TrainData {
  next(): Promise<Batch>;
  evalSet: Batch[];
  saved(): SavedData;
  /** The line printed at the start (null for a text run). */
  describe: string | null;
  /** Keys for the final --json line (empty for a text run). */
  summary(): Record<string, unknown>;
}

interface Shape {
  batchSize: number;
  seqLen: number;
  seed: number;
}

/** The data of a run; `resume` is the checkpoint's record, whose corpus or manifest must match. */
export async function openTrainData(
  options: TrainDataOptions,
  shape: Shape,
  resume: SavedData | undefined,
): Promise<TrainData> {
  if (options.dataset !== undefined) return openDatasetData(options.dataset, options, shape, resume);
  if (resume?.manifest !== undefined) {
    throw new UsageError(
      `the checkpoint was trained on dataset ${resume.corpus}: pass the same --dataset to resume it`,
    );
  }
  let corpus: ReturnType<typeof loadCorpus>;
  try {
    corpus = loadCorpus({ data: options.data, seqLen: shape.seqLen });
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  if (resume && resume.corpus !== corpus.fingerprint) {
    throw new UsageError(
      `the checkpoint was trained on corpus ${resume.corpus}, this is ${corpus.fingerprint}: pass the same --data`,
    );
  }
  const sampler = new BatchSampler(corpus.train, shape);
  if (resume?.sampler) sampler.setState(resume.sampler);
  return {
    next: async () => sampler.next(),
    evalSet: validationBatches(corpus.validation, { ...shape, count: options.evalBatches }),
    saved: () => ({ corpus: corpus.fingerprint, sampler: sampler.getState() }),
    describe: null,
    summary: () => ({}),
  };
}

/**
 * Where a URL dataset's shards are kept between runs: $XDG_CACHE_HOME/shoal/shards, else
 * ~/.cache/shoal/shards (fetched bytes that can be fetched again: a cache, not state).
 */
export function defaultShardCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  const cacheHome = env.XDG_CACHE_HOME?.trim() || join(homedir(), '.cache');
  return join(cacheHome, 'shoal', 'shards');
}

/** Any failure to read, check or sample the dataset: one line, exit 1, never a stack trace. */
function asUsage(error: unknown): UsageError {
  return error instanceof UsageError ? error : new UsageError((error as Error).message);
}

async function openDatasetData(
  spec: string,
  options: TrainDataOptions,
  shape: Shape,
  resume: SavedData | undefined,
): Promise<TrainData> {
  if (resume && resume.manifest === undefined) {
    throw new UsageError(
      `the checkpoint was trained on corpus ${resume.corpus}, not a packed dataset: resume it with the same --data`,
    );
  }
  const source = datasetSource(spec);
  const isUrl = /^https?:\/\//i.test(spec);
  let dataset: Dataset;
  try {
    // The manifest first, to size the default budget from its largest shard.
    const probe = await openDataset(source);
    if (resume?.manifest !== undefined && probe.hash !== resume.manifest) {
      throw new UsageError(
        `the checkpoint was trained on dataset ${resume.corpus} (manifest ${resume.manifest.slice(0, 12)}), ` +
          `${source.where} has manifest ${probe.hash.slice(0, 12)}: resume with the dataset the run started on`,
      );
    }
    const budgetBytes =
      options.cacheMib !== undefined ? Math.round(options.cacheMib * MIB) : 4 * largestTrainShard(probe.loaded);
    checkBudget(budgetBytes, probe.loaded);
    const cacheDir = options.cacheDir ?? (isUrl ? defaultShardCacheDir() : undefined);
    const cache: ShardCache =
      cacheDir !== undefined ? new DirShardCache(cacheDir, budgetBytes) : new MemoryShardCache(budgetBytes);
    // Opened again with the cache, and held to the manifest just read.
    dataset = await openDataset(source, { expectHash: probe.hash, cache });
  } catch (error) {
    throw asUsage(error);
  }
  const { manifest, train, validation } = dataset.loaded;
  let walker: ShardWalker;
  let evalSet: Batch[];
  try {
    walker = new ShardWalker(dataset, {
      batchSize: shape.batchSize,
      seqLen: shape.seqLen,
      seed: shape.seed,
      member: 'local',
      members: ['local'],
      state: resume?.walker,
    });
    evalSet = await validationSample(dataset, {
      batchSize: shape.batchSize,
      seqLen: shape.seqLen,
      budgetBytes: options.evalBytes ?? DEFAULT_EVAL_BYTES,
    });
  } catch (error) {
    throw asUsage(error);
  }
  const cacheDir = dataset.cache instanceof DirShardCache ? dataset.cache.dir : null;
  const budget = dataset.cache?.budgetBytes ?? 0;
  const describe =
    `dataset ${manifest.name}: ${train.length} train + ${validation.length} validation shards, ` +
    `${mib(manifest.bytes)} MiB, manifest ${dataset.hash.slice(0, 12)}, from ${source.where}; ` +
    `cache ${mib(budget)} MiB ${cacheDir ? `in ${cacheDir}` : 'in memory'}`;
  return {
    async next() {
      try {
        return await walker.next();
      } catch (error) {
        // A shard that fails its hash (or cannot be fetched) is never trained on: the run stops.
        throw asUsage(error);
      }
    },
    evalSet,
    saved: () => ({ corpus: `${manifest.name}@${dataset.hash}`, walker: walker.state(), manifest: dataset.hash }),
    describe,
    summary() {
      const { waitsMs, prefetched, maxHeldBytes } = walker.stats;
      const { fetched, refused, cacheHits } = dataset.counters;
      return {
        dataset: {
          name: manifest.name,
          manifest: dataset.hash,
          trainShards: train.length,
          validationShards: validation.length,
        },
        walker: { waitsMs: Math.round(waitsMs), prefetched, maxHeldBytes },
        shards: { fetched, refused, cacheHits },
      };
    },
  };
}
