import { createCodec, createFragmentHasher, type Fragment } from '@shoal/diloco';
import { createWireCodec, type RoundOpenMessage } from '@shoal/protocol';
import { SimNetwork, VirtualClock } from '@shoal/sim';
import { describe, expect, it } from 'vitest';
import { Member } from './member.ts';
import { ReplicaState } from './replica.ts';
import { ReplicaNode } from './replica-node.ts';

const SIZE = 128;
const RUN = 3;

/** A replica w0 of one fragment following the coordinator 'host', which sends it what a test says. */
async function follower() {
  const clock = new VirtualClock();
  const network = new SimNetwork(clock);
  const wire = await createWireCodec();
  // members without key pairs, which require no signatures (test-room.ts): what is checked here is the replica's
  const host = new Member(network.join('host'), wire, clock, RUN, { requireSignatures: false });
  const member = new Member(network.join('w0'), wire, clock, RUN, { requireSignatures: false });
  const fragment: Fragment = {
    index: 0,
    blocks: [0],
    ranges: [[0, SIZE]],
    size: SIZE,
    tensors: [{ name: 'all', offset: 0, size: SIZE, rows: SIZE, cols: 1 }],
  };
  const state = new ReplicaState([fragment], new Float32Array(SIZE), await createFragmentHasher(), {
    lr: 0.7,
    momentum: 0.9,
  });
  const reports: string[] = [];
  host.on('hash-report', (_from, message) => reports.push(message.hash));
  new ReplicaNode(member, state, { coordinator: () => 'host' });
  await clock.runAsync();
  return { clock, host, member, state, reports };
}

describe('ReplicaNode', () => {
  it("refuses a shard result whose header names another codec than the round's, though its bytes decode", async () => {
    const { clock, host, member, state, reports } = await follower();
    const open: RoundOpenMessage = {
      kind: 'round-open',
      fragment: 0,
      round: 1,
      codec: 'int4',
      participants: ['w0'],
      shards: [{ start: 0, end: SIZE, owner: 'w0' }],
      fragmentSize: SIZE,
      blockSize: 64,
      deadlineMs: 5_000,
      roomTokens: 0,
      baseHash: state.fragment(0).hash,
      maxWeight: 1_000,
    };
    void host.send('w0', open);
    await clock.runAsync();
    // int4 and fp4 share one layout: fp4 bytes are valid int4 bytes, meaning other values
    const values = Float32Array.from({ length: SIZE }, (_, i) => Math.sin(i) / 100);
    const result = (codec: 'int4' | 'fp4') => ({
      kind: 'shard-result' as const,
      fragment: 0,
      round: 1,
      shard: 0,
      codec,
      verdicts: [{ peer: 'w0', weight: 10, reason: '', message: '' }],
      payload: createCodec(codec, { blockSize: 64 }).encode(values),
    });
    void host.send('w0', result('fp4')); // the coordinator's result: the referee's
    await clock.runAsync();
    expect(member.counters.recent()).toEqual([
      expect.objectContaining({ kind: 'shard-result', reason: 'codec', detail: expect.stringMatching(/says fp4/) }),
    ]);
    expect(state.tentativeHash(0, 1)).toBeNull();
    expect(reports).toEqual([]);
    // the same values under the round's codec complete the round
    void host.send('w0', result('int4'));
    await clock.runAsync();
    expect(reports).toHaveLength(1);
  });

  it("refuses a round-open whose size is not its low-rank payload's, and opens one whose size is", async () => {
    const { clock, host, member, state } = await follower();
    const open = (fragmentSize: number): RoundOpenMessage => ({
      kind: 'round-open',
      fragment: 0,
      round: 1,
      codec: 'fp4',
      participants: ['w0'],
      shards: [{ start: 0, end: fragmentSize, owner: 'w0' }],
      fragmentSize,
      blockSize: 64,
      deadlineMs: 5_000,
      roomTokens: 0,
      baseHash: state.fragment(0).hash,
      maxWeight: 1_000,
      // the follower's one tensor is 1-D: it travels as it is, so the payload is the fragment
      lowRank: { rank: 2, side: 'right' },
    });
    void host.send('w0', open(SIZE / 2));
    await clock.runAsync();
    expect(member.counters.recent()).toEqual([
      expect.objectContaining({ kind: 'round-open', reason: 'size', detail: expect.stringMatching(/rank-2 right/) }),
    ]);
    expect(state.isOpen(0, 1)).toBe(false);
    void host.send('w0', open(SIZE));
    await clock.runAsync();
    expect(state.isOpen(0, 1)).toBe(true);
    expect(state.projection(0, 1)?.payloadSize).toBe(SIZE);
  });
});
