/**
 * The room's text over the mesh: a host serves a text (serveCorpus) and a worker fetches it
 * (fetchCorpusFrom: 256 KiB corpus-requests, 4 in flight, the whole checked against its
 * fingerprint), two Node MeshTransports on loopback, as a volunteer of an upload room does.
 */
import { corpusFingerprint, loadMobyDick } from '@shoal/data';
import { createWireCodec } from '@shoal/protocol';
import { fetchCorpusFrom, Member, serveCorpus, wallClock } from '@shoal/swarm';
import { closeAll, connectedMesh } from '../../packages/mesh/src/test-mesh.ts';
import { MB } from './throughput.ts';

export interface CorpusRow {
  sizeBytes: number;
  /** Medians over the repeats. */
  ms: number;
  mbPerSecond: number;
  /** The runs, ms. */
  runsMs: number[];
}

/** A text of `size` bytes: Moby Dick, repeated as needed. */
function textOf(size: number): Uint8Array {
  const moby = loadMobyDick();
  const text = new Uint8Array(size);
  for (let at = 0; at < size; at += moby.length) text.set(moby.subarray(0, Math.min(moby.length, size - at)), at);
  return text;
}

export async function measureCorpusTransfer(
  sizes: number[],
  repeats: number,
  options: { partBytes?: number; window?: number } = {},
): Promise<CorpusRow[]> {
  const nodes = await connectedMesh(2);
  const codec = await createWireCodec();
  const [host, worker] = nodes.map((node) => new Member(node.transport, codec, wallClock, 1)) as [Member, Member];
  const rows: CorpusRow[] = [];
  try {
    for (const size of sizes) {
      const text = textOf(size);
      const fingerprint = corpusFingerprint(text);
      const server = serveCorpus(host, text, { maxCopiesPerPeer: repeats + 1 });
      const runsMs: number[] = [];
      for (let i = 0; i < repeats; i++) {
        const started = performance.now();
        const got = await fetchCorpusFrom(worker, 'a', { fingerprint, ...options });
        runsMs.push(performance.now() - started);
        if (got.length !== size) throw new Error(`received ${got.length} of ${size} bytes`);
      }
      server.stop();
      const ms = [...runsMs].sort((a, b) => a - b)[Math.floor(runsMs.length / 2)] as number;
      rows.push({ sizeBytes: size, ms, mbPerSecond: size / MB / (ms / 1000), runsMs });
    }
  } finally {
    await closeAll(nodes);
  }
  return rows;
}

export function printCorpus(rows: CorpusRow[]): void {
  console.log('\nThe room’s text over the mesh (serveCorpus → fetchCorpusFrom, Node ↔ Node, checked by fingerprint)');
  console.log('| text | time | MB/s |');
  console.log('| ---: | ---: | ---: |');
  for (const row of rows) {
    console.log(`| ${(row.sizeBytes / MB).toFixed(0)} MB | ${row.ms.toFixed(0)} ms | ${row.mbPerSecond.toFixed(1)} |`);
  }
}
