import { buildFragments, createCodec, type FragmentTensor, lowRankPayloadSize } from '@shoal/diloco';
import { buildLayout, presetConfig } from '@shoal/model';
import { MESSAGE_SPECS } from '@shoal/protocol';
import { dryRunInputs, SimNetwork, simulateMethod } from '@shoal/sim';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { encodedBytes, roundUploadBytes } from './round-bytes.ts';

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

  it('of a low-rank round is the dense formula over its payload, and the mean of the two sides', () => {
    const [fragment] = buildFragments(buildLayout(presetConfig('small')), 2, 'sequential');
    const { size: values, tensors } = fragment as { size: number; tensors: FragmentTensor[] };
    const room = { values, workers: 4, codec: 'fp4' as const, blockSize: 1024 };
    const side = (s: 'right' | 'left') => roundUploadBytes({ ...room, lowRank: { tensors, rank: 8, side: s } });
    expect(side('right')).toBe(
      roundUploadBytes({ ...room, values: lowRankPayloadSize(tensors, { rank: 8, side: 'right' }) }),
    );
    expect(roundUploadBytes({ ...room, lowRank: { tensors, rank: 8 } })).toBe((side('right') + side('left')) / 2);
    // small's fragment 0 at rank 8: about 94k values against 5.5M
    expect(roundUploadBytes(room) / side('right')).toBeGreaterThan(50);
    expect(() => roundUploadBytes({ ...room, values: values - 1, lowRank: { tensors, rank: 8 } })).toThrow(RangeError);
  });

  it.each([
    { blockSize: 64, rank: null },
    { blockSize: 1024, rank: null },
    { blockSize: 64, rank: 4 },
  ])(
    "is what the simulator's transport carries for the collective, within 2% (blocks of $blockSize, rank $rank)",
    async ({ blockSize, rank }) => {
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
      const opened: { fragment: number; round: number; participants: number; rank: number | null }[] = [];
      const workers = 4;
      // a dry run trains nothing, so the adaptive rank has nothing to adapt to: a fixed rank (target 0)
      const result = await simulateMethod(rank === null ? 'streaming-fp4' : 'streaming-lowrank', {
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
        ...(rank === null ? {} : { lowRank: { rank, target: 0 } }),
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
      // a low-rank room's rounds are at the fixed rank, but for each fragment's first (dense: its
      // momentum, where the bases come from, is still zero)
      const lowRankRounds = opened.filter((round) => round.rank !== null);
      expect(lowRankRounds.every((round) => round.rank === rank)).toBe(true);
      expect(lowRankRounds.length).toBeGreaterThanOrEqual(rank === null ? 0 : opened.length - 2);
      const fragments = buildFragments(buildLayout(presetConfig('nano')), 2, 'sequential');
      const predicted = opened.reduce((n, { fragment, round, participants, rank: roundRank }) => {
        const { size, tensors } = fragments[fragment] as { size: number; tensors: FragmentTensor[] };
        // a low-rank round's side by its parity, as the coordinator picks it
        const side = round % 2 === 1 ? 'right' : 'left';
        return (
          n +
          roundUploadBytes({
            values: size,
            workers: participants,
            codec: 'fp4',
            blockSize,
            peerIdChars: 2, // the simulator's "w0"
            // and its members sign, as in every room (signed: the default)
            ...(roundRank === null ? {} : { lowRank: { tensors, rank: roundRank, side } }),
          })
        );
      }, 0);
      const carried =
        [...sent].filter(([kind]) => COLLECTIVE.has(kind)).reduce((n, [, bytes]) => n + bytes, 0) / workers;
      expect(carried / predicted).toBeGreaterThan(0.98);
      expect(carried / predicted).toBeLessThan(1.02);
      // and the collective is most of what a worker sends (the rest: hellos and heartbeats, which
      // weigh more beside a low-rank round's factors)
      expect(carried / result.bytesPerWorker).toBeGreaterThan(rank === null ? 0.85 : 0.8);
    },
    60_000,
  );
});
