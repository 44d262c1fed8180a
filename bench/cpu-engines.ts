/**
 * bench:engine's CPU section: Shoal's CPU engine against PyTorch (eager, its BLAS) at 1 and 2
 * threads, and TF.js-WASM on nano, on the same model, init, batches and step (forward, backward,
 * clipping at 1.0, AdamW 0.9/0.95 with decay 0.1 on 2-D tensors, lr 1e-3).
 *
 * Engines take turns within one run: after a warm-up, each round runs `steps` steps of every
 * engine in an order rotated each round; an engine's figure is the median of its runs' medians,
 * so a burst of load from whoever shares the machine moves one run, not the result.
 * Needs no GPU. PyTorch runs in torch_step.py child processes, one per thread count.
 */
import { PRESETS, trainingStepFlops } from '../packages/model/src/config.ts';
import { CpuTrainer } from '../packages/model/src/cpu/trainer.ts';
import { initParameters } from '../packages/model/src/init.ts';
import { buildLayout } from '../packages/model/src/layout.ts';
import { defaultTrainConfig } from '../packages/model/src/train-config.ts';
import {
  type CpuShape,
  type CpuTableRow,
  formatCpuTable,
  fullSquareStepFlops,
  roundOrder,
  summariseRuns,
} from './cpu-compare.ts';
import { benchBatches, measureTfjsStep } from './tfjs.ts';
import {
  pythonCandidates,
  type StepSamples,
  startTorch,
  TORCH_INSTALL_HINT,
  type TorchChild,
  type TorchHello,
} from './torch-child.ts';

export interface CpuComparisonOptions {
  shapes: CpuShape[];
  /** PyTorch's thread counts (torch.set_num_threads). */
  threads: number[];
  /** Shoal's thread counts (CpuBackendOptions.threads). */
  shoalThreads: number[];
  rounds: number;
  /** Steps per engine per round. */
  steps: number;
  /** Untimed steps per engine first; their losses are compared across engines. */
  warmup: number;
  torch: boolean;
  /** The Python to run torch_step.py with (else SHOAL_PYTHON, python3, /usr/bin/python3). */
  python?: string;
  tfjs: boolean;
}

/** Per shape: FLOP counts and the losses every engine saw in its warm-up (same init, same batches). */
export interface CpuShapeReport extends CpuShape {
  parameters: number;
  /** trainingStepFlops: causal attention. */
  flops: number;
  /** What a step computes with the whole T×T attention square (Shoal today, eager PyTorch). */
  fullSquareFlops: number;
  /** FLOPs PyTorch's profiler counted in one step (mm, addmm, bmm), or null. */
  torchProfilerFlops: number | null;
  /** Each engine's warm-up losses, keyed "Shoal 1t", "PyTorch 2t", … */
  warmupLosses: Record<string, number[]>;
  /** Largest |loss − Shoal 1t's loss| over the warm-up steps, per engine. */
  maxLossDifference: Record<string, number>;
}

export interface CpuComparison {
  rows: CpuTableRow[];
  shapes: CpuShapeReport[];
  torch: TorchHello | null;
  /** Why PyTorch did not run, where it did not. */
  torchMissing?: string;
  rounds: number;
  steps: number;
  warmup: number;
  node: string;
}

/** Constant, as the GPU section's step timing uses. */
const LR = 1e-3;
/** Distinct batches each engine cycles through (seeded uniform bytes: loss starts near ln 256). */
const BATCHES = 8;
/** First-step losses further apart than this mean the two models are not the same model. */
const FIRST_LOSS_TOLERANCE = 1e-3;
/** An engine at n threads that keeps fewer than this share of n cores busy is warned about. */
const BUSY_SHARE = 0.65;
/** Cores this process may keep busy while it waits for PyTorch (the JSON round trips, GC). */
const IDLE_SHARE = 0.05;

interface Engine {
  engine: 'Shoal' | 'PyTorch';
  threads: number;
  run(steps: number): Promise<StepSamples>;
}

const key = (e: { engine: string; threads: number }) => `${e.engine} ${e.threads}t`;

function shoalEngine(trainer: CpuTrainer, batches: ReturnType<typeof benchBatches>, threads: number): Engine {
  let next = 0;
  return {
    engine: 'Shoal',
    threads,
    async run(steps) {
      const samples: StepSamples = { ms: [], cpuMs: [], losses: [] };
      for (let i = 0; i < steps; i++) {
        const batch = batches[next++ % batches.length] as (typeof batches)[number];
        const cpu = process.cpuUsage();
        const start = performance.now();
        const loss = await trainer.step(batch, LR);
        samples.ms.push(performance.now() - start);
        const used = process.cpuUsage(cpu);
        samples.cpuMs.push((used.user + used.system) / 1000);
        samples.losses.push(loss);
      }
      return samples;
    },
  };
}

