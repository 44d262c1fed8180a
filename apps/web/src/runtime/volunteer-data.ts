/**
 * The room's training data as a volunteer holds it, inside the room worker: the text (Moby Dick
 * from the server, or the host's own over the mesh) or, in a dataset room, the packed dataset's
 * training shards from its URL; and what the volunteer's stats say of it (the dataset, the shard
 * drawn from, the shard cache, the bytes held).
 */
import { type Corpus, corpusFromBytes, type Dataset } from '@shoal/data';
import { corpusLengthOf, type DatasetRef, type RunConfig } from '@shoal/protocol';
import { fetchCorpusFrom, type Member, meshDatasetSource, type ShardStart } from '@shoal/swarm';
import { checkCorpus, datasetOf, fetchMobyDick, MOBY_DICK } from './dataset.ts';
import type { DatasetInfo, VolunteerInit, VolunteerShards } from './messages.ts';
import { openVolunteerDataset, packedDatasetInfo } from './packed-dataset.ts';

export interface VolunteerData {
  /** The room's text: Moby Dick from the server, or the host's own text over the mesh. */
  loadCorpus(config: RunConfig): Promise<Corpus>;
  /** The room's packed dataset: this volunteer's training shards, from its URL, in a cache of its budget. */
  openDataset(config: RunConfig): Promise<Dataset>;
  /** A dataset room: the volunteer started drawing from a shard. */
  onShard(start: ShardStart): void;
  /** The room's text or dataset once the run named it (a copy), else null. */
  info(): DatasetInfo | null;
  /** A dataset room: the shard drawn from, the cache and its counters; else null. */
  shards(): VolunteerShards | null;
  /** Bytes of the room's data this volunteer holds: the shards it holds, or the whole text. */
  heldBytes(): number;
}

/** The data of the room `init` joins, fetched from the server, the dataset's URL or over `member`'s mesh. */
export function volunteerData(init: VolunteerInit, member: Member): VolunteerData {
  let dataset: DatasetInfo | null = null;
  // a dataset room: the opened dataset (its counters and cache) and the shard drawn from
  let packed: Dataset | null = null;
  let shardStart: { epoch: number; shard: number; from: number; heldBytes: number } | null = null;
  return {
    async loadCorpus(config) {
      const { corpus: name, fingerprint } = config.data;
      if (name === MOBY_DICK) {
        const corpus = await fetchMobyDick(init.corpusUrl, config);
        dataset = datasetOf(corpus, 'server');
        return corpus;
      }
      if (fingerprint === undefined) throw new Error(`the room trains on ${name}, and its host does not share it`);
      const info: DatasetInfo = { name, bytes: corpusLengthOf(fingerprint), fingerprint, source: 'host', received: 0 };
      dataset = info;
      const bytes = await fetchCorpusFrom(member, init.coordinator, {
        fingerprint,
        name,
        onProgress: (received) => {
          info.received = received;
        },
      });
      return checkCorpus(corpusFromBytes(bytes, { name, seqLen: config.train.seqLen }), config);
    },
    async openDataset(config) {
      const manifest = (config.data.dataset as DatasetRef).manifest;
      const host = meshDatasetSource(member, init.coordinator, { manifest });
      const opened = await openVolunteerDataset(config, init.origin, init.shardBudgetMib, host);
      dataset = packedDatasetInfo(config.data.dataset as DatasetRef, opened.dataset);
      packed = opened.dataset;
      return opened.dataset;
    },
    onShard({ epoch, shard, from, heldBytes }) {
      shardStart = { epoch, shard, from, heldBytes };
    },
    info: () => dataset && { ...dataset },
    shards() {
      if (!packed) return null;
      const { counters, cache } = packed;
      return {
        current: shardStart && { epoch: shardStart.epoch, shard: shardStart.shard, from: shardStart.from },
        heldBytes: shardStart?.heldBytes ?? 0,
        budgetBytes: cache?.budgetBytes ?? 0,
        fetched: counters.fetched,
        refused: counters.refused,
        cacheHits: counters.cacheHits,
      };
    },
    heldBytes: () => shardStart?.heldBytes ?? (dataset?.source === 'url' ? 0 : (dataset?.bytes ?? 0)),
  };
}
