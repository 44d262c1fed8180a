/**
 * The low-rank codec's cost per round, as a round uses it (packages/diloco/src/lowrank/fragment.ts),
 * shared by bench/lowrank.ts (Node) and bench/lowrank-page.ts (Chromium), so both time the same
 * code on the same values. No I/O: plain TS on typed arrays.
 *
 * A round, per fragment p of a preset's P sequential fragments (what replica.ts and
 * worker-rounds.ts do):
 *   build:  new FragmentProjection(tensors, m[p], { rank, side }, lowRankSeed(p, round)): per
 *           factored tensor a seeded start, three products of n·k·r (M·G, the power step, the
 *           energy order) and two Gram–Schmidts;
 *   encode: LowRankFeedback.encode(Δ, projection, fp4 round trip) (Δ + e, the projection, the rung
 *           errors, the quantiser's round trip, the reconstruction e needs) then codec.encode;
 *   decode: projection.decode(codec.decode(bytes)) (the dequantised payload, the reconstruction).
 * Each phase's figure is its best over `repeats` rounds of its sum over the fragments (one round
 * of every fragment: the whole model once); `fragmentMs` is the slowest fragment's round alone.
 *
 * Beside it, one inner step of the CPU engine (CpuTrainer: forward, backward, clip, AdamW) on the
 * same preset, the yardstick: compression within 10% of it.
 */
import { randomFloats } from '@shoal/gpu/random';
import { createCodec } from '../packages/diloco/src/codecs/index.ts';
import { buildFragments, type Fragment } from '../packages/diloco/src/fragments.ts';
import {
  FragmentProjection,
  LowRankFeedback,
  lowRankPlan,
  lowRankSeed,
} from '../packages/diloco/src/lowrank/fragment.ts';
import { orthonormalize, seededOrthonormal } from '../packages/diloco/src/lowrank/orthonormal.ts';
import { type LowRankSide, project, reconstruct } from '../packages/diloco/src/lowrank/project.ts';
import { PRESETS, type PresetName } from '../packages/model/src/config.ts';
import { CpuTrainer } from '../packages/model/src/cpu/trainer.ts';
import { initParameters } from '../packages/model/src/init.ts';
import { buildLayout } from '../packages/model/src/layout.ts';
import { defaultTrainConfig } from '../packages/model/src/train-config.ts';

export interface LowRankCase {
  preset: PresetName;
  /** P, sequential fragments. */
  fragmentCount: number;
  rank: number;
  side: LowRankSide;
  repeats: number;
  /** fp4's values per scale (the rounds' default: 1024). */
  blockSize: number;
}

export interface LowRankTiming {
  rank: number;
  side: LowRankSide;
  /** Values in the P fragments (the f32 input of a round: Δ, m). */
  fragmentValues: number;
  /** Of them, in factored tensors. */
  factoredValues: number;
  /** Values in the P payloads (factors plus the dense tensors). */
  payloadValues: number;
  payloadBytes: number;
  buildMs: number;
  encodeMs: number;
  decodeMs: number;
  /** The slowest fragment's round alone (its best build + encode + decode): a round syncs one fragment. */
  fragmentMs: number;
}

/** Where one rank's time goes: each primitive summed over every factored tensor of the P fragments. */
export interface LowRankProfile {
  rank: number;
  /** project right: Δ·Q (n×k by k×r), one product. */
  projectRightMs: number;
  /** project left: Δᵀ·P (k×n by n×r), one product. */
  projectLeftMs: number;
  /** reconstruct: P·Qᵀ in f64 (n×r by r×k), one product, rounded to f32. */
  reconstructMs: number;
  /** seededOrthonormal + orthonormalize of a basis (a build does both), the right side's basis rows. */
  orthonormalizeMs: number;
  /** fp4 encode then decode of a whole right payload (a worker's round trip; codec.encode and decode again). */
  fp4RoundTripMs: number;
}

const fragmentsCache = new Map<string, Fragment[]>();

export function presetFragments(preset: PresetName, fragmentCount: number): Fragment[] {
  const key = `${preset}/${fragmentCount}`;
  let fragments = fragmentsCache.get(key);
  if (!fragments) {
    fragments = buildFragments(buildLayout({ ...PRESETS[preset] }), fragmentCount, 'sequential');
    fragmentsCache.set(key, fragments);
  }
  return fragments;
}

// Nonzero m and Δ of a Δ's scale (the cost does not depend on the values: no branch does)
const valuesCache = new Map<string, Float32Array>();
function values(kind: 'momentum' | 'delta', fragment: Fragment): Float32Array {
  const key = `${kind}/${fragment.index}/${fragment.size}`;
  let v = valuesCache.get(key);
  if (!v) {
    v = randomFloats(fragment.size, (kind === 'momentum' ? 101 : 202) + fragment.index, -1e-3, 1e-3);
    valuesCache.set(key, v);
  }
  return v;
}

/** Wall ms of `run`. */
function timed<T>(run: () => T): [T, number] {
  const started = performance.now();
  const result = run();
  return [result, performance.now() - started];
}

