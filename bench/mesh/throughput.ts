/**
 * Throughput of one data-channel pair, the same loop for Node and Chromium: every variant
 * (MeshTransport, raw channel; chunk size) sends each message size `repeats` times, interleaved
 * so that a slow spell of this shared machine hits every variant alike, after one untimed 1 MB
 * transfer each. A run counts only if the receiver's SHA-256 and length match the sender's.
 * MB = 10⁶ bytes.
 */
import type { Delivery, SendReport } from './endpoints.ts';

export const KIB = 1024;
export const MB = 1e6;

/** One way of moving a message from one end to the other. */
export interface Variant {
  transport: 'shoal' | 'raw';
  /** Largest data-channel message: Shoal's chunk (header included), or the raw piece. */
  chunkBytes: number;
  /** Raw receivers are told the size first. */
  expect?: (size: number) => Promise<void>;
  send: (size: number, seed: number) => Promise<SendReport>;
  next: () => Promise<Delivery>;
}

export interface ThroughputRow {
  runtime: 'node' | 'chromium';
  transport: 'shoal' | 'raw';
  chunkBytes: number;
  sizeBytes: number;
  /** Median over the repeats. */
  mbPerSecond: number;
  runsMbPerSecond: number[];
  /** Largest bufferedAmount over the repeats (bytes). */
  peakBufferedAmount: number;
}

export async function measureThroughput(
  runtime: ThroughputRow['runtime'],
  variants: Variant[],
  sizes: number[],
  repeats: number,
): Promise<ThroughputRow[]> {
  const rows: ThroughputRow[] = [];
  let seed = 1;
  // one untimed 1 MB transfer per variant first: JIT, allocator and SCTP windows warm up
  for (const variant of variants) await transfer(runtime, variant, MB, seed++);
  for (const size of sizes) {
    const runs = variants.map(() => ({ rates: [] as number[], peak: 0 }));
    for (let r = 0; r < repeats; r++) {
      for (const [v, variant] of variants.entries()) {
        const { sent, got } = await transfer(runtime, variant, size, seed++);
        const run = runs[v] as { rates: number[]; peak: number };
        run.rates.push(size / MB / ((got.endMs - sent.startMs) / 1000));
        run.peak = Math.max(run.peak, sent.peakBufferedAmount);
      }
    }
    for (const [v, variant] of variants.entries()) {
      const run = runs[v] as { rates: number[]; peak: number };
      rows.push({
        runtime,
        transport: variant.transport,
        chunkBytes: variant.chunkBytes,
        sizeBytes: size,
        mbPerSecond: median(run.rates),
        runsMbPerSecond: run.rates,
        peakBufferedAmount: run.peak,
      });
    }
  }
  return rows;
}

/** One message from end to end, checked. */
async function transfer(runtime: string, variant: Variant, size: number, seed: number) {
  await variant.expect?.(size);
  const sent = await variant.send(size, seed);
  const got = await variant.next();
  if (got.bytes !== size || got.sha256 !== sent.sha256) {
    throw new Error(
      `${runtime} ${variant.transport} ${variant.chunkBytes}: sent ${size} bytes ${sent.sha256}, ` +
        `received ${got.bytes} bytes ${got.sha256}`,
    );
  }
  return { sent, got };
}

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

const TRANSPORT_NAMES = { shoal: 'Shoal MeshTransport', raw: 'raw RTCDataChannel' };

/** A table: one line per variant, a column per size, then the peak bufferedAmount. */
export function printThroughput(title: string, rows: ThroughputRow[]): void {
  const sizes = [...new Set(rows.map((row) => row.sizeBytes))];
  const variants = [...new Set(rows.map((row) => `${row.transport}:${row.chunkBytes}`))];
  console.log(`\n${title}`);
  console.log(
    `${'transport'.padEnd(21)}${'chunk'.padStart(8)}${sizes.map((s) => `${s / MB} MB`.padStart(10)).join('')}` +
      `${'peak buffered'.padStart(15)}`,
  );
  for (const key of variants) {
    const own = rows.filter((row) => `${row.transport}:${row.chunkBytes}` === key);
    const first = own[0] as ThroughputRow;
    const cells = sizes.map((s) => {
      const row = own.find((r) => r.sizeBytes === s);
      return (row ? row.mbPerSecond.toFixed(1) : '—').padStart(10);
    });
    const peak = Math.max(...own.map((row) => row.peakBufferedAmount));
    console.log(
      `${TRANSPORT_NAMES[first.transport].padEnd(21)}${`${first.chunkBytes / KIB} KiB`.padStart(8)}${cells.join('')}` +
        `${`${(peak / MB).toFixed(2)} MB`.padStart(15)}`,
    );
  }
}
