/** One valid message of every kind, and a seeded generator, for the tests (`@shoal/protocol/test-fixtures`; not part of the package's API). */
import { mulberry32 } from '@shoal/gpu/random';
import type { MessageKind, MessageOf } from './messages.ts';
import { shardRanges } from './round-open.ts';
import type { RunConfig } from './schemas.ts';

/** mulberry32 (@shoal/gpu's), under the name these tests use. */
export const seededRandom = mulberry32;

export function randomBytes(length: number, random: () => number): Uint8Array {
  const bytes = new Uint8Array(length);
  for (let i = 0; i < length; i++) bytes[i] = Math.floor(random() * 256);
  return bytes;
}

export function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

const HASH_A = '09ec977e1bb6675ae57c224cecd0ca9e';
const HASH_B = 'ab9b6e0e51ded27e65c6ad52303c2761a9b619f39c84dfd6ab37cbbc5b4f61ba';

export const RUN_CONFIG: RunConfig = {
  model: { nLayer: 2, nHead: 4, nEmbd: 64, blockSize: 64, vocabSize: 256 },
  train: {
    batchSize: 16,
    seqLen: 64,
    maxLr: 1e-3,
    minLr: 1e-4,
    warmupSteps: 20,
    totalSteps: 400,
    beta1: 0.9,
    beta2: 0.95,
    eps: 1e-8,
    weightDecay: 0.1,
    gradClip: 1,
    seed: 1337,
  },
  diloco: {
    fragments: 2,
    fragmentMode: 'sequential',
    innerSteps: 50,
    overlap: 2,
    alpha: 0.5,
    outerLr: 0.7,
    outerMomentum: 0.9,
    codec: 'fp4',
    codecBlockSize: 64,
    errorFeedback: true,
    aggregation: { kind: 'centered-clip', clipFactor: 2, radiusFactor: 1, iterations: 3 },
    hashAlgorithm: 'xxh128',
    weightCapFactor: 2,
    quorum: 0.5,
  },
  data: { corpus: 'moby-dick', seed: 7 },
  heartbeatMs: 1000,
};

const capabilities = { backend: 'webgpu', adapter: 'NVIDIA H100 (vulkan)', tokensPerSecond: 51234.5 } as const;
const participants = ['peer-a', 'peer-b', 'peer-c'];
const FRAGMENT_SIZE = 1000;
const shards = shardRanges(FRAGMENT_SIZE, 64, participants.length).map((range, k) => ({
  ...range,
  owner: participants[k] as string,
}));

/** Every kind once; the type makes a new kind without a sample a compile error. */
/** A dataset's manifest hash (SHA-256 hex) for the dataset-request samples. */
const MANIFEST_HASH = '5eed'.repeat(16);

export const SAMPLES: { [K in MessageKind]: MessageOf<K> } = {
  hello: {
    kind: 'hello',
    role: 'worker',
    client: 'shoal-web 0.1.0',
    capabilities,
    holds: [{ fragment: 1, round: 3, hash: HASH_A }],
  },
  welcome: {
    kind: 'welcome',
    config: RUN_CONFIG,
    fragments: [
      { fragment: 0, round: 4, hash: HASH_A },
      { fragment: 1, round: 3, hash: HASH_B },
    ],
    roomTokens: 123_456_789,
    stateFrom: 'host',
  },
  roster: {
    kind: 'roster',
    epoch: 7,
    coordinator: 'host',
    members: [
      {
        peer: 'host',
        role: 'replica',
        status: 'synced',
        reason: '',
        capabilities: { ...capabilities, backend: 'none' },
      },
      { peer: 'peer-a', role: 'worker', status: 'unreachable', reason: 'no TURN server configured', capabilities },
    ],
  },
  heartbeat: {
    kind: 'heartbeat',
    innerStep: 812,
    tokensSinceContribution: [40_960, 12_288],
    loss: 2.3125,
    tokensPerSecond: 9876.5,
    bytesSent: 1_234_567,
    bytesReceived: 7_654_321,
    stalls: 1,
    reachable: ['host', 'peer-b'],
    rejectedContributions: { codec: 2, 'non-finite': 1 },
    waitingFor: [{ fragment: 1, round: 4, peers: ['peer-b'] }],
  },
  'round-open': {
    kind: 'round-open',
    fragment: 1,
    round: 4,
    codec: 'fp4',
    participants,
    shards,
    fragmentSize: FRAGMENT_SIZE,
    blockSize: 64,
    deadlineMs: 30_000,
    roomTokens: 9_000_000,
    baseHash: HASH_B,
    maxWeight: 163_840,
  },
  contribution: {
    kind: 'contribution',
    fragment: 1,
    round: 4,
    shard: 2,
    codec: 'fp4',
    weight: 40_960,
    payload: Uint8Array.from({ length: 180 }, (_, i) => (i * 37) & 0xff),
  },
  'shard-result': {
    kind: 'shard-result',
    fragment: 1,
    round: 4,
    shard: 2,
    codec: 'fp4',
    verdicts: [
      { peer: 'peer-a', weight: 40_960, reason: '', message: '' },
      { peer: 'peer-b', weight: 0, reason: 'non-finite', message: 'value NaN at index 17' },
    ],
    payload: Uint8Array.from({ length: 180 }, (_, i) => (i * 11) & 0xff),
  },
  'hash-report': { kind: 'hash-report', fragment: 1, round: 4, hash: HASH_A },
  commit: {
    kind: 'commit',
    fragment: 1,
    round: 4,
    hash: HASH_A,
    contributors: ['peer-a', 'peer-c'],
    roomTokens: 9_100_000,
  },
  abort: { kind: 'abort', fragment: 0, round: 9, reason: 'deadline', message: '2 of 3 shard results in 30 s' },
  reassign: {
    kind: 'reassign',
    fragment: 1,
    round: 4,
    shard: 1,
    owner: 'peer-c',
    previous: 'peer-b',
    deadlineMs: 15_000,
  },
  'state-request': { kind: 'state-request', fragment: 0, start: 0, end: 500 },
  'state-transfer': {
    kind: 'state-transfer',
    fragment: 0,
    round: 4,
    start: 500,
    end: 510,
    fragmentSize: FRAGMENT_SIZE,
    hash: HASH_B,
    roomTokens: 9_000_000,
    payload: new Uint8Array(new Float32Array(20).map((_, i) => i / 3).buffer),
  },
  rejected: {
    kind: 'rejected',
    about: 'contribution',
    reason: 'stale-round',
    message: 'round 3 of fragment 1 is closed',
    fragment: 1,
    round: 3,
  },
  leave: { kind: 'leave', reason: 'SIGINT' },
  'corpus-request': { kind: 'corpus-request', fingerprint: '4096:0badf00d', start: 1024, end: 2048 },
  'corpus-transfer': {
    kind: 'corpus-transfer',
    fingerprint: '4096:0badf00d',
    start: 1024,
    end: 1030,
    payload: new TextEncoder().encode('Call m'),
  },
  pipe: {
    kind: 'pipe',
    what: 'act',
    group: 1,
    version: 3,
    step: 41,
    micro: 2,
    dtype: 'bf16',
    values: 6,
    targets: 2,
    payload: new Uint8Array(6 * 2 + 2 * 4).fill(7),
  },
  'dataset-request': {
    kind: 'dataset-request',
    manifest: MANIFEST_HASH,
    file: 'train-00003.txt',
    start: 65536,
    end: 131072,
  },
  'dataset-transfer': {
    kind: 'dataset-transfer',
    manifest: MANIFEST_HASH,
    file: 'manifest.json',
    start: 0,
    end: 6,
    total: 1500,
    payload: new TextEncoder().encode('{"form'),
  },
};