async function startTorchChildren(options: CpuComparisonOptions) {
  const children: TorchChild[] = [];
  if (!options.torch) return { children, missing: 'not asked for (--no-torch)' };
  const pythons = pythonCandidates(options.python);
  for (const threads of options.threads) {
    const started = await startTorch(pythons, threads);
    if ('missing' in started) {
      for (const child of children) await child.close();
      return { children: [], missing: TORCH_INSTALL_HINT.replace('%s', started.missing.join('; ')) };
    }
    children.push(started.child);
  }
  return { children };
}

export async function runCpuComparison(options: CpuComparisonOptions): Promise<CpuComparison> {
  const { shapes, rounds, steps, warmup } = options;
  const { children, missing } = await startTorchChildren(options);
  const hello = children[0]?.hello ?? null;
  if (missing && options.torch) console.log(missing);
  if (hello) {
    console.log(
      `PyTorch ${hello.torch} (Python ${hello.python}, ${hello.executable}), BLAS: ${hello.blas ?? 'none found'}`,
    );
    if (!hello.blas?.includes('openblas')) {
      console.log('  not OpenBLAS: with the reference BLAS PyTorch is several times slower, not a fair anchor');
    }
  }
  const rows: CpuTableRow[] = [];
  const reports: CpuShapeReport[] = [];
  try {
    for (const shape of shapes) {
      const { row, report } = await compareShape(shape, options, children);
      rows.push(...row);
      reports.push(report);
    }
  } finally {
    for (const child of children) await child.close();
  }
  console.log(`\nCPU engines, medians of ${rounds} alternated runs of ${steps} steps (after ${warmup} warm-up)`);
  console.log(formatCpuTable(rows));
  return {
    rows,
    shapes: reports,
    torch: hello,
    ...(missing ? { torchMissing: missing } : {}),
    rounds,
    steps,
    warmup,
    node: process.version,
  };
}

