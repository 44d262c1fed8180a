import { buildFragments, createCodec } from '@shoal/diloco';
import { buildLayout, presetConfig } from '@shoal/model';
import { MESSAGE_SPECS } from '@shoal/protocol';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { encodedBytes, roundUploadBytes } from './round-bytes.ts';
import { SimNetwork } from './sim/index.ts';
import { dryRunInputs, simulateMethod } from './simulate.ts';

const COLLECTIVE = new Set<number>(
  (['contribution', 'shard-result', 'hash-report'] as const).map((k) => MESSAGE_SPECS[k].id),
);

afterEach(() => {
  vi.restoreAllMocks();
});

describe('encodedBytes', () => {
  it("is the codec's own size", () => {
    expect(encodedBytes(1000, 'fp4', 64)).toBe(createCodec('fp4', { blockSize: 64 }).encodedSize(1000));
    expect(encodedBytes(128, 'fp4', 64)).toBe(2 * (4 + 32));
    expect(encodedBytes(10, 'fp32', 64)).toBe(40);
  });
});

describe('roundUploadBytes', () => {
  it('is about (3M − 2)/M of the encoded fragment', () => {
    const values = 1 << 20;
    for (const workers of [2, 4, 8]) {
      const bytes = roundUploadBytes({ values, workers, codec: 'fp4', blockSize: 64 });
      const ratio = bytes / encodedBytes(values, 'fp4', 64);
      expect(ratio).toBeGreaterThan((3 * workers - 2) / workers);
      expect(ratio).toBeLessThan(((3 * workers - 2) / workers) * 1.01);
    }
    // a signature adds 100 bytes to a contribution and 101 to a shard result or hash report
    const room = { values, workers: 4, codec: 'fp4' as const, blockSize: 64 };
    expect(roundUploadBytes(room) - roundUploadBytes({ ...room, signed: false })).toBe(6 * 100 + 8 * 101 + 101);
    // one participant: its result goes to the host, nobody checks it
    const alone = roundUploadBytes({ values, workers: 1, codec: 'fp4', blockSize: 64 });
    expect(alone / encodedBytes(values, 'fp4', 64)).toBeCloseTo(1, 2);
  });

  it.each([64, 1024])(
    "is what the simulator's transport carries for the collective, within 2% (blocks of %i)",
    async (blockSize) => {
      // Count every byte the workers send, by kind, as the simulator's own network sees it.
      const sent = new Map<number, number>();
      const join = SimNetwork.prototype.join;
      vi.spyOn(SimNetwork.prototype, 'join').mockImplementation(function (this: SimNetwork, peer: string) {
        const transport = join.call(this, peer);
        if (peer !== 'host') {
          this.onSend(peer, (_to, bytes) => {
            const kind = bytes[6] as number;
            sent.set(kind, (sent.get(kind) ?? 0) + bytes.byteLength);
            return 'deliver';
          });
        }
        return transport;
      });
      const opened: { fragment: number; participants: number }[] = [];
      const workers = 4;
      const result = await simulateMethod('streaming-fp4', {
        preset: 'nano',
        workers,
        batch: 4,
        lr: 3e-3,
        innerSteps: 10,
        fragments: 2,
        overlap: 2,
        alpha: 0.5,
        codec: 'fp4',
        codecBlockSize: blockSize,
        tokens: 40 * workers * 4 * 64,
        seed: 1,
        gpuTflops: 10,
        stepMs: 1000,
        linkMbps: 10,
        latencyMs: 50,
        ...dryRunInputs(64),
        onEvent: (event) => {
          if (event.event === 'round-opened') opened.push(event);
        },
      });
      expect(result.abortedRounds).toBe(0);
      expect(opened.length).toBeGreaterThanOrEqual(6);
      const fragments = buildFragments(buildLayout(presetConfig('nano')), 2, 'sequential');
      const predicted = opened.reduce(
        (n, { fragment, participants }) =>
          n +
          roundUploadBytes({
            values: (fragments[fragment] as { size: number }).size,
            workers: participants,
            codec: 'fp4',
            blockSize,
            peerIdChars: 2, // the simulator's "w0"
            signed: false, // and its members have no keys
          }),
        0,
      );
      const carried =
        [...sent].filter(([kind]) => COLLECTIVE.has(kind)).reduce((n, [, bytes]) => n + bytes, 0) / workers;
      expect(carried / predicted).toBeGreaterThan(0.98);
      expect(carried / predicted).toBeLessThan(1.02);
      // and the collective is nearly all a worker sends (the rest: hellos and heartbeats)
      expect(carried / result.bytesPerWorker).toBeGreaterThan(0.85);
    },
    60_000,
  );
});
