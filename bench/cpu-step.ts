/**
 * Milliseconds per training step of the CPU backend (CpuTrainer: forward, backward, clip, AdamW)
 * on Moby Dick batches, and where one step's time goes, kernel by kernel:
 *
 *   node --import tsx --import ./bench/register-raw.mjs bench/cpu-step.ts [--presets nano,tiny] [--steps 30] [--warmup 5]
 *        [--threads 1] [--no-relaxed] [--js] [--polymorphic]
 *
 * Shapes: nano B 16 × T 64 and tiny B 8 × T 128 (1,024 tokens each). Wall time is the figure
 * that matters; the CPU time beside it (process.cpuUsage, all threads) tells, on one thread, how
 * much of a slow step was other processes sharing the cores: on a shared machine, run it twice
 * and take the best. `--threads N` splits the kernels over N threads (CpuBackendOptions.threads);
 * `--no-relaxed` keeps the matmul off relaxed SIMD's fused multiply-adds. `--js` runs the float32 model on the kernels' JS references instead of
 * WebAssembly SIMD (what a JavaScript engine without WebAssembly SIMD gets, and the backend as it
 * was before the SIMD kernels). `--polymorphic` first runs a float64 CpuGpt forward and backward,
 * as the gradient-check tests do in the same process, so the JS kernels have seen both array
 * types before the float32 trainer is timed (it matters only with `--js`). The profile runs
 * forward + backward with every kernel wrapped in a timer (plus gradNorm and AdamW timed
 * directly); its total is a little above the step time (timer overhead, ~100 calls a step).
 * Prints a table per shape and one JSON line.
 */
import { parseArgs } from 'node:util';
import { BatchSampler, loadMobyDick, splitCorpus } from '@shoal/data';
import { clipScale, gradNorm } from '@shoal/gpu';
import { PRESETS, type PresetName } from '../packages/model/src/config.ts';
import { AdamWRuns } from '../packages/model/src/cpu/adamw-runs.ts';
import { CpuGpt } from '../packages/model/src/cpu/gpt.ts';
import type { CpuKernels } from '../packages/model/src/cpu/kernels.ts';
import { CpuTrainer } from '../packages/model/src/cpu/trainer.ts';
import { initParameters } from '../packages/model/src/init.ts';
import { buildLayout } from '../packages/model/src/layout.ts';
import { defaultTrainConfig } from '../packages/model/src/train-config.ts';
import { measureSimdCeiling } from './simd-ceiling.ts';

const { values: args } = parseArgs({
  options: {
    presets: { type: 'string', default: 'nano,tiny' },
    steps: { type: 'string', default: '30' },
    warmup: { type: 'string', default: '5' },
    polymorphic: { type: 'boolean', default: false },
    js: { type: 'boolean', default: false },
    threads: { type: 'string', default: '1' },
    'no-relaxed': { type: 'boolean', default: false },
  },
});
const steps = Number(args.steps);
const threads = Number(args.threads);
const engine = { simd: !args.js, threads, relaxed: !args['no-relaxed'] };
const warmup = Number(args.warmup);
/** Batch shape per preset: 1,024 tokens a step, as the convergence test and the simulator use. */
const SHAPES: Record<string, { B: number; T: number }> = { nano: { B: 16, T: 64 }, tiny: { B: 8, T: 128 } };

if (args.polymorphic) {
  // What the float64 gradient check does: the same kernels, on Float64Array.
  const config = { nLayer: 2, nHead: 2, nEmbd: 8, blockSize: 8, vocabSize: 11 };
  const model = new CpuGpt<Float64Array>(config, 2, 5, Float64Array);
  const params = Float64Array.from(initParameters(model.layout, 1));
  const tokens = Int32Array.from({ length: 10 }, (_, i) => i % 11);
  for (let i = 0; i < 50; i++) {
    model.forward(params, tokens, tokens);
    model.backward(params, new Float64Array(model.layout.size));
  }
}

const { train } = splitCorpus(loadMobyDick());

interface OpTime {
  calls: number;
  ms: number;
  flops: number;
}

/** `kernels` with each call timed into `times`, keyed by kernel (and shape, for matmuls). */
function timedKernels(times: Map<string, OpTime>, kernels: CpuKernels<Float32Array>): CpuKernels<Float32Array> {
  const wrapped = {} as Record<string, unknown>;
  for (const [name, kernel] of Object.entries(kernels) as [string, (...a: unknown[]) => unknown][]) {
    wrapped[name] = (...a: unknown[]) => {
      let key = name;
      let flops = 0;
      if (name.startsWith('matmul')) {
        // forward (out, inp, weight, bias, N, C, OC); backward (dinp, dw, db, dout, inp, weight, N, C, OC)
        const [N, C, OC] = a.slice(-3) as [number, number, number];
        key = `${name} ${N}×${C}→${OC}`;
        flops = (name === 'matmulForward' ? 2 : 4) * N * C * OC;
      }
      const start = performance.now();
      const result = kernel(...a);
      const ms = performance.now() - start;
      const entry = times.get(key) ?? { calls: 0, ms: 0, flops: 0 };
      entry.calls++;
      entry.ms += ms;
      entry.flops += flops;
      times.set(key, entry);
      return result;
    };
  }
  return wrapped as unknown as CpuKernels<Float32Array>;
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] as number;
}

