/**
 * One fragment's collective on a full mesh of Node MeshTransports (@roamhq/wrtc, loopback, all in
 * this process), with the real messages and the real codec work of a round, but no training and
 * no coordinator (docs/design.md, "The collective"):
 *
 * - Every peer holds a synthetic Δ for the fragment (about N(0, 10⁻³), its own seed), encoded once
 *   with the round's codec (fp4, in blocks of bench:mesh's --block-size, 64 unless set) and cut at the shard
 *   boundaries of `shardRanges`, as packages/swarm's worker does. This encoding is timed on its own
 *   (it happens at the contribution step, before the collective).
 * - Reduce-scatter: each peer sends shard k of its encoding, as a wire `contribution` message
 *   (packages/protocol: header, xxh3 hash), to owner k; an owner's own shard is handed over
 *   locally. Owner k feeds each one to the swarm's ShardCollector (decode, finite check) and, with
 *   all of them in, aggregates (weighted mean) and encodes the result once.
 * - All-gather: the owner sends that result as a wire `shard-result` to every other peer.
 * - The round ends when every peer has received and wire-validated every shard's result.
 *
 * After one untimed round (JIT), full rounds alternate with rounds of the same messages, sizes
 * and order without the codec work (an owner forwards a stand-in result of the right size as soon
 * as its contributions are in): what the transport alone costs for this traffic on this machine.
 * The lower bound is what each peer must upload (its contributions to the other owners and its
 * result to the other replicas, in wire bytes) over the link throughput measured by the caller.
 * On loopback every peer shares this process's one JS thread and the machine's two cores, which a
 * real room does not: the transport-only rounds show how much of the gap that is.
 */
import { buildFragments, createCodec } from '@shoal/diloco';
import { createWireCodec, type Message, shardRanges } from '@shoal/protocol';
import { ShardCollector } from '@shoal/swarm';
import { closeAll, connectedMesh, type TestNode } from '../../packages/mesh/src/test-mesh.ts';
import { presetConfig } from '../../packages/model/src/config.ts';
import { buildLayout } from '../../packages/model/src/layout.ts';
import { median } from './throughput.ts';

export interface CollectiveOptions {
  preset: string;
  /** P, the fragment count; fragment `fragment` of a `sequential` split is synchronised. */
  fragments: number;
  fragment: number;
  peers: number;
  codec: string;
  blockSize: number;
  rounds: number;
}

export interface CollectiveResult {
  preset: string;
  fragment: number;
  fragments: number;
  fragmentValues: number;
  peers: number;
  codec: string;
  blockSize: number;
  encodedBytes: number;
  /** Wire bytes one peer uploads per round (the largest over peers). */
  bytesPerPeer: number;
  /** Wire bytes all peers upload per round. */
  bytesTotal: number;
  /** Data-channel bytes per peer (chunk headers and heartbeats included), the largest. */
  channelBytesPerPeer: number;
  encodeMs: number;
  /** Per full round: wall time, and the slowest owner's decode + aggregate + encode time. */
  roundsMs: number[];
  ownerMs: number[];
  /** Per full round: every owner's decode + aggregate + encode time, summed (one thread here). */
  ownerTotalMs: number[];
  medianMs: number;
  /** Per round of the same traffic without codec work. */
  transportOnlyMs: number[];
  transportOnlyMedianMs: number;
}

const RUN_ID = 1;
const WEIGHT = 16 * 256 * 50; // tokens: 50 inner steps of 16 × 256

export async function measureCollective(options: CollectiveOptions): Promise<CollectiveResult> {
  const layout = buildLayout(presetConfig(options.preset));
  const fragment = buildFragments(layout, options.fragments, 'sequential')[options.fragment];
  if (!fragment) throw new RangeError(`fragment ${options.fragment} of ${options.fragments} does not exist`);
  const codec = createCodec(options.codec, { blockSize: options.blockSize });
  const wire = await createWireCodec();
  const shards = shardRanges(fragment.size, codec.blockSize, options.peers);
  if (shards.length !== options.peers)
    throw new RangeError(`${fragment.size} values make only ${shards.length} shards`);

  const nodes = await connectedMesh(options.peers);
  try {
    const ids = nodes.map((node) => node.transport.self);
    const deltas = ids.map((_, i) => syntheticDelta(fragment.size, i + 1));
    const encodeStart = performance.now();
    const encoded = deltas.map((delta) => codec.encode(delta));
    const encodeMs = (performance.now() - encodeStart) / deltas.length;
    const payloads = encoded.map((bytes) =>
      shards.map((s) => bytes.subarray(codec.encodedSize(s.start), codec.encodedSize(s.end))),
    );
    const setup = { nodes, ids, payloads, wire, codec, shards, fragment: options.fragment };
    await runRound({ ...setup, round: 1, codecWork: true }); // warm-up
    const rounds = [];
    const transportOnly = [];
    for (let i = 0; i < options.rounds; i++) {
      rounds.push(await runRound({ ...setup, round: 2 + 2 * i, codecWork: true }));
      transportOnly.push(await runRound({ ...setup, round: 3 + 2 * i, codecWork: false }));
    }
    const roundsMs = rounds.map((r) => r.ms);
    const transportOnlyMs = transportOnly.map((r) => r.ms);
    return {
      preset: options.preset,
      fragment: options.fragment,
      fragments: options.fragments,
      fragmentValues: fragment.size,
      peers: options.peers,
      codec: codec.name,
      blockSize: codec.blockSize,
      encodedBytes: codec.encodedSize(fragment.size),
      bytesPerPeer: Math.max(...(rounds[0]?.bytesSent ?? [0])),
      bytesTotal: (rounds[0]?.bytesSent ?? []).reduce((a, b) => a + b, 0),
      channelBytesPerPeer: Math.max(...(rounds[0]?.channelBytesSent ?? [0])),
      encodeMs,
      roundsMs,
      ownerMs: rounds.map((r) => Math.max(...r.ownerMs)),
      ownerTotalMs: rounds.map((r) => r.ownerMs.reduce((a, b) => a + b, 0)),
      medianMs: median(roundsMs),
      transportOnlyMs,
      transportOnlyMedianMs: median(transportOnlyMs),
    };
  } finally {
    await closeAll(nodes);
  }
}

