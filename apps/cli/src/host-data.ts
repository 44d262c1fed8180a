/**
 * What `shoal host` trains its room on: a text (Moby Dick, or --data, which volunteers without it
 * receive from the host over the mesh), or a packed dataset (--dataset DIR|URL, which volunteers
 * fetch themselves, each only its own training shards: from the room's URL, else from the host
 * over the mesh, and only from there for a folder the room's server does not serve). Either way:
 * what to serve over the mesh, and the validation batches the host evaluates θ_global on.
 */
import {
  type Batch,
  type Corpus,
  type Dataset,
  type DatasetSource,
  datasetSource,
  loadCorpus,
  validationSample,
} from '@shoal/data';
import { MESH_DATASET_URL, type RunConfig } from '@shoal/protocol';
import type { RoomCheckpoint } from '@shoal/room';
import { evalBatchesFor } from '@shoal/room/services';
import { datasetRefOf } from '@shoal/swarm';
import { asUsage, describeDataset, openBudgetedDataset, roomDatasetUrl } from './datasets.ts';
import { UsageError } from './usage.ts';

export interface HostDataOptions {
  data?: string;
  dataset?: string;
  evalBatches: number;
  evalBytes: number;
}

export interface HostData {
  /** The text served over the mesh (a text room). */
  corpus?: Corpus;
  evalBatches: Batch[];
  /** A dataset room: one line for people. */
  describe?: string;
  /** A dataset room: its dataset and where the host opened it, to serve over the mesh (serveDataset). */
  dataset?: { dataset: Dataset; source: DatasetSource };
  /** A new dataset room whose volunteers fetch shards from this host only: why, for people. */
  note?: string;
}

/** Sets `config.data` for a new room (a resumed one keeps its own) and loads what the host needs. */
export async function hostData(
  options: HostDataOptions,
  config: RunConfig,
  saved: RoomCheckpoint | null,
  serverBase: string,
): Promise<HostData> {
  const room = config.data.dataset;
  if (saved && !room && options.dataset !== undefined) {
    throw new UsageError(`the saved room trains on ${config.data.corpus}, not a packed dataset: leave --dataset out`);
  }
  if (room || options.dataset !== undefined) {
    if (room?.url === MESH_DATASET_URL && options.dataset === undefined) {
      throw new UsageError(
        `the saved room's volunteers fetch ${config.data.corpus} from its host only: pass its folder again with --dataset DIR`,
      );
    }
    // a resumed dataset room finds its shards where the room said, unless told where else
    const spec = options.dataset ?? (room?.url.startsWith('/') ? `${serverBase}${room.url}` : (room?.url as string));
    if (config.pipeline) throw new UsageError('a pipeline-parallel room cannot train on a packed dataset yet');
    const source = datasetSource(spec);
    const dataset = await openBudgetedDataset(source, { expectHash: room?.manifest });
    let note: string | undefined;
    if (!saved) {
      const where = await roomDatasetUrl(spec, dataset, serverBase);
      note = where.note ?? undefined;
      config.data = {
        ...config.data,
        corpus: dataset.loaded.manifest.name,
        dataset: datasetRefOf(dataset, where.url),
      };
    }
    try {
      const { batchSize, seqLen } = config.train;
      const evalBatches = await validationSample(dataset, { batchSize, seqLen, budgetBytes: options.evalBytes });
      return { evalBatches, describe: describeDataset(dataset, spec), dataset: { dataset, source }, note };
    } catch (error) {
      throw asUsage(error);
    }
  }
  let corpus: Corpus;
  try {
    corpus = loadCorpus({ data: options.data, seqLen: config.train.seqLen });
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  const { fingerprint } = config.data;
  if (fingerprint !== undefined && fingerprint !== corpus.fingerprint) {
    throw new UsageError(
      `the run trains on ${config.data.corpus} (fingerprint ${fingerprint}), ${corpus.name} is ${corpus.fingerprint}: pass the same --data`,
    );
  }
  // a run saved before fingerprints keeps its config as it was
  if (!saved) config.data.fingerprint = corpus.fingerprint;
  return { corpus, evalBatches: evalBatchesFor(corpus, config, options.evalBatches) };
}
