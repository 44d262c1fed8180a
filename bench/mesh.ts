/**
 * The mesh benchmark (`npm run bench:mesh`), on loopback:
 *   1. data-channel throughput between two Node peers (@roamhq/wrtc): Shoal's MeshTransport
 *      (16 KiB chunks, the default, and 64 KiB, the protocol's largest) beside a raw
 *      RTCDataChannel with no simple-peer and no chunk headers (16 KiB pieces, and the largest
 *      the channel takes, up to 256 KiB), both paced by bufferedAmount the same way;
 *   2. the same between two pages of the system Chromium (headless), the MeshTransport bundled
 *      by Vite with the web app's settings;
 *   3. one fragment's reduce-scatter + all-gather on 4 Node peers (full mesh), against the
 *      bytes / link-throughput lower bound;
 *   4. the room's text from a host to a worker (corpus-request/corpus-transfer), as a volunteer
 *      of a room with an uploaded text receives it.
 * MB/s is 10⁶ bytes per second, from the sender's first byte to the whole message in the
 * receiver's hands (SHA-256 checked afterwards). Prints a table per part, then one JSON line, and
 * writes the JSON to --out.
 *
 *   npm run bench:mesh -- [--sizes 1,10,50] [--repeats 3] [--skip-browser] [--preset small]
 *     [--peers 4] [--fragments 2] [--fragment 0] [--codec fp4] [--block-size 64] [--rounds 5]
 *     [--out bench/results/mesh-loopback-<cores>core.json]
 * About a minute on 2 cores with the defaults, 1.5 minutes with --repeats 5.
 */
import { writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { parseArgs } from 'node:util';
import { formatJson } from './format-json.ts';
import { browserPairs } from './mesh/browser.ts';
import { type CollectiveResult, measureCollective } from './mesh/collective.ts';
import { measureCorpusTransfer, printCorpus } from './mesh/corpus.ts';
import { nodePairs } from './mesh/node-pairs.ts';
import { KIB, MB, measureThroughput, printThroughput, type ThroughputRow } from './mesh/throughput.ts';

const { values: args } = parseArgs({
  options: {
    sizes: { type: 'string', default: '1,10,50' },
    repeats: { type: 'string', default: '3' },
    'skip-browser': { type: 'boolean', default: false },
    preset: { type: 'string', default: 'small' },
    peers: { type: 'string', default: '4' },
    fragments: { type: 'string', default: '2' },
    fragment: { type: 'string', default: '0' },
    codec: { type: 'string', default: 'fp4' },
    'block-size': { type: 'string', default: '64' },
    rounds: { type: 'string', default: '5' },
    out: { type: 'string', default: `bench/results/mesh-loopback-${cpus().length}core.json` },
  },
});
const sizes = (args.sizes ?? '')
  .split(',')
  .filter(Boolean)
  .map((mb) => Math.round(Number(mb) * MB));
if (sizes.length === 0 || sizes.some((size) => !(size > 0))) throw new Error(`--sizes: MB values, got ${args.sizes}`);
const repeats = Number(args.repeats);
const started = performance.now();
const machine = `${cpus().length} × ${cpus()[0]?.model ?? 'unknown CPU'}, Node ${process.version}`;
console.log(`mesh benchmark on loopback: ${machine}; median of ${repeats} per cell`);

/** Shoal at its default chunk and at the protocol's largest; raw at 16 KiB and the largest piece. */
const SHOAL_CHUNKS = [16 * KIB, 64 * KIB];
const rawChunks = (maxMessageSize: number) => [16 * KIB, Math.min(maxMessageSize, 256 * KIB)];

// --- 1. Node ↔ Node ------------------------------------------------------------------------------
const node = await nodePairs(SHOAL_CHUNKS, rawChunks);
const throughput: ThroughputRow[] = await measureThroughput('node', node.variants, sizes, repeats).finally(node.close);
printThroughput('Node ↔ Node (@roamhq/wrtc), MB/s', throughput);

// --- 2. Chromium page ↔ page ---------------------------------------------------------------------
let chromiumVersion: string | null = null;
if (!args['skip-browser']) {
  const pages = await browserPairs(SHOAL_CHUNKS, rawChunks);
  chromiumVersion = pages.chromium;
  const rows = await measureThroughput('chromium', pages.variants, sizes, repeats).finally(pages.close);
  throughput.push(...rows);
  printThroughput(
    `Chromium page ↔ page (${pages.chromium}; page bundle ${(pages.bundleBytes / 1e3).toFixed(0)} kB), MB/s`,
    rows,
  );
}

// --- 3. the collective ---------------------------------------------------------------------------
const collective = await measureCollective({
  preset: args.preset ?? 'small',
  fragments: Number(args.fragments),
  fragment: Number(args.fragment),
  peers: Number(args.peers),
  codec: args.codec ?? 'fp4',
  blockSize: Number(args['block-size']),
  rounds: Number(args.rounds),
});
// the link: Node MeshTransport at its default chunk, on the largest message (sustained rate)
const link = throughput
  .filter((row) => row.runtime === 'node' && row.transport === 'shoal' && row.chunkBytes === 16 * KIB)
  .sort((a, b) => b.sizeBytes - a.sizeBytes)[0] as ThroughputRow;
const bounds = collectiveBounds(collective, link.mbPerSecond);
printCollective(collective, link, bounds);

// --- 4. the room's text --------------------------------------------------------------------------
const corpus = await measureCorpusTransfer(sizes, repeats);
printCorpus(corpus);

const result = {
  bench: 'mesh',
  machine,
  chromium: chromiumVersion,
  sizes,
  repeats,
  throughput,
  collective: { ...collective, linkMbPerSecond: link.mbPerSecond, ...bounds },
  corpus,
  seconds: (performance.now() - started) / 1000,
};
console.log(JSON.stringify(result));
if (args.out) writeFileSync(args.out, formatJson(result));

function collectiveBounds(c: CollectiveResult, mbPerSecond: number) {
  const lowerBoundMs = (c.bytesPerPeer / MB / mbPerSecond) * 1000;
  return {
    lowerBoundMs,
    ratio: c.medianMs / lowerBoundMs,
    transportOnlyRatio: c.transportOnlyMedianMs / lowerBoundMs,
  };
}

function printCollective(c: CollectiveResult, linkRow: ThroughputRow, b: ReturnType<typeof collectiveBounds>): void {
  const mb = (bytes: number) => `${(bytes / MB).toFixed(2)} MB`;
  const ms = (value: number) => `${value.toFixed(0)} ms`;
  const all = (values: number[]) => values.map(ms).join(', ');
  console.log(
    `\nCollective: ${c.preset} fragment ${c.fragment} of ${c.fragments} (${c.fragmentValues.toLocaleString('en')} values, ` +
      `${c.codec}/${c.blockSize} ${mb(c.encodedBytes)}), ${c.peers} Node peers in one process, full mesh; ` +
      `median of ${c.roundsMs.length} rounds after a warm-up`,
  );
  const lines: [string, string][] = [
    ['encode the fragment (before the collective, per peer)', ms(c.encodeMs)],
    ['wire bytes each peer uploads (contributions + results)', mb(c.bytesPerPeer)],
    ['wire bytes all peers upload', mb(c.bytesTotal)],
    [
      `lower bound: bytes per peer / ${linkRow.mbPerSecond.toFixed(1)} MB/s (Node Shoal pair, ${linkRow.sizeBytes / MB} MB)`,
      ms(b.lowerBoundMs),
    ],
    ['reduce-scatter + all-gather', `${ms(c.medianMs)} = ${b.ratio.toFixed(1)}× the bound (${all(c.roundsMs)})`],
    ['  slowest owner: decode 4 + mean + encode', all(c.ownerMs)],
    ['  all owners, one after another (one JS thread here)', all(c.ownerTotalMs)],
    [
      'the same messages without codec work',
      `${ms(c.transportOnlyMedianMs)} = ${b.transportOnlyRatio.toFixed(1)}× the bound (${all(c.transportOnlyMs)})`,
    ],
  ];
  for (const [what, value] of lines) console.log(`${what.padEnd(74)}${value}`);
}