/** Field values for a hand-built message; unset ones default to a well-formed hello's. */
export interface ForgeParts {
  magic?: Uint8Array;
  major?: number;
  minor?: number;
  kindId?: number;
  flags?: number;
  runId?: number;
  round?: number;
  fragment?: number;
  shard?: number;
  codecId?: number;
  reserved?: number;
  weight?: number;
  /** The JSON part: text (UTF-8 encoded here), raw bytes, or a value to stringify. */
  json?: string | Uint8Array | object;
  payload?: Uint8Array;
  /** Override the declared lengths (to lie about them). */
  jsonLength?: number;
  payloadLength?: number;
}

/**
 * Builds messages byte by byte, independently of wire.ts (its own hash code), so the tests check
 * the documented layout rather than the encoder against itself.
 */
export async function createForger() {
  const { createXXHash3 } = await import('hash-wasm');
  const hasher = await createXXHash3();
  const reseal = (bytes: Uint8Array): Uint8Array => {
    hasher.init();
    hasher.update(bytes.subarray(0, 40));
    hasher.update(bytes.subarray(48));
    bytes.set(hasher.digest('binary'), 40);
    return bytes;
  };
  const forge = (parts: ForgeParts): Uint8Array => {
    const json =
      parts.json instanceof Uint8Array
        ? parts.json
        : new TextEncoder().encode(
            typeof parts.json === 'string' ? parts.json : JSON.stringify(parts.json ?? SAMPLE_HELLO_BODY),
          );
    const payload = parts.payload ?? new Uint8Array(0);
    const bytes = new Uint8Array(48 + json.length + payload.length);
    const view = new DataView(bytes.buffer);
    bytes.set(parts.magic ?? Uint8Array.of(0x53, 0x48, 0x4f, 0x4c), 0);
    view.setUint8(4, parts.major ?? 1);
    view.setUint8(5, parts.minor ?? 0);
    view.setUint8(6, parts.kindId ?? 1);
    view.setUint8(7, parts.flags ?? 0);
    view.setUint32(8, parts.runId ?? 0, true);
    view.setUint32(12, parts.round ?? 0xffff_ffff, true);
    view.setUint16(16, parts.fragment ?? 0xffff, true);
    view.setUint16(18, parts.shard ?? 0xffff, true);
    view.setUint8(20, parts.codecId ?? 0xff);
    view.setUint8(21, parts.reserved ?? 0);
    view.setFloat64(24, parts.weight ?? 0, true);
    view.setUint32(32, parts.jsonLength ?? json.length, true);
    view.setUint32(36, parts.payloadLength ?? payload.length, true);
    bytes.set(json, 48);
    bytes.set(payload, 48 + json.length);
    return reseal(bytes);
  };
  return { forge, reseal };
}

const SAMPLE_HELLO_BODY = (() => {
  const { kind: _kind, ...body } = SAMPLES.hello;
  return body;
})();
