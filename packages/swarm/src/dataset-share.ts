/**
 * A room's packed dataset over the mesh: the host serves the files of the dataset it opened
 * (manifest.json and the shards its manifest names) in parts (dataset-request → dataset-transfer),
 * and a volunteer reads them through a DatasetSource like any URL: after its room's URL, as the
 * fallback when that fails, or alone in a room whose url is 'mesh:' (a folder no server serves).
 * The bytes are checked where every source's are: openDataset hashes each shard against the
 * manifest, and the manifest against the room's hash, so a holder that lies is refused there.
 */
import {
  type Dataset,
  DatasetFetchError,
  type DatasetSource,
  MANIFEST_FILE,
  type ShardEntry,
  sha256Hex,
} from '@shoal/data';
import {
  type DatasetTransferMessage,
  datasetFileSchema,
  MAX_CORPUS_PART_BYTES,
  type PeerId,
  type RejectedMessage,
} from '@shoal/protocol';
import type { Member } from './member.ts';

/** Bytes per dataset-request: 256 KiB (the mesh splits each answer into data-channel chunks). */
const DATASET_PART_BYTES = 256 * 1024;

/** A requester's default allowance: 16 copies of the dataset, and at least 1 GiB (small datasets, long rooms). */
const DEFAULT_COPIES_PER_PEER = 16;
const MIN_DEFAULT_QUOTA_BYTES = 1024 * 1024 * 1024;

export interface DatasetServerOptions {
  /** Where the host opened the dataset: its manifest.json's bytes are read from here, once. */
  source: DatasetSource;
  /**
   * Bytes one requester may fetch before it is refused. Default: 16 × the dataset's bytes, and
   * at least 1 GiB (a volunteer whose cache is smaller than its shards fetches them again each epoch).
   */
  maxBytesPerPeer?: number;
  /**
   * Bytes of the shards served last kept at hand, so the parts of one shard do not each read and
   * hash it again (the dataset's own cache may be small, or absent). Default: 4 × the largest shard.
   */
  holdBytes?: number;
}

export interface DatasetServer {
  /** Bytes sent to each requester. */
  readonly served: ReadonlyMap<PeerId, number>;
  stop(): void;
}

/**
 * Answers dataset-requests for `dataset`'s manifest and the shards it names (any member may ask: the
 * dataset is the room's). Shard bytes come from `dataset.shard`, so only verified bytes leave
 * this host. Throws when `source`'s manifest is not the one the dataset was opened with.
 */
