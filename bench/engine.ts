/**
 * The engine benchmark (`npm run bench:engine`):
 *   1. every WebGPU kernel family at each preset's shapes, and
 *   2. a whole training step per preset against TensorFlow.js's WebGPU backend (bench/engine-gpu.ts);
 *   3. the CPU engine against PyTorch (eager, OpenBLAS; when python3 with torch is installed) at
 *      1 and 2 threads, alternated in one run, and TF.js-WASM on nano (bench/cpu-engines.ts).
 * --cpu-only runs section 3 alone and needs no GPU. Prints tables, then one JSON line.
 *
 *   npm run bench:engine -- [--presets nano,tiny,small,base] [--steps N] [--warmup N]
 *                           [--max-step-seconds 30] [--no-tfjs] [--out FILE.json]
 *                           [--cpu-only] [--cpu-shapes nano:16x64,tiny:8x128,tiny:32x128]
 *                           [--threads 1,2] [--shoal-threads 1,2] [--rounds 5] [--cpu-steps 5]
 *                           [--cpu-warmup 3] [--no-torch] [--python /usr/bin/python3]
 */
import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { PRESETS, type PresetName } from '../packages/model/src/config.ts';
import { DEFAULT_CPU_SHAPES, parseCpuShapes, parseThreadList } from './cpu-compare.ts';
import { runCpuComparison } from './cpu-engines.ts';
import { type GpuSections, printKernels, printSteps, runGpuSections } from './engine-gpu.ts';

const { values: args } = parseArgs({
  options: {
    presets: { type: 'string', default: 'nano,tiny,small,base' },
    steps: { type: 'string' },
    warmup: { type: 'string' },
    'max-step-seconds': { type: 'string', default: '30' },
    'no-tfjs': { type: 'boolean', default: false },
    out: { type: 'string' },
    'cpu-only': { type: 'boolean', default: false },
    'cpu-shapes': { type: 'string', default: DEFAULT_CPU_SHAPES },
    /** Every engine's thread counts (PyTorch's torch.set_num_threads, Shoal's CpuBackendOptions.threads). */
    threads: { type: 'string', default: '1,2' },
    /** Shoal's, when they should differ from PyTorch's. */
    'shoal-threads': { type: 'string' },
    rounds: { type: 'string', default: '5' },
    'cpu-steps': { type: 'string', default: '5' },
    'cpu-warmup': { type: 'string', default: '3' },
    'no-torch': { type: 'boolean', default: false },
    python: { type: 'string' },
  },
});

function count(flag: string, value: string | undefined, min: number): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isInteger(n) || n < min) throw new Error(`--${flag} must be an integer ≥ ${min}, got "${value}"`);
  return n;
}

const presets = (args.presets ?? '').split(',').filter(Boolean) as PresetName[];
for (const name of presets) if (!(name in PRESETS)) throw new Error(`unknown preset ${name}`);
const maxStepSeconds = Number(args['max-step-seconds']);
if (!(maxStepSeconds > 0)) throw new Error(`--max-step-seconds must be positive, got ${args['max-step-seconds']}`);
const cpuOptions = {
  shapes: parseCpuShapes(args['cpu-shapes'] ?? DEFAULT_CPU_SHAPES),
  threads: parseThreadList(args.threads ?? '1,2', '--threads'),
  shoalThreads: parseThreadList(args['shoal-threads'] ?? args.threads ?? '1,2', '--shoal-threads'),
  rounds: count('rounds', args.rounds, 1) ?? 5,
  steps: count('cpu-steps', args['cpu-steps'], 1) ?? 5,
  warmup: count('cpu-warmup', args['cpu-warmup'], 1) ?? 3,
  torch: !args['no-torch'],
  tfjs: !args['no-tfjs'],
  ...(args.python ? { python: args.python } : {}),
};

let gpu: GpuSections | null = null;
if (!args['cpu-only']) {
  const steps = count('steps', args.steps, 1);
  const warmup = count('warmup', args.warmup, 0);
  gpu = await runGpuSections({
    presets,
    maxStepSeconds,
    tfjs: !args['no-tfjs'],
    ...(steps !== undefined ? { steps } : {}),
    ...(warmup !== undefined ? { warmup } : {}),
  });
}
const cpu = await runCpuComparison(cpuOptions);

// The GPU tables again at the end, after the CPU section, so they read together.
if (gpu) {
  printKernels(gpu.adapter, gpu.kernels);
  printSteps(gpu.adapter, gpu.trainingSteps);
}
const result = {
  bench: 'engine',
  ...(gpu
    ? {
        adapter: gpu.adapter,
        timing: gpu.timing,
        steps: gpu.steps,
        warmup: gpu.warmup,
        kernels: gpu.kernels,
        trainingSteps: gpu.trainingSteps,
      }
    : { cpuOnly: true }),
  cpu,
};
console.log(JSON.stringify(result));
if (args.out) writeFileSync(args.out, `${JSON.stringify(result, null, 2)}\n`);
gpu?.destroy();
// Dawn (and TF.js's device) keep the event loop alive.
process.exit(0);
