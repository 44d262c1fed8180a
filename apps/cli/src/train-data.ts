/**
 * `shoal train`'s data: a text (Moby Dick or --data, split 90/10 by BatchSampler) or a packed
 * dataset (--dataset DIR|URL: training shards through a ShardWalker, validation on the held-out
 * shards). Either way one interface: the next batch, the evaluation batches, and what a
 * checkpoint records to resume exactly.
 */
import {
  type Batch,
  BatchSampler,
  datasetSource,
  loadCorpus,
  type SamplerState,
  ShardWalker,
  validationBatches,
  validationSample,
  type WalkerState,
} from '@shoal/data';
import { asUsage, DEFAULT_EVAL_BYTES, defaultShardCacheDir, describeDataset, openBudgetedDataset } from './datasets.ts';
import { UsageError } from './usage.ts';

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
  const dataset = await openBudgetedDataset(source, {
    cacheMib: options.cacheMib,
    cacheDir: options.cacheDir ?? (isUrl ? defaultShardCacheDir() : undefined),
  });
  if (resume?.manifest !== undefined && dataset.hash !== resume.manifest) {
    throw new UsageError(
      `the checkpoint was trained on dataset ${resume.corpus} (manifest ${resume.manifest.slice(0, 12)}), ` +
        `${source.where} has manifest ${dataset.hash.slice(0, 12)}: resume with the dataset the run started on`,
    );
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
  const describe = describeDataset(dataset, source.where);
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