/** One rank and side: `repeats` rounds of every fragment, each phase's best round. */
export function measureLowRank(c: LowRankCase): LowRankTiming {
  const fragments = presetFragments(c.preset, c.fragmentCount);
  const codec = createCodec('fp4', { blockSize: c.blockSize });
  const roundTrip = (payload: Float32Array) => codec.decode(codec.encode(payload), payload.length);
  const spec = { rank: c.rank, side: c.side };
  const feedback = fragments.map((f) => new LowRankFeedback(f.size));
  let buildMs = Number.POSITIVE_INFINITY;
  let encodeMs = Number.POSITIVE_INFINITY;
  let decodeMs = Number.POSITIVE_INFINITY;
  let payloadValues = 0;
  let payloadBytes = 0;
  const fragmentBest = fragments.map(() => Number.POSITIVE_INFINITY);
  for (let round = 1; round <= c.repeats; round++) {
    let build = 0;
    let encode = 0;
    let decode = 0;
    payloadValues = 0;
    payloadBytes = 0;
    for (const fragment of fragments) {
      const p = fragment.index;
      const [projection, b] = timed(
        () => new FragmentProjection(fragment.tensors, values('momentum', fragment), spec, lowRankSeed(p, round)),
      );
      const lowRank = feedback[p] as LowRankFeedback;
      const [bytes, e] = timed(() =>
        codec.encode(lowRank.encode(values('delta', fragment), projection, roundTrip).payload),
      );
      lowRank.commit(); // the residual is nonzero from the second round on, as in a run
      // the averaged payload of P = 1 replica: decodes as any average does
      const [decoded, d] = timed(() => projection.decode(codec.decode(bytes, projection.payloadSize)));
      if (decoded.length !== fragment.size)
        throw new Error(`decode gave ${decoded.length} values, not ${fragment.size}`);
      fragmentBest[p] = Math.min(fragmentBest[p] as number, b + e + d);
      build += b;
      encode += e;
      decode += d;
      payloadValues += projection.payloadSize;
      payloadBytes += bytes.length;
    }
    buildMs = Math.min(buildMs, build);
    encodeMs = Math.min(encodeMs, encode);
    decodeMs = Math.min(decodeMs, decode);
  }
  const fragmentValues = fragments.reduce((n, f) => n + f.size, 0);
  const factoredValues = fragments
    .flatMap((f) => lowRankPlan(f.tensors, spec))
    .reduce((n, e) => n + (e.rank > 0 ? e.tensor.size : 0), 0);
  return {
    rank: c.rank,
    side: c.side,
    fragmentValues,
    factoredValues,
    payloadValues,
    payloadBytes,
    buildMs,
    encodeMs,
    decodeMs,
    fragmentMs: Math.max(...fragmentBest),
  };
}

/** The primitives a round is made of, timed alone at one rank (best of `repeats`, summed over tensors). */
export function profileLowRank(c: Omit<LowRankCase, 'side'>): LowRankProfile {
  const fragments = presetFragments(c.preset, c.fragmentCount);
  const codec = createCodec('fp4', { blockSize: c.blockSize });
  const best = (run: () => unknown): number => {
    let fastest = Number.POSITIVE_INFINITY;
    for (let i = 0; i < c.repeats; i++) fastest = Math.min(fastest, timed(run)[1]);
    return fastest;
  };
  const profile: LowRankProfile = {
    rank: c.rank,
    projectRightMs: 0,
    projectLeftMs: 0,
    reconstructMs: 0,
    orthonormalizeMs: 0,
    fp4RoundTripMs: 0,
  };
  for (const fragment of fragments) {
    const delta = values('delta', fragment);
    let payloadSize = 0;
    for (const [t, e] of lowRankPlan(fragment.tensors, { rank: c.rank, side: 'right' }).entries()) {
      payloadSize += e.payloadSize;
      if (e.rank === 0) continue;
      const { offset, size, rows, cols } = e.tensor;
      const part = delta.subarray(offset, offset + size);
      const q = seededOrthonormal(cols, e.rank, t + 1); // k×r
      const p = seededOrthonormal(rows, e.rank, t + 2); // n×r
      profile.projectRightMs += best(() => project(part, rows, cols, q, 'right'));
      profile.projectLeftMs += best(() => project(part, rows, cols, p, 'left'));
      const factor = project(part, rows, cols, q, 'right');
      profile.reconstructMs += best(() => reconstruct(factor, q, 'right', rows, cols));
      profile.orthonormalizeMs += best(() =>
        orthonormalize(seededOrthonormal(cols, e.rank, t + 3), cols, e.rank, t + 4),
      );
    }
    const payload = randomFloats(payloadSize, 303 + fragment.index, -1e-3, 1e-3);
    profile.fp4RoundTripMs += best(() => codec.decode(codec.encode(payload), payload.length));
  }
  return profile;
}

/**
 * Wall ms of one CPU inner step of `preset` on batchSize×seqLen random tokens (the values do not
 * change the work): the best of `steps` after one warm-up step.
 */
export async function cpuStepMs(preset: PresetName, batchSize: number, seqLen: number, steps: number): Promise<number> {
  const model = { ...PRESETS[preset] };
  const layout = buildLayout(model);
  const train = defaultTrainConfig({ batchSize, seqLen: Math.min(seqLen, model.blockSize), totalSteps: 100 });
  const trainer = new CpuTrainer(model, train, initParameters(layout, 1));
  const tokens = (seed: number) => {
    const random = randomFloats(train.batchSize * train.seqLen, seed, 0, model.vocabSize);
    return Int32Array.from(random, Math.floor);
  };
  let fastest = Number.POSITIVE_INFINITY;
  try {
    for (let i = 0; i <= steps; i++) {
      const batch = { inputs: tokens(2 * i + 1), targets: tokens(2 * i + 2) };
      const started = performance.now();
      await trainer.step(batch, 1e-3);
      if (i > 0) fastest = Math.min(fastest, performance.now() - started);
    }
  } finally {
    trainer.destroy();
  }
  return fastest;
}
