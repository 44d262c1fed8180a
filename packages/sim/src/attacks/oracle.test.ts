import { createCodec } from '@shoal/diloco';
import { createWireCodec, type Message, type RoundOpenMessage } from '@shoal/protocol';
import { createRunConfig } from '@shoal/room/run-config';
import { describe, expect, it } from 'vitest';
import { MAX_INFLUENCE, RoundOracle } from './oracle.ts';

// One round of one fragment of 8 values, two participants owning a shard of 4 each, fp32 so
// every value is exact, the plain mean: what the referee should make of each way it can go.
const base = createRunConfig({ preset: 'nano' });
const config = { ...base, diloco: { ...base.diloco, aggregation: { kind: 'mean' as const } } };
const fp32 = createCodec('fp32');
const H0 = '0'.repeat(32);
const H1 = '1'.repeat(32);
const open = {
  kind: 'round-open',
  fragment: 0,
  round: 1,
  codec: 'fp32',
  participants: ['w0', 'w1'],
  shards: [
    { start: 0, end: 4, owner: 'w0' },
    { start: 4, end: 8, owner: 'w1' },
  ],
  fragmentSize: 8,
  blockSize: 1,
  deadlineMs: 5_000,
  roomTokens: 0,
  baseHash: H0,
  maxWeight: 1_000,
} as unknown as RoundOpenMessage;
const deltas = { w0: [0.1, -0.2, 0.3, 0.1, 0.2, 0.1, -0.1, 0.3], w1: [0.2, -0.1, 0.2, 0.2, 0.1, 0.3, -0.2, 0.1] };

interface Play {
  /** What owner w0 receives of w1's shard-0 contribution (its code aggregates that faithfully). */
  received?: (values: Float32Array) => Float32Array;
  /** What the host applies of shard 1's result (w1's code emitted the honest one). */
  applied?: (values: Float32Array) => Float32Array;
  /** The hash the coordinator commits (the host's state takes H1 either way). */
  committed?: string;
}

async function play({ received = (v) => v, applied = (v) => v, committed = H1 }: Play = {}) {
  const host = { fragments: [{ round: 0, hash: H0, theta: new Float32Array(8), momentum: new Float32Array(8) }] };
  const oracle = new RoundOracle(config, await createWireCodec(), new WeakSet(), host, 'host');
  oracle.observeSent('host', open);
  const contribution = (peer: 'w0' | 'w1', shard: number, values?: Float32Array): Message => {
    const range = open.shards[shard] as { start: number; end: number };
    const honest = Float32Array.from(deltas[peer].slice(range.start, range.end));
    return {
      kind: 'contribution',
      fragment: 0,
      round: 1,
      shard,
      codec: 'fp32',
      weight: 100,
      payload: fp32.encode(values ?? honest),
    };
  };
  const valuesOf = (m: Message) => fp32.decode((m as { payload: Uint8Array }).payload, 4);
  // shard 0 at w0: its own (never on the wire), then w1's as its code sent it and as it arrived
  oracle.arrival('w0', 'w0', contribution('w0', 0) as never);
  oracle.observeSent('w1', contribution('w1', 0));
  const atOwner = contribution('w1', 0, received(valuesOf(contribution('w1', 0))));
  oracle.arrival('w0', 'w1', atOwner as never);
  // shard 1 at w1
  oracle.observeSent('w0', contribution('w0', 1));
  oracle.arrival('w1', 'w0', contribution('w0', 1) as never);
  oracle.arrival('w1', 'w1', contribution('w1', 1) as never);
  const mean = (a: Float32Array, b: Float32Array) => a.map((v, i) => (v + (b[i] as number)) / 2);
  const results = [
    mean(valuesOf(contribution('w0', 0)), valuesOf(atOwner)),
    mean(valuesOf(contribution('w0', 1)), valuesOf(contribution('w1', 1))),
  ];
  for (const [shard, values] of results.entries()) {
    const owner = shard === 0 ? 'w0' : 'w1';
    oracle.observeSent(owner, {
      kind: 'shard-result',
      fragment: 0,
      round: 1,
      shard,
      codec: 'fp32',
      verdicts: [],
      payload: fp32.encode(values),
    });
  }
  // the host applies the outer step to what reached it (m starts at 0, so m′ = Δ̄), and commits
  const delta = new Float32Array(8);
  delta.set(results[0] as Float32Array, 0);
  delta.set(applied(results[1] as Float32Array), 4);
  oracle.committedRound(0, 1, committed);
  host.fragments[0] = { round: 1, hash: H1, theta: delta.map((d) => -0.7 * d), momentum: delta.slice() };
  oracle.poll();
  return oracle.report();
}

describe('the referee of an attack run', () => {
  it('passes an honest round: both shards checked, nothing made up, no influence', async () => {
    const found = await play();
    expect(found).toMatchObject({ checkedShards: 2, madeUpShards: 0, uncommittedStates: 0, nonFinite: false });
    expect(found.maxInfluence).toBeLessThan(1e-6);
  });

  it('catches a result changed on the wire (an owner scaling its aggregate ×100)', async () => {
    const found = await play({ applied: (v) => v.map((x) => 100 * x) });
    expect(found.madeUpShards).toBe(1);
    expect(found.maxInfluence).toBeGreaterThan(MAX_INFLUENCE);
    expect(found.notes.join('\n')).toMatch(/shard 1: committed a result no aggregator computed/);
  });

  it('catches a poisoned contribution that an owner aggregated faithfully (−10·Δ under the mean)', async () => {
    const found = await play({ received: (v) => v.map((x) => -10 * x) });
    expect(found.madeUpShards).toBe(0); // the owner computed what it was given
    expect(found.maxInfluence).toBeGreaterThan(10); // 11 shares: 11‖Δ‖/2 over a share of ‖Δ‖/2
  });

  it('lets a bounded one pass: a flipped Δ of honest size moves the step by 2 shares', async () => {
    const found = await play({ received: (v) => v.map((x) => -x) });
    expect(found.maxInfluence).toBeGreaterThan(1);
    expect(found.maxInfluence).toBeLessThanOrEqual(MAX_INFLUENCE);
  });

  it('flags a host state the coordinator never committed, and non-finite values', async () => {
    expect(await play({ committed: '2'.repeat(32) })).toMatchObject({ uncommittedStates: 1, checkedShards: 0 });
    const found = await play({ applied: (v) => v.map(() => Number.NaN) });
    expect(found.nonFinite).toBe(true);
    expect(found.maxInfluence).toBe(Number.POSITIVE_INFINITY);
  });
});