export async function serveDataset(
  member: Member,
  dataset: Dataset,
  options: DatasetServerOptions,
): Promise<DatasetServer> {
  const manifestBytes = await options.source.read(MANIFEST_FILE);
  const hash = await sha256Hex(manifestBytes);
  if (hash !== dataset.hash) {
    throw new Error(
      `${options.source.where}/${MANIFEST_FILE} hashes to ${hash}, the dataset opened is ${dataset.hash}: not serving it`,
    );
  }
  const shards = new Map<string, ShardEntry>(dataset.loaded.manifest.shards.map((entry) => [entry.file, entry]));
  const quota =
    options.maxBytesPerPeer ??
    Math.max(DEFAULT_COPIES_PER_PEER * (dataset.loaded.manifest.bytes + manifestBytes.length), MIN_DEFAULT_QUOTA_BYTES);
  const served = new Map<PeerId, number>();
  const holdBytes =
    options.holdBytes ?? 4 * dataset.loaded.manifest.shards.reduce((max, entry) => Math.max(max, entry.bytes), 0);
  // the shards served last, least recently used first, as their (verified) reads
  const held = new Map<string, { entry: ShardEntry; bytes: Promise<Uint8Array> }>();
  let heldBytes = 0;
  const release = (file: string) => {
    const kept = held.get(file);
    if (!kept) return;
    held.delete(file);
    heldBytes -= kept.entry.bytes;
  };
  const shardBytes = (entry: ShardEntry): Promise<Uint8Array> => {
    let kept = held.get(entry.file);
    if (kept) held.delete(entry.file);
    else {
      kept = { entry, bytes: dataset.shard(entry) };
      heldBytes += entry.bytes;
      const reading = kept;
      reading.bytes.catch(() => held.get(entry.file) === reading && release(entry.file));
    }
    held.set(entry.file, kept);
    for (const file of held.keys()) {
      if (heldBytes <= holdBytes || file === entry.file) break;
      release(file);
    }
    // real time (reading, hashing) that the simulator's clock waits for
    return member.clock.track(kept.bytes);
  };

  const stop = member.on('dataset-request', (from, request) => {
    const refuse = (reason: string, detail: string) => member.rejectBack(from, 'dataset-request', reason, detail);
    if (request.manifest !== dataset.hash) {
      refuse('dataset-unknown', `this member serves dataset ${dataset.hash} only`);
      return;
    }
    const entry = shards.get(request.file);
    if (request.file !== MANIFEST_FILE && !entry) {
      refuse('dataset-file-unknown', `${request.file} is not a file of dataset ${dataset.hash.slice(0, 12)}`);
      return;
    }
    const total = entry ? entry.bytes : manifestBytes.length;
    if (request.start >= total) {
      refuse('range', `${request.file} has ${total} bytes; asked from byte ${request.start}`);
      return;
    }
    // the first part of a file is asked for before its length is known: answer what there is
    const end = Math.min(request.end, total);
    const sent = served.get(from) ?? 0;
    if (sent + end - request.start > quota) {
      refuse('quota', `already sent ${sent} bytes of dataset ${dataset.hash.slice(0, 12)} (quota ${quota})`);
      return;
    }
    served.set(from, sent + end - request.start);
    const answer = (bytes: Uint8Array) =>
      member.send(from, {
        kind: 'dataset-transfer',
        manifest: dataset.hash,
        file: request.file,
        start: request.start,
        end,
        total,
        payload: bytes.subarray(request.start, end),
      });
    if (!entry) {
      void answer(manifestBytes);
      return;
    }
    // a shard's verified bytes: held from its last request, else from the dataset (its cache, or
    // read and hashed again)
    void shardBytes(entry).then(answer, (error: Error) => {
      served.set(from, (served.get(from) ?? 0) - (end - request.start));
      refuse('dataset-unavailable', `${request.file}: ${error.message}`.slice(0, 1000));
    });
  });
  return { served, stop };
}

export interface MeshDatasetSourceOptions {
  /** The room's manifest hash (`data.dataset.manifest`): what is asked for. */
  manifest: string;
  /** Default DATASET_PART_BYTES. */
  partBytes?: number;
  /** Requests in flight at once, per file. Default 4. */
  window?: number;
  /** A part not answered within this long is asked for again. Default 20 s. */
  timeoutMs?: number;
  /** Asks per part before giving up. Default 3. */
  attempts?: number;
}

/** One file being fetched: its parts in flight, and where its bytes go once the length is known. */
interface FileFetch {
  bytes: Uint8Array | null;
  total: number;
  received: number;
  next: number;
  pending: Map<number, { end: number; cancel: () => void }>;
  finish(error?: Error): void;
}

/**
 * The dataset files `holder` serves (serveDataset), as a source for openDataset: read(file) asks
 * for the file in parts, a few in flight, and resolves its bytes. A refusal, a holder that leaves
 * or stops answering is a DatasetFetchError, so openDataset counts it and tries its next source.
 * Reads of one file at the same time share one fetch. A `rejected` from the holder does not say
 * which file it is about: it fails every read in flight.
 */
