import {
  DatasetFetchError,
  type DatasetManifest,
  type DatasetSource,
  MANIFEST_FILE,
  openDataset,
  ShardHashError,
  sha256Hex,
} from '@shoal/data';
import { createWireCodec, HEADER_OFFSETS, MESSAGE_SPECS } from '@shoal/protocol';
import { SimNetwork, VirtualClock } from '@shoal/sim';
import { describe, expect, it } from 'vitest';
import { meshDatasetSource, serveDataset } from './dataset-share.ts';
import { Member } from './member.ts';

const RUN = 3;
const codec = await createWireCodec();

/** Text-like bytes that are not periodic (a part at the wrong offset would show). */
function textOf(length: number, seed: number): Uint8Array {
  const bytes = new Uint8Array(length);
  let x = seed;
  for (let i = 0; i < length; i++) {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    bytes[i] = 32 + ((x >>> 16) % 95);
  }
  return bytes;
}

/** A packed dataset in memory: three training shards (one shorter than a part) and one validation shard. */
async function datasetFiles(): Promise<Map<string, Uint8Array>> {
  const files = new Map<string, Uint8Array>();
  const shards: DatasetManifest['shards'] = [];
  const sizes = [
    ['train-00000.txt', 100_000],
    ['train-00001.txt', 70_003],
    ['train-00002.txt', 9_000],
    ['validation-00000.txt', 20_000],
  ] as const;
  for (const [i, [file, size]] of sizes.entries()) {
    const bytes = textOf(size, i + 1);
    files.set(file, bytes);
    shards.push({
      file,
      sha256: await sha256Hex(bytes),
      bytes: size,
      split: file.startsWith('train') ? 'train' : 'validation',
    });
  }
  const manifest: DatasetManifest = {
    format: 'shoal-dataset',
    version: 1,
    name: 'mesh-fixture',
    sources: ['fixture'],
    licence: 'CC0-1.0',
    shardBytes: 100_000,
    pieceBytes: 65_536,
    validationFraction: 0.25,
    documents: shards.length,
    bytes: shards.reduce((sum, shard) => sum + shard.bytes, 0),
    shards,
  };
  files.set(MANIFEST_FILE, new TextEncoder().encode(JSON.stringify(manifest)));
  return files;
}

function memorySource(files: Map<string, Uint8Array>): DatasetSource & { reads: Map<string, number> } {
  const reads = new Map<string, number>();
  return {
    where: 'the host’s folder',
    reads,
    async read(file) {
      reads.set(file, (reads.get(file) ?? 0) + 1);
      const bytes = files.get(file);
      if (!bytes) throw new DatasetFetchError(`${file} does not exist`, file, 'status');
      return bytes;
    },
  };
}

/** The room's URL, gone: every file answers 404. */
const missingUrl: DatasetSource = {
  where: 'https://example.org/gone/',
  read: async (file) => {
    throw new DatasetFetchError(`https://example.org/gone/${file} answered HTTP 404 Not Found`, file, 'status');
  },
};

async function room() {
  const clock = new VirtualClock();
  const network = new SimNetwork(clock, { latencyMs: 10, upMbps: 100, downMbps: 100 });
  const host = new Member(network.join('host'), codec, clock, RUN);
  const worker = new Member(network.join('w0'), codec, clock, RUN);
  const files = await datasetFiles();
  const hostSource = memorySource(files);
  const hostDataset = await openDataset(hostSource);
  /**
   * Runs the clock until `work` settles. Hashing is real time the virtual clock does not see, so
   * when the clock is idle this waits a real moment rather than stop.
   */
  const drive = async <T>(work: Promise<T>) => {
    let settled = false;
    const watched = work.finally(() => {
      settled = true;
    });
    watched.catch(() => {}); // the caller sees the rejection; not unhandled while the clock runs
    for (let idle = 0; !settled && idle < 2_000; idle++) {
      await clock.runAsync({ stopWhen: () => settled, until: clock.now() + 600_000 });
      if (!settled) await new Promise((resolve) => setTimeout(resolve, 1));
    }
    return watched;
  };
  return { clock, network, host, worker, files, hostSource, hostDataset, drive };
}

