/**
 * One volunteer's round and the host's, stage by stage, on one CPU thread: what the room's own
 * machinery costs per round beside the training it should hide behind (docs/round-machinery.md).
 *
 *   npm run bench:round -- [--models nano,tiny,small,base,gpt2] [--workers 4] [--fragments 2]
 *     [--codec fp4] [--block-size 1024] [--aggregation centered-clip] [--repeats 5]
 *     [--out bench/results/round-2core.json] [--no-save] [--json]
 *
 * For each model, its largest fragment with the room's defaults (M participants, fp4 blocks of
 * 1024, centered-clip, error feedback), the volunteer being participant 0: owner of shard 0 and
 * checker of shard M − 1. Each stage calls what the room calls:
 *   readback        θ_local[p] gathered from the engine's parameters (the engine's own read not counted)
 *   delta+encode    Δ = θ_global − θ_local, its bound, error feedback, the codec, cut into shards
 *   sign            the M contributions and 2 shard results: SHA-256 of each payload, signature
 *   aggregate       as owner and as checker: M contributions decoded and checked, aggregated, encoded
 *   verify          what arrives: 2(M − 1) contributions and M shard results, SHA-256 and signature
 *   result decode   the M shard results decoded and checked, their result hashes
 *   outer step      Δ̄ bounded, the Nesterov step into θ′, m′
 *   state hash      hash(θ′ ‖ m′)
 *   merge           θ_local[p] ← α·θ_local[p] + (1 − α)·θ′[p], in the engine's layout
 * The host's round is verify (the M shard results), result decode, outer step and state hash.
 * Medians of --repeats runs; ms and parameters of the fragment per second. Prints tables and one
 * JSON line; unless --no-save, writes the JSON to --out.
 */
import { writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { ShardCollector } from '@shoal/swarm';
import { createSHA256 } from 'hash-wasm';
import {
  aggregationRuleOf,
  buildFragments,
  checkedOuterStep,
  createCodec,
  createFragmentHasher,
  deltaInPlace,
  ErrorFeedback,
  encodedSlice,
  firstOutOfBounds,
  gatherFragment,
  mergeInPlace,
  scatterFragment,
  vectorPool,
} from '../packages/diloco/src/index.ts';
import { buildLayout, type GptConfig, PRESETS } from '../packages/model/src/index.ts';
import { createIdentity, shardRanges, signedBytesOf, verifySignature } from '../packages/protocol/src/index.ts';
import type { ContributionMessage, ShardResultMessage } from '../packages/protocol/src/messages.ts';
import { resultHashOf } from '../packages/swarm/src/shard-duty.ts';
import { formatJson } from './format-json.ts';

const { values: args } = parseArgs({
  options: {
    models: { type: 'string', default: 'nano,tiny,small,base,gpt2' },
    workers: { type: 'string', default: '4' },
    fragments: { type: 'string', default: '2' },
    codec: { type: 'string', default: 'fp4' },
    'block-size': { type: 'string', default: '1024' },
    aggregation: { type: 'string', default: 'centered-clip' },
    repeats: { type: 'string', default: '5' },
    out: { type: 'string', default: `bench/results/round-${cpus().length}core.json` },
    'no-save': { type: 'boolean', default: false },
    json: { type: 'boolean', default: false },
  },
});

/** GPT-2 small's shape with the byte vocabulary: 86M parameters (L12 C768, T 1024). */
const MODELS: Record<string, GptConfig> = PRESETS;

const M = Number(args.workers);
const P = Number(args.fragments);
const repeats = Number(args.repeats);
const codec = createCodec(args.codec, { blockSize: Number(args['block-size']) });
const rule = aggregationRuleOf(args.aggregation);
const outer = { lr: 0.7, momentum: 0.9 };
/** contributionBound at the room's defaults: 4 · lr 3e-3 · H 50 · cap 2. */
const BOUND = 4 * 3e-3 * 50 * 2;
const ALPHA = 0.5;

/** A seeded normal-ish generator (sum of uniforms), so runs compare. */
function random(seed: number): () => number {
  let s = seed >>> 0;
  const uniform = () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return () => uniform() + uniform() + uniform() - 1.5;
}

function filled(length: number, scale: number, seed: number, around?: Float32Array): Float32Array {
  const next = random(seed);
  const out = new Float32Array(length);
  for (let i = 0; i < length; i++) out[i] = (around ? (around[i] as number) : 0) + scale * next();
  return out;
}

/** Median ms of `repeats` runs of `run`, each after an untimed `setup`. */
async function time(run: () => unknown, setup: () => void = () => {}): Promise<number> {
  const samples: number[] = [];
  for (let r = 0; r < repeats; r++) {
    setup();
    const start = performance.now();
    await run();
    samples.push(performance.now() - start);
  }
  samples.sort((a, b) => a - b);
  return samples[Math.floor(samples.length / 2)] as number;
}

const VOLUNTEER_STAGES = [
  'readback',
  'delta+encode',
  'sign',
  'aggregate',
  'verify',
  'result decode',
  'outer step',
  'state hash',
  'merge',
] as const;
const HOST_STAGES = ['verify results', 'result decode', 'outer step', 'state hash'] as const;

interface ModelFigures {
  model: string;
  params: number;
  fragment: number;
  volunteer: Record<string, number>;
  volunteerMs: number;
  volunteerParamsPerSecond: number;
  host: Record<string, number>;
  hostMs: number;
  hostParamsPerSecond: number;
  /** One contribution shard's SHA-256 by hash-wasm and by WebCrypto (not in the totals). */
  sha256: { bytes: number; hashWasmMs: number; webCryptoMs: number };
}

/**
 * The round of `name`'s largest fragment, ready to time: its data (θ_global, m, each
 * participant's θ_local, their encoded Δ, each shard's result, the signatures) and each stage's
 * work as the room does it.
 */
async function roundOf(name: string) {
  const model = MODELS[name];
  if (!model) throw new RangeError(`unknown model "${name}": choose ${Object.keys(MODELS).join(', ')}`);
  const layout = buildLayout(model);
  const fragments = buildFragments(layout, P, 'sequential');
  const fragment = fragments.reduce((a, b) => (b.size > a.size ? b : a));
  const F = fragment.size;
  const hasher = await createFragmentHasher();
  const identity = await createIdentity();
  const peers = Array.from({ length: M }, (_, k) => `peer-${k}`);
  const ranges = shardRanges(F, codec.blockSize, M);
  const params = filled(layout.size, 0.02, 1);
  const global = gatherFragment(params, fragment);
  const momentum = filled(F, 1e-3, 2);
  // each participant's θ_local, a little off θ_global; the volunteer's is in the engine's layout
  const locals = peers.map((_, k) => filled(F, 2e-3, 10 + k, global));
  scatterFragment(locals[0] as Float32Array, fragment, params);
  const encoded = locals.map((local) => {
    const delta = local.slice();
    deltaInPlace(global, delta, BOUND / 2);
    return codec.encode(delta);
  });
  const shardPayload = (k: number, shard: number) =>
    encodedSlice(codec, encoded[k] as Uint8Array, (ranges[shard] as { start: number }).start, ranges[shard]?.end ?? 0);
  const contribution = (k: number, shard: number): ContributionMessage => ({
    kind: 'contribution',
    fragment: fragment.index,
    round: 1,
    shard,
    codec: codec.name,
    weight: 1024,
    payload: shardPayload(k, shard),
  });
  const jobOf = (shard: number) => ({
    fragment: fragment.index,
    round: 1,
    shard,
    length: (ranges[shard]?.end ?? 0) - (ranges[shard]?.start ?? 0),
    codec,
    participants: peers,
    rule,
    maxWeight: 4096,
    maxMagnitude: BOUND,
  });
  const aggregateShard = (shard: number) => {
    const collector = new ShardCollector(jobOf(shard));
    for (const [k, peer] of peers.entries()) collector.add(peer, contribution(k, shard));
    const result = collector.finish();
    return { ...result, resultHash: resultHashOf(hasher, result.payload, result.accepted) };
  };
  // every shard's result, as the replicas receive them
  const results = ranges.map((_, shard) => aggregateShard(shard));
  const resultMessage = (shard: number): ShardResultMessage => ({
    kind: 'shard-result',
    fragment: fragment.index,
    round: 1,
    shard,
    codec: codec.name,
    verdicts: results[shard]?.verdicts ?? [],
    resultHash: results[shard]?.resultHash ?? '',
    payload: results[shard]?.payload ?? new Uint8Array(0),
  });
  const sign = async (message: ContributionMessage | ShardResultMessage) =>
    identity.sign(await signedBytesOf(7, 'peer-0', message));
  // the contributions this volunteer receives as owner of shard 0 and checker of shard M − 1
  const mine = [0, M - 1];
  const incoming = mine.flatMap((shard) => peers.slice(1).map((_, j) => contribution(j + 1, shard)));
  const incomingSignatures = await Promise.all(incoming.map(sign));
  const resultSignatures = await Promise.all(ranges.map((_, shard) => sign(resultMessage(shard))));
  const verify = async (message: ContributionMessage | ShardResultMessage, signature: string) => {
    if (!(await verifySignature(identity.key, await signedBytesOf(7, 'peer-0', message), signature))) {
      throw new Error('a signature did not verify');
    }
  };
  const verifyResults = () =>
    Promise.all(ranges.map((_, shard) => verify(resultMessage(shard), resultSignatures[shard] as string)));
  const bounds = ranges.map(() => Number.NaN);
  // as a volunteer's replica does (replica.ts): each result decoded into a buffer of the pool, Δ̄
  // put together in another (handed back), θ′ and m′ into two more
  const decodeResults = () =>
    ranges.map((range, shard) => {
      const result = results[shard] as (typeof results)[number];
      const values = codec.decode(result.payload, range.end - range.start, vectorPool.take(range.end - range.start));
      const bound = codec.decodedBound?.(result.payload, values.length) ?? Number.NaN;
      if (!Number.isFinite(bound) && firstOutOfBounds(values)) throw new Error('an aggregate is not finite');
      bounds[shard] = bound;
      resultHashOf(hasher, result.payload, result.accepted);
      return values;
    });
  const decoded = decodeResults();
  const outerStep = () => {
    const delta = vectorPool.take(F);
    for (const [shard, range] of ranges.entries()) delta.set(decoded[shard] as Float32Array, range.start);
    if (!bounds.every((b) => b <= BOUND) && firstOutOfBounds(delta, BOUND)) throw new Error('Δ̄ is out of bounds');
    const out = { theta: vectorPool.take(F), momentum: vectorPool.take(F) };
    const next = checkedOuterStep(global, momentum, delta, outer, out);
    vectorPool.give(delta);
    if ('index' in next) throw new Error('θ′ is not finite');
    return next;
  };
  const next = outerStep();

  return {
    layout,
    fragment,
    F,
    params,
    global,
    locals,
    ranges,
    hasher,
    contribution,
    shardPayload,
    resultMessage,
    sign,
    mine,
    aggregateShard,
    incoming,
    incomingSignatures,
    verify,
    verifyResults,
    decodeResults,
    outerStep,
    next,
  };
}

async function measure(name: string): Promise<ModelFigures> {
  const round = await roundOf(name);
  const { layout, fragment, F, params, global, locals, ranges, hasher, contribution, shardPayload } = round;
  const { resultMessage, sign, mine, aggregateShard, incoming, incomingSignatures, verify, verifyResults } = round;
  const { decodeResults, outerStep, next } = round;
  const feedback = new ErrorFeedback(codec, F);
  let local: Float32Array = new Float32Array(0);
  const volunteer: Record<string, number> = {
    readback: await time(
      () => {
        local = gatherFragment(params, fragment, vectorPool.take(F));
      },
      () => vectorPool.give(local),
    ),
    'delta+encode': await time(
      () => {
        deltaInPlace(global, local, BOUND / 2);
        const bytes = feedback.encode(local);
        feedback.discard();
        return ranges.map((r) => encodedSlice(codec, bytes, r.start, r.end));
      },
      () => local.set(locals[0] as Float32Array),
    ),
    sign: await time(async () => {
      await Promise.all(ranges.map((_, shard) => sign(contribution(0, shard))));
      await Promise.all(mine.map((shard) => sign(resultMessage(shard))));
    }),
    aggregate: await time(() => mine.map(aggregateShard)),
    verify: await time(async () => {
      await Promise.all([...incoming.map((m, j) => verify(m, incomingSignatures[j] as string)), verifyResults()]);
    }),
    // a volunteer's replica keeps these until the garbage collector takes them (replica.ts)
    'result decode': await time(decodeResults),
    'outer step': await time(outerStep),
    'state hash': await time(() => hasher.hash(next.theta, next.momentum)),
    merge: await time(() => {
      const merged = gatherFragment(params, fragment, vectorPool.take(F));
      mergeInPlace(merged, next.theta, ALPHA);
      scatterFragment(merged, fragment, params);
      vectorPool.give(merged);
    }),
  };
  // the two SHA-256s a payload's signature can use (identity.ts picks by size): which is faster here
  const sha = await createSHA256();
  const payload = shardPayload(0, 0) as Uint8Array<ArrayBuffer>;
  const sha256 = {
    bytes: payload.length,
    hashWasmMs: await time(() => {
      sha.init();
      sha.update(payload);
      return sha.digest('hex');
    }),
    webCryptoMs: await time(() => crypto.subtle.digest('SHA-256', payload)),
  };
  const host: Record<string, number> = {
    'verify results': await time(verifyResults),
    'result decode': volunteer['result decode'] as number,
    'outer step': volunteer['outer step'] as number,
    'state hash': volunteer['state hash'] as number,
  };
  const sum = (stages: Record<string, number>) => Object.values(stages).reduce((a, b) => a + b, 0);
  const volunteerMs = sum(volunteer);
  const hostMs = sum(host);
  return {
    model: name,
    params: layout.size,
    fragment: F,
    volunteer,
    volunteerMs,
    volunteerParamsPerSecond: F / (volunteerMs / 1000),
    host,
    hostMs,
    hostParamsPerSecond: F / (hostMs / 1000),
    sha256,
  };
}

const millions = (n: number) => `${(n / 1e6).toFixed(n < 1e6 ? 2 : 1)}M`;
const figures: ModelFigures[] = [];
for (const name of args.models.split(',').filter(Boolean)) {
  const row = await measure(name);
  figures.push(row);
  if (args.json) continue;
  console.log(
    `\n${name}: ${millions(row.params)} parameters, fragment ${millions(row.fragment)}, ${M} participants, ` +
      `${codec.name}/${codec.blockSize}, ${rule.kind}`,
  );
  const line = (stage: string, ms: number) =>
    console.log(
      `  ${stage.padEnd(16)} ${ms.toFixed(2).padStart(9)} ms ${millions(row.fragment / (ms / 1000)).padStart(9)}/s`,
    );
  for (const stage of VOLUNTEER_STAGES) line(stage, row.volunteer[stage] as number);
  line('volunteer total', row.volunteerMs);
  for (const stage of HOST_STAGES) if (stage === 'verify results') line(`host ${stage}`, row.host[stage] as number);
  line('host total', row.hostMs);
  const { bytes, hashWasmMs, webCryptoMs } = row.sha256;
  console.log(
    `  SHA-256 of a ${(bytes / 1e6).toFixed(2)} MB shard: hash-wasm ${hashWasmMs.toFixed(2)} ms, WebCrypto ${webCryptoMs.toFixed(2)} ms`,
  );
}
const report = {
  bench: 'round',
  date: new Date().toISOString(),
  machine: { cpus: cpus().length, cpu: cpus()[0]?.model ?? 'unknown', load: loadavg()[0] },
  node: process.version,
  settings: {
    workers: M,
    fragments: P,
    codec: codec.name,
    blockSize: codec.blockSize,
    aggregation: rule.kind,
    repeats,
  },
  models: figures,
};
console.log(JSON.stringify(report));
if (!args['no-save']) writeFileSync(args.out, formatJson(report));