const ceiling = measureSimdCeiling();
console.log(
  ceiling === null
    ? 'SIMD ceiling: no relaxed SIMD here (the matmul multiplies and adds separately)'
    : `SIMD ceiling: ${ceiling.toFixed(1)} GFLOP/s a thread (f32x4 fused multiply-adds, no memory traffic)`,
);
const results: Record<string, unknown>[] = [];
for (const preset of (args.presets ?? '').split(',') as PresetName[]) {
  const config = PRESETS[preset];
  const shape = SHAPES[preset];
  if (!config || !shape) throw new Error(`no preset/shape for "${preset}": choose from ${Object.keys(SHAPES)}`);
  const { B, T } = shape;
  const settings = defaultTrainConfig({ batchSize: B, seqLen: T, seed: 1 });
  const layout = buildLayout(config);
  const sampler = new BatchSampler(train, { batchSize: B, seqLen: T, seed: 1 });
  const batches = Array.from({ length: warmup + steps }, () => sampler.next());

  // Whole steps, as `shoal train` and the simulator run them.
  const trainer = new CpuTrainer(config, settings, initParameters(layout, 1), engine);
  await trainer.ready();
  if (trainer.threads.note) console.log(`threads: ${trainer.threads.note}`);
  const stepMs: number[] = [];
  const stepCpuMs: number[] = [];
  for (const [i, batch] of batches.entries()) {
    const cpu = process.cpuUsage();
    const start = performance.now();
    await trainer.step(batch, 1e-3);
    const wall = performance.now() - start;
    const { user, system } = process.cpuUsage(cpu);
    if (i >= warmup) {
      stepMs.push(wall);
      stepCpuMs.push((user + system) / 1000);
    }
  }

  // One forward + backward with every kernel timed, averaged over `reps` steps after warm-up.
  const times = new Map<string, OpTime>();
  trainer.destroy();
  const model = new CpuGpt<Float32Array>(config, B, T, Float32Array, {
    ...engine,
    extraFloats: 4 * (layout.size + 4),
    wrapKernels: (kernels) => timedKernels(times, kernels),
  });
  await model.ready;
  // As CpuCompute keeps them: in the kernels' memory, with the SIMD optimizer, where it has one.
  const vector = () => (model.optimizer ? model.allocate(layout.size) : new Float32Array(layout.size));
  const [params, grads, m, v] = [vector(), vector(), vector(), vector()];
  params.set(initParameters(layout, 1));
  const runs = new AdamWRuns(layout, model.optimizer);
  runs.point({ params, grads, m, v });
  const reps = Math.max(3, Math.min(steps, 10));
  const optimizer = { calls: 0, ms: 0, flops: 0 };
  for (let i = 0; i < warmup + reps; i++) {
    if (i === warmup) {
      times.clear();
      optimizer.ms = 0;
    }
    const batch = batches[i % batches.length] as (typeof batches)[number];
    model.forward(params, batch.inputs, batch.targets);
    model.backward(params, grads);
    const start = performance.now();
    const scale = clipScale(model.optimizer ? model.optimizer.gradNorm(grads) : gradNorm(grads), 1);
    runs.update(settings, 1e-3, i + 1, scale);
    optimizer.ms += performance.now() - start;
  }
  times.set('gradNorm + AdamW', { ...optimizer, calls: reps });
  const profile = [...times.entries()]
    .map(([op, t]) => ({
      op,
      calls: t.calls / reps,
      ms: t.ms / reps,
      ...(t.flops ? { gflops: t.flops / t.ms / 1e6 } : {}),
    }))
    .sort((a, b) => b.ms - a.ms);
  const profileMs = profile.reduce((sum, p) => sum + p.ms, 0);
  model.destroy();

  const best = Math.min(...stepMs);
  const med = median(stepMs);
  const cpuMed = median(stepCpuMs);
  console.log(
    `${preset} [${model.backendName}, ${model.threads.count} thread${model.threads.count > 1 ? 's' : ''}] (L${config.nLayer} H${config.nHead} C${config.nEmbd} V${config.vocabSize}), B ${B} × T ${T}: ` +
      `${med.toFixed(1)} ms/step median, ${best.toFixed(1)} best, ${cpuMed.toFixed(1)} CPU ms median, ` +
      `${((B * T) / (best / 1000)).toFixed(0)} tokens/s at best (${steps} steps after ${warmup} warm-up)`,
  );
  console.log(
    `  ${'kernel'.padEnd(34)} ${'calls'.padStart(5)} ${'ms/step'.padStart(8)} ${'share'.padStart(6)} GFLOP/s  of ceiling`,
  );
  for (const p of profile) {
    console.log(
      `  ${p.op.padEnd(34)} ${String(p.calls).padStart(5)} ${p.ms.toFixed(2).padStart(8)} ` +
        `${((100 * p.ms) / profileMs).toFixed(1).padStart(5)}% ${p.gflops ? p.gflops.toFixed(2).padStart(7) : ''}` +
        (p.gflops && ceiling
          ? `  ${((100 * p.gflops) / (ceiling * model.threads.count)).toFixed(0).padStart(3)}%`
          : ''),
    );
  }
  console.log(`  ${'total (timed kernels)'.padEnd(34)} ${''.padStart(5)} ${profileMs.toFixed(2).padStart(8)}`);
  results.push({
    preset,
    backend: model.backendName,
    threads: model.threads.count,
    B,
    T,
    msPerStep: { median: Number(med.toFixed(2)), best: Number(best.toFixed(2)), cpuMedian: Number(cpuMed.toFixed(2)) },
    tokensPerSecond: Math.round((B * T) / (best / 1000)),
    profile: profile.map((p) => ({
      ...p,
      ms: Number(p.ms.toFixed(3)),
      ...(p.gflops ? { gflops: Number(p.gflops.toFixed(2)) } : {}),
    })),
  });
}
console.log(
  JSON.stringify({
    bench: 'cpu-step',
    node: process.version,
    polymorphic: args.polymorphic,
    js: args.js,
    relaxed: engine.relaxed,
    simdCeilingGflops: ceiling === null ? null : Number(ceiling.toFixed(1)),
    steps,
    warmup,
    results,
  }),
);