/** Values of about N(0, σ = 10⁻³): the sum of four uniforms, from a seeded xorshift32. */
function syntheticDelta(size: number, seed: number): Float32Array {
  const values = new Float32Array(size);
  let x = seed;
  const uniform = () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) / 2 ** 32 - 0.5;
  };
  for (let i = 0; i < size; i++) values[i] = (uniform() + uniform() + uniform() + uniform()) * 1.7e-3;
  return values;
}

interface RoundSetup {
  nodes: TestNode[];
  ids: string[];
  /** payloads[i][k]: peer i's encoded shard k. */
  payloads: Uint8Array[][];
  wire: Awaited<ReturnType<typeof createWireCodec>>;
  codec: ReturnType<typeof createCodec>;
  shards: { start: number; end: number }[];
  fragment: number;
  round: number;
  /** false: owners skip decode, aggregate and encode, and forward a stand-in of the result's size. */
  codecWork: boolean;
}

async function runRound(setup: RoundSetup) {
  const { nodes, ids, payloads, wire, codec, shards, fragment, round, codecWork } = setup;
  const peers = ids.length;
  const ownerMs = ids.map(() => 0);
  const bytesSent = ids.map(() => 0);
  const channelBefore = nodes.map((node) => node.transport.stats.bytesSent);
  const results = ids.map(() => new Set<number>());
  const collectors = shards.map(
    (s, k) =>
      new ShardCollector({
        fragment,
        round,
        shard: k,
        length: s.end - s.start,
        codec,
        participants: ids,
        rule: { kind: 'mean' },
        maxWeight: 4 * WEIGHT,
      }),
  );
  let finished = 0;
  let settle: (error?: Error) => void = () => {};
  const done = new Promise<void>((resolve, reject) => {
    settle = (error) => (error ? reject(error) : resolve());
  });

  const send = (i: number, to: string, message: Message) => {
    const bytes = wire.encode(message, RUN_ID);
    bytesSent[i] = (bytesSent[i] as number) + bytes.length;
    (nodes[i] as TestNode).transport.send(to, bytes).catch((error: Error) => settle(error));
  };
  const gotResult = (i: number, shard: number) => {
    const own = results[i] as Set<number>;
    own.add(shard);
    if (own.size === peers && ++finished === peers) settle();
  };
  const arrived = ids.map(() => 0);
  const contribute = (owner: number, from: string, payload: Uint8Array) => {
    const started = performance.now();
    const collector = collectors[owner] as ShardCollector;
    if (codecWork) {
      const outcome = collector.add(from, { codec: collector.job.codec.name, weight: WEIGHT, payload });
      if (!outcome.accepted) return settle(new Error(`owner ${ids[owner]} refused ${from}: ${outcome.message}`));
    }
    arrived[owner] = (arrived[owner] as number) + 1;
    if (arrived[owner] === peers) {
      // the stand-in: the owner's own encoded shard, the size of an encoded result
      const own = (payloads[owner] as Uint8Array[])[owner] as Uint8Array;
      const verdicts = ids.map((peer) => ({ peer, weight: WEIGHT, reason: '' as const, message: '' }));
      const result = codecWork ? collector.finish() : { verdicts, payload: own };
      ownerMs[owner] = (ownerMs[owner] as number) + performance.now() - started;
      gotResult(owner, owner);
      for (const [j, to] of ids.entries()) {
        if (j === owner) continue;
        send(owner, to, {
          kind: 'shard-result',
          fragment,
          round,
          shard: owner,
          codec: codec.name,
          verdicts: result.verdicts,
          payload: result.payload,
        });
      }
    } else {
      ownerMs[owner] = (ownerMs[owner] as number) + performance.now() - started;
    }
  };
  const unsubscribe = nodes.map((node, i) =>
    node.transport.on('message', (from, bytes) => {
      const decoded = wire.decode(bytes);
      if (!decoded.ok) return settle(new Error(`${ids[i]}: bad message from ${from}: ${decoded.detail}`));
      const message = decoded.message;
      if (message.kind === 'contribution' && message.round === round) contribute(i, from, message.payload);
      else if (message.kind === 'shard-result' && message.round === round) gotResult(i, message.shard);
    }),
  );

  const timeout = setTimeout(() => settle(new Error(`round ${round} did not finish in 60 s`)), 60_000);
  const start = performance.now();
  for (const i of ids.keys()) {
    for (const [k, owner] of ids.entries()) {
      if (k === i) continue;
      const payload = (payloads[i] as Uint8Array[])[k] as Uint8Array;
      send(i, owner, { kind: 'contribution', fragment, round, shard: k, codec: codec.name, weight: WEIGHT, payload });
    }
  }
  // an owner's own shard does not travel (the swarm's Member delivers to self locally)
  for (const [i, id] of ids.entries()) contribute(i, id, (payloads[i] as Uint8Array[])[i] as Uint8Array);
  try {
    await done;
  } finally {
    clearTimeout(timeout);
    for (const off of unsubscribe) off();
  }
  const ms = performance.now() - start;
  return {
    ms,
    ownerMs,
    bytesSent,
    channelBytesSent: nodes.map((node, i) => node.transport.stats.bytesSent - (channelBefore[i] as number)),
  };
}