export function meshDatasetSource(member: Member, holder: PeerId, options: MeshDatasetSourceOptions): DatasetSource {
  const partBytes = Math.max(1, Math.min(options.partBytes ?? DATASET_PART_BYTES, MAX_CORPUS_PART_BYTES));
  const window = Math.max(1, options.window ?? 4);
  const timeoutMs = options.timeoutMs ?? 20_000;
  const attempts = options.attempts ?? 3;
  const where = 'the host over the mesh';
  const fetches = new Map<string, FileFetch>();
  const reads = new Map<string, Promise<Uint8Array>>();
  let offs: (() => void)[] = [];

  const failAll = (error: (file: string) => DatasetFetchError) => {
    for (const [file, fetch] of fetches) fetch.finish(error(file));
  };
  const listen = () => {
    if (offs.length > 0) return;
    offs = [
      member.on('dataset-transfer', accept),
      member.on('rejected', (from: PeerId, message: RejectedMessage) => {
        if (from !== holder || message.about !== 'dataset-request') return;
        failAll(
          (file) =>
            new DatasetFetchError(
              `${file}: the host refused to send it (${message.reason}: ${message.message})`,
              file,
              'status',
            ),
        );
      }),
      member.transport.on('peer-down', (peer) => {
        if (peer !== holder) return;
        failAll((file) => new DatasetFetchError(`${file}: the host left before sending all of it`, file, 'network'));
      }),
    ];
  };
  const unlisten = () => {
    if (fetches.size > 0) return;
    for (const off of offs) off();
    offs = [];
  };

  const ask = (file: string, fetch: FileFetch, start: number, end: number, tries: number) => {
    const cancel = member.clock.setTimer(timeoutMs, () => {
      if (!fetch.pending.has(start)) return;
      if (tries >= attempts) {
        fetch.finish(
          new DatasetFetchError(
            `${file}: the host did not send bytes ${start}–${end} after ${attempts} requests`,
            file,
            'timeout',
          ),
        );
        return;
      }
      ask(file, fetch, start, end, tries + 1);
    });
    fetch.pending.set(start, { end, cancel });
    void member.send(holder, { kind: 'dataset-request', manifest: options.manifest, file, start, end });
  };
  const fill = (file: string, fetch: FileFetch) => {
    while (fetch.bytes && fetch.pending.size < window && fetch.next < fetch.total) {
      const start = fetch.next;
      fetch.next = Math.min(fetch.total, start + partBytes);
      ask(file, fetch, start, fetch.next, 1);
    }
    if (fetch.bytes && fetch.pending.size === 0 && fetch.received === fetch.total) fetch.finish();
  };

  function accept(from: PeerId, message: DatasetTransferMessage): void {
    const fetch = from === holder && message.manifest === options.manifest ? fetches.get(message.file) : undefined;
    const part = fetch?.pending.get(message.start);
    // the first part may end early (a file shorter than a part); every other one as asked
    const first = fetch !== undefined && fetch.bytes === null;
    const fits = part !== undefined && (first ? message.end <= part.end : message.end === part.end);
    if (!fetch || !part || !fits || (!first && message.total !== fetch.total)) {
      member.refuse(
        from,
        'dataset-transfer',
        'not-requested',
        `${message.file} bytes ${message.start}–${message.end} were not asked for`,
      );
      return;
    }
    if (message.payload.length !== message.end - message.start) {
      member.refuse(
        from,
        'dataset-transfer',
        'length',
        `${message.payload.length} bytes for a ${message.end - message.start}-byte range`,
      );
      return;
    }
    part.cancel();
    fetch.pending.delete(message.start);
    if (first) {
      fetch.bytes = new Uint8Array(message.total);
      fetch.total = message.total;
      fetch.next = message.end;
    }
    (fetch.bytes as Uint8Array).set(message.payload, message.start);
    fetch.received += message.payload.length;
    fill(message.file, fetch);
  }

  const fetchFile = (file: string): Promise<Uint8Array> =>
    new Promise<Uint8Array>((resolve, reject) => {
      const fetch: FileFetch = {
        bytes: null,
        total: 0,
        received: 0,
        next: 0,
        pending: new Map(),
        finish(error?: Error) {
          if (fetches.get(file) !== fetch) return;
          for (const part of fetch.pending.values()) part.cancel();
          fetch.pending.clear();
          fetches.delete(file);
          unlisten();
          if (error) reject(error);
          else resolve(fetch.bytes as Uint8Array);
        },
      };
      fetches.set(file, fetch);
      listen();
      // the first part tells the length; the rest follow, `window` at a time
      ask(file, fetch, 0, partBytes, 1);
    });

  return {
    where,
    read(file: string): Promise<Uint8Array> {
      if (!datasetFileSchema.safeParse(file).success) {
        return Promise.reject(new DatasetFetchError(`${file} is not a dataset file name`, file, 'status'));
      }
      let reading = reads.get(file);
      if (!reading) {
        reading = fetchFile(file).finally(() => reads.delete(file));
        reads.set(file, reading);
      }
      return reading;
    },
  };
}