const isTransfer = (bytes: Uint8Array) => bytes[HEADER_OFFSETS.kind] === MESSAGE_SPECS['dataset-transfer'].id;

describe('a dataset over the mesh', () => {
  it('reaches a volunteer whose URL fails: manifest and shards, in parts, verified', async () => {
    const { network, host, worker, files, hostSource, hostDataset, drive } = await room();
    const server = await serveDataset(host, hostDataset, { source: hostSource });
    let parts = 0;
    network.onSend('host', (_to, bytes) => {
      if (isTransfer(bytes)) parts++;
      return 'deliver';
    });
    const mesh = meshDatasetSource(worker, 'host', { manifest: hostDataset.hash, partBytes: 16_384, window: 3 });
    expect(mesh.where).toBe('the host over the mesh');
    const dataset = await drive(openDataset([missingUrl, mesh], { expectHash: hostDataset.hash }));
    expect(dataset.hash).toBe(hostDataset.hash);
    for (const [i, entry] of dataset.loaded.train.entries()) {
      expect(await drive(dataset.shard(i))).toEqual(files.get(entry.file));
    }
    const validation = dataset.loaded.validation[0];
    if (!validation) throw new Error('the fixture has a validation shard');
    expect(await drive(dataset.shard(validation))).toEqual(files.get(validation.file));
    // the URL was tried first each time, and the mesh gave every byte
    expect(dataset.counters).toMatchObject({ fetched: 4, refused: 0, fetchErrors: 5 });
    const manifestBytes = (files.get(MANIFEST_FILE) as Uint8Array).length;
    expect(server.served.get('w0')).toBe(manifestBytes + hostDataset.loaded.manifest.bytes);
    // 100 000, 70 003, 9 000 and 20 000 bytes in 16 KiB parts, and the manifest
    expect(parts).toBe(7 + 5 + 1 + 2 + Math.ceil(manifestBytes / 16_384));
    expect(worker.counters.total()).toBe(0);
    expect(host.counters.total()).toBe(0);
    // the host read each shard once, not once per part (and its manifest to open it, then to serve it)
    expect(Object.fromEntries(hostSource.reads)).toEqual({
      [MANIFEST_FILE]: 2,
      ...Object.fromEntries(hostDataset.loaded.manifest.shards.map((entry) => [entry.file, 1])),
    });
  });

  it('asks again for a lost part', async () => {
    const { network, host, worker, files, hostSource, hostDataset, drive } = await room();
    await serveDataset(host, hostDataset, { source: hostSource });
    let transfers = 0;
    network.onSend('host', (_to, bytes) => (isTransfer(bytes) && transfers++ === 2 ? 'drop' : 'deliver'));
    const mesh = meshDatasetSource(worker, 'host', { manifest: hostDataset.hash, partBytes: 8_192, timeoutMs: 1_000 });
    expect(await drive(mesh.read('train-00001.txt'))).toEqual(files.get('train-00001.txt'));
    expect(transfers).toBe(10); // 9 parts, one of them twice
  });

  it('refuses a shard whose bytes a holder corrupted, and counts it', async () => {
    const { host, worker, files, hostDataset, drive } = await room();
    // a holder that claims the dataset but flips one byte of one shard
    host.on('dataset-request', (from, request) => {
      const bytes = files.get(request.file) as Uint8Array;
      const end = Math.min(request.end, bytes.length);
      const payload = bytes.slice(request.start, end);
      if (request.file === 'train-00001.txt' && request.start === 0) payload[7] = (payload[7] as number) ^ 1;
      void host.send(from, { ...request, kind: 'dataset-transfer', end, total: bytes.length, payload });
    });
    const mesh = meshDatasetSource(worker, 'host', { manifest: hostDataset.hash });
    const dataset = await drive(openDataset([mesh], { expectHash: hostDataset.hash }));
    expect(await drive(dataset.shard(0))).toEqual(files.get('train-00000.txt'));
    await expect(drive(dataset.shard(1))).rejects.toThrow(ShardHashError);
    await expect(drive(dataset.shard(1))).rejects.toThrow(
      /train-00001\.txt does not match its hash.*the host over the mesh/,
    );
    expect(dataset.counters.refused).toBe(2);
    expect(dataset.counters.fetched).toBe(1);
  });

  it('refuses files the manifest does not name, other datasets, and requesters over their quota', async () => {
    const { host, worker, files, hostSource, hostDataset, drive } = await room();
    const manifestBytes = (files.get(MANIFEST_FILE) as Uint8Array).length;
    await serveDataset(host, hostDataset, { source: hostSource, maxBytesPerPeer: manifestBytes + 100_000 + 9_000 });
    const mesh = meshDatasetSource(worker, 'host', { manifest: hostDataset.hash });

    await expect(drive(mesh.read('train-00099.txt'))).rejects.toThrow(
      /train-00099\.txt: the host refused to send it \(dataset-file-unknown/,
    );
    await expect(drive(mesh.read('../manifest.json'))).rejects.toThrow(/not a dataset file name/);
    const other = meshDatasetSource(worker, 'host', { manifest: 'ab'.repeat(32) });
    await expect(drive(other.read(MANIFEST_FILE))).rejects.toThrow(/refused.*dataset-unknown/);
    await expect(drive(other.read(MANIFEST_FILE))).rejects.toBeInstanceOf(DatasetFetchError);
    expect(host.counters.total('dataset-file-unknown')).toBe(1);
    expect(host.counters.total('dataset-unknown')).toBe(2);

    // within the quota: the manifest, a 100 000-byte shard and a 9 000-byte one; then no more
    const dataset = await drive(openDataset([mesh], { expectHash: hostDataset.hash }));
    await drive(dataset.shard(0));
    await drive(dataset.shard(2));
    await expect(drive(dataset.shard(1))).rejects.toThrow(/refused to send it \(quota/);
    expect(host.counters.total('quota')).toBeGreaterThan(0);
    expect(dataset.counters.fetchErrors).toBe(1);
  });

  it('fails with a reason when the holder goes quiet or leaves', async () => {
    const quiet = await room();
    const silent = meshDatasetSource(quiet.worker, 'host', {
      manifest: quiet.hostDataset.hash,
      timeoutMs: 500,
      attempts: 2,
    });
    await expect(quiet.drive(silent.read(MANIFEST_FILE))).rejects.toThrow(
      /manifest\.json: the host did not send bytes 0–262144 after 2 requests/,
    );

    const gone = await room();
    await serveDataset(gone.host, gone.hostDataset, { source: gone.hostSource });
    gone.network.onSend('host', (_to, bytes) => (isTransfer(bytes) ? 'drop' : 'deliver'));
    const mesh = meshDatasetSource(gone.worker, 'host', { manifest: gone.hostDataset.hash });
    const reading = mesh.read('train-00000.txt');
    gone.network.crash('host');
    await expect(gone.drive(reading)).rejects.toThrow(/the host left before sending all of it/);
  });

  it('serves only the manifest the dataset was opened with', async () => {
    const { host, files, hostDataset } = await room();
    const changed = new Map(files);
    changed.set(MANIFEST_FILE, new TextEncoder().encode(`${new TextDecoder().decode(files.get(MANIFEST_FILE))}\n`));
    await expect(serveDataset(host, hostDataset, { source: memorySource(changed) })).rejects.toThrow(
      /hashes to [0-9a-f]{64}, the dataset opened is .*not serving it/,
    );
  });
});