async function compareShape(shape: CpuShape, options: CpuComparisonOptions, children: TorchChild[]) {
  const { preset, B, T } = shape;
  const config = PRESETS[preset];
  const layout = buildLayout(config);
  const train = defaultTrainConfig({ batchSize: B, seqLen: T });
  const params = initParameters(layout, 1337);
  const batches = benchBatches(config, B, T, BATCHES);
  const flops = trainingStepFlops(config, B, T);
  const label = `${preset} ${B}×${T}`;
  console.log(`\n${label}: ${layout.size} parameters, ${(flops / 1e9).toFixed(2)} GFLOP per step`);

  const trainers: CpuTrainer[] = [];
  const engines: Engine[] = [];
  for (const threads of options.shoalThreads) {
    const trainer = new CpuTrainer(config, train, params.slice(), { threads });
    trainers.push(trainer);
    await trainer.ready();
    const { count, note } = trainer.threads;
    if (count !== threads) throw new Error(`Shoal's CPU engine runs ${count} threads, not ${threads}: ${note}`);
    engines.push(shoalEngine(trainer, batches, threads));
  }
  for (const [i, child] of children.entries()) {
    await child.setup({ config, layout, B, T, params, batches, train, lr: LR });
    engines.push({ engine: 'PyTorch', threads: options.threads[i] as number, run: (n) => child.run(n) });
  }

  // Warm-up, and the check that every engine trains the same model: same init, same batches.
  const warmupLosses: Record<string, number[]> = {};
  for (const engine of engines) warmupLosses[key(engine)] = (await engine.run(options.warmup)).losses;
  const reference = warmupLosses[key(engines[0] as Engine)] ?? [];
  const maxLossDifference: Record<string, number> = {};
  for (const engine of engines.slice(1)) {
    const losses = warmupLosses[key(engine)] ?? [];
    maxLossDifference[key(engine)] = Math.max(
      ...losses.map((loss, i) => Math.abs(loss - (reference[i] ?? Number.NaN))),
    );
  }
  const firstLosses = engines.map((e) => `${key(e)} ${warmupLosses[key(e)]?.[0]?.toFixed(5)}`).join(', ');
  console.log(`  first loss (ln ${config.vocabSize} = ${Math.log(config.vocabSize).toFixed(5)}): ${firstLosses}`);
  for (const [name, difference] of Object.entries(maxLossDifference)) {
    console.log(
      `  ${name}: largest |Δloss| against ${key(engines[0] as Engine)} over ${options.warmup} steps ${difference.toExponential(1)}`,
    );
    const first = Math.abs((warmupLosses[name]?.[0] ?? Number.NaN) - (reference[0] ?? Number.NaN));
    if (!(first <= FIRST_LOSS_TOLERANCE)) {
      console.log(`  WARNING: ${name}'s first loss differs by ${first}: the engines do not compute the same model`);
    }
  }

  const fullSquareFlops = fullSquareStepFlops(config, B, T);
  const torchProfilerFlops = children[0] ? await children[0].flops() : null;
  if (torchProfilerFlops !== null) {
    console.log(
      `  FLOPs per step: trainingStepFlops ${(flops / 1e9).toFixed(3)} G (causal attention); with the whole T×T ` +
        `square ${(fullSquareFlops / 1e9).toFixed(3)} G; PyTorch's profiler counted ${(torchProfilerFlops / 1e9).toFixed(3)} G`,
    );
  }

  const runs = new Map<Engine, StepSamples[]>(engines.map((e) => [e, []]));
  // This process's CPU time while PyTorch runs: Shoal's idle threads must leave the cores alone.
  const idle = { cpuMs: 0, wallMs: 0 };
  for (let round = 0; round < options.rounds; round++) {
    const line: string[] = [];
    for (const engine of roundOrder(engines, round)) {
      const cpu = process.cpuUsage();
      const start = performance.now();
      const samples = await engine.run(options.steps);
      if (engine.engine !== 'Shoal') {
        const used = process.cpuUsage(cpu);
        idle.cpuMs += (used.user + used.system) / 1000;
        idle.wallMs += performance.now() - start;
      }
      runs.get(engine)?.push(samples);
      line.push(`${key(engine)} ${summariseRuns([samples]).msPerStep.toFixed(1)}`);
    }
    console.log(`  round ${round + 1}: ${line.join(', ')} ms`);
  }
  for (const trainer of trainers) trainer.destroy();
  const idleShare = idle.wallMs > 0 ? idle.cpuMs / idle.wallMs : 0;
  if (idleShare > IDLE_SHARE) {
    console.log(
      `  WARNING: this process kept ${idleShare.toFixed(2)} cores busy while PyTorch ran (Shoal's threads spinning?)`,
    );
  }
  const row: CpuTableRow[] = engines.map((engine) => ({
    preset,
    B,
    T,
    flops,
    engine: engine.engine,
    threads: engine.threads,
    ...summariseRuns(runs.get(engine) ?? []),
  }));
  // Fewer busy cores than threads: another process holds a core, so the figure is contention.
  for (const r of row.filter((r) => r.threads > 1 && r.coresBusy < BUSY_SHARE * r.threads)) {
    console.log(
      `  WARNING: ${r.engine} at ${r.threads} threads kept ${r.coresBusy.toFixed(2)} cores busy: is the machine shared?`,
    );
  }

  // TF.js-WASM as before: nano's 1,024-token step, measured on its own after the rounds (about 0.4 s a step).
  if (options.tfjs && preset === 'nano' && B === 16 && T === 64) {
    const cpu = process.cpuUsage();
    const start = performance.now();
    const wasm = await measureTfjsStep({ backend: 'wasm', config, B, T, warmup: 1, steps: options.steps });
    const used = process.cpuUsage(cpu);
    const coresBusy = (used.user + used.system) / 1000 / (performance.now() - start);
    console.log(`  ${wasm.device}: ${wasm.msPerStep.toFixed(1)} ms per step, first loss ${wasm.firstLoss.toFixed(5)}`);
    row.push({
      preset,
      B,
      T,
      flops,
      engine: 'TF.js-WASM',
      threads: 1,
      msPerStep: wasm.msPerStep,
      runMedians: [],
      coresBusy,
      alone: true,
    });
    warmupLosses['TF.js-WASM 1t'] = wasm.losses.slice(0, 1);
  }
  console.log(formatCpuTable(row));

  const report: CpuShapeReport = {
    ...shape,
    parameters: layout.size,
    flops,
    fullSquareFlops,
    torchProfilerFlops,
    warmupLosses,
    maxLossDifference,
  };
  return { row, report };
}
