/**
 * What the low-rank codec's numerical core (packages/diloco/src/lowrank, docs/lowrank.md) costs on
 * the CPU, per round, for every 2-D tensor of a preset: a worker's `factorFor` (error feedback,
 * the projection, the factor's fp4 round trip and the reconstruction the residual needs) and a
 * replica's `adopt` (the reconstruction and the next basis), beside one inner step of the CPU
 * engine on the same preset. Throughput is MB/s of f32 Δ input.
 *
 *   node --import tsx --import ./bench/register-raw.mjs bench/lowrank.ts [--preset small]
 *     [--ranks 4,16] [--batch 16] [--seq 256] [--inner-steps 50] [--repeats 3]
 *
 * Prints a table and one JSON line.
 */
import { parseArgs } from 'node:util';
import { BatchSampler, loadMobyDick, splitCorpus } from '@shoal/data';
import { createCodec } from '../packages/diloco/src/codecs/index.ts';
import { LowRankState } from '../packages/diloco/src/lowrank/index.ts';
import { presetConfig } from '../packages/model/src/config.ts';
import { CpuTrainer } from '../packages/model/src/cpu/trainer.ts';
import { initParameters } from '../packages/model/src/init.ts';
import { buildLayout } from '../packages/model/src/layout.ts';
import { defaultTrainConfig } from '../packages/model/src/train-config.ts';

const { values: args } = parseArgs({
  options: {
    preset: { type: 'string', default: 'small' },
    ranks: { type: 'string', default: '4,16' },
    batch: { type: 'string', default: '16' },
    seq: { type: 'string', default: '256' },
    'inner-steps': { type: 'string', default: '50' },
    repeats: { type: 'string', default: '3' },
  },
});
const preset = args.preset ?? 'small';
const model = presetConfig(preset);
const layout = buildLayout(model);
const repeats = Number(args.repeats);
const H = Number(args['inner-steps']);
const tensors = layout.tensors.filter((t) => t.shape.length === 2);
const fp4 = createCodec('fp4', { blockSize: 64 });
const roundTrip = (factor: Float32Array) => fp4.decode(fp4.encode(factor), factor.length);

/** The best of `repeats` wall times of `run`, ms. */
function best(run: () => void): number {
  let fastest = Number.POSITIVE_INFINITY;
  for (let i = 0; i < repeats; i++) {
    const started = performance.now();
    run();
    fastest = Math.min(fastest, performance.now() - started);
  }
  return fastest;
}

// One inner step of the CPU engine at the same preset (after one warm-up step).
const seqLen = Math.min(Number(args.seq), model.blockSize);
const batchSize = Number(args.batch);
const train = defaultTrainConfig({ batchSize, seqLen, totalSteps: 100 });
const trainer = new CpuTrainer(model, train, initParameters(layout, 1));
const sampler = new BatchSampler(splitCorpus(loadMobyDick()).train, { batchSize, seqLen, seed: 1 });
await trainer.step(sampler.next(), 1e-3);
let stepMs = Number.POSITIVE_INFINITY;
for (let i = 0; i < 2; i++) {
  const started = performance.now();
  await trainer.step(sampler.next(), 1e-3);
  stepMs = Math.min(stepMs, performance.now() - started);
}
trainer.destroy();

const rows: Record<string, number | string>[] = [];
console.log(
  `${preset}: ${tensors.length} 2-D tensors, ${(tensors.reduce((n, t) => n + t.size, 0) / 1e6).toFixed(2)}M values; ` +
    `one CPU inner step (${batchSize}×${seqLen}) ${stepMs.toFixed(0)} ms`,
);
console.log('rank   encode ms   decode ms   MB/s (enc+dec)   ÷ one step   ÷ H steps');
for (const rank of (args.ranks ?? '4').split(',').map(Number)) {
  let encodeMs = 0;
  let decodeMs = 0;
  let bytes = 0;
  for (const [i, tensor] of tensors.entries()) {
    const [n, k] = tensor.shape as [number, number];
    const r = Math.min(rank, n, k);
    const delta = Float32Array.from({ length: n * k }, (_, j) => Math.sin(j * 0.37 + i) * 1e-3);
    const state = new LowRankState({ n, k, rank: r, seed: i + 1 });
    let factor: Float32Array = new Float32Array(0);
    encodeMs += best(() => {
      factor = state.factorFor(delta, roundTrip);
    });
    const averaged = roundTrip(factor);
    decodeMs += best(() => {
      // adopt moves the state on: time it on a fresh copy each repeat
      const replica = new LowRankState({ n, k, rank: r, seed: i + 1 });
      replica.adopt(averaged);
    });
    bytes += n * k * 4;
  }
  const totalMs = encodeMs + decodeMs;
  rows.push({ preset, rank, encodeMs, decodeMs, mbPerSecond: bytes / 1e6 / (totalMs / 1000), stepMs, innerSteps: H });
  console.log(
    `${String(rank).padEnd(7)}${encodeMs.toFixed(1).padStart(9)}${decodeMs.toFixed(1).padStart(12)}` +
      `${(bytes / 1e6 / (totalMs / 1000)).toFixed(0).padStart(17)}` +
      `${`${((100 * totalMs) / stepMs).toFixed(1)}%`.padStart(13)}${`${((100 * totalMs) / (H * stepMs)).toFixed(2)}%`.padStart(12)}`,
  );
}
console.log(JSON.stringify({ bench: 'lowrank', preset, rows }));
