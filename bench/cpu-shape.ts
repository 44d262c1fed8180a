/**
 * One shape of bench:engine's CPU comparison (bench/cpu-engines.ts runs them all): Shoal's CPU
 * trainer at each thread count and every PyTorch process, from the same init on the same batches;
 * a warm-up whose losses must agree, PyTorch's FLOP count, then the alternated rounds.
 * An engine that throws is dropped from the shape, saying why; the others go on.
 */
import { PRESETS, trainingStepFlops } from '../packages/model/src/config.ts';
import { CpuTrainer } from '../packages/model/src/cpu/trainer.ts';
import { initParameters } from '../packages/model/src/init.ts';
import { buildLayout } from '../packages/model/src/layout.ts';
import { defaultTrainConfig } from '../packages/model/src/train-config.ts';
import { type CpuShape, type CpuTableRow, fullSquareStepFlops, roundOrder, summariseRuns } from './cpu-compare.ts';
import { benchBatches } from './tfjs.ts';
import type { StepSamples, TorchChild } from './torch-child.ts';

/** Per shape: FLOP counts and the losses every engine saw in its warm-up (same init, same batches). */
export interface CpuShapeReport extends CpuShape {
  parameters: number;
  /** trainingStepFlops: causal attention. */
  flops: number;
  /** What a step computes with the whole T×T attention square (Shoal today, eager PyTorch). */
  fullSquareFlops: number;
  /** FLOPs PyTorch's profiler counted in one step (mm, addmm, bmm, elementwise add and mul), or null. */
  torchProfilerFlops: number | null;
  /** Each engine's warm-up losses, keyed "Shoal 1t", "PyTorch 2t", … */
  warmupLosses: Record<string, number[]>;
  /** Largest |loss − the first engine's loss| over the warm-up steps, per other engine. */
  maxLossDifference: Record<string, number>;
  /** Engines dropped from this shape, and the error that dropped them. */
  failures: Record<string, string>;
}

export interface ShapeSettings {
  shoalThreads: number[];
  /** The thread count of each PyTorch process, in the same order. */
  torchThreads: number[];
  rounds: number;
  steps: number;
  warmup: number;
}

/** Constant, as the GPU section's step timing uses. */
export const LR = 1e-3;
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

export async function compareShape(shape: CpuShape, settings: ShapeSettings, children: TorchChild[]) {
  const { preset, B, T } = shape;
  const config = PRESETS[preset];
  const layout = buildLayout(config);
  const train = defaultTrainConfig({ batchSize: B, seqLen: T });
  const params = initParameters(layout, 1337);
  const batches = benchBatches(config, B, T, BATCHES);
  const flops = trainingStepFlops(config, B, T);
  console.log(`\n${preset} ${B}×${T}: ${layout.size} parameters, ${(flops / 1e9).toFixed(2)} GFLOP per step`);

  const failures: Record<string, string> = {};
  const engines: Engine[] = [];
  /** Runs `work` for engine `name`; an error drops the engine from this shape instead of ending the run. */
  async function attempt<R>(name: string, work: () => Promise<R>): Promise<R | undefined> {
    try {
      return await work();
    } catch (error) {
      failures[name] = error instanceof Error ? error.message : String(error);
      console.log(`  ${name} failed, dropped from this shape: ${failures[name]}`);
      const index = engines.findIndex((e) => key(e) === name);
      if (index >= 0) engines.splice(index, 1);
      return undefined;
    }
  }

  const trainers: CpuTrainer[] = [];
  for (const threads of settings.shoalThreads) {
    await attempt(key({ engine: 'Shoal', threads }), async () => {
      const trainer = new CpuTrainer(config, train, params.slice(), { threads });
      trainers.push(trainer);
      await trainer.ready();
      const { count, note } = trainer.threads;
      if (count !== threads) throw new Error(`the CPU engine runs ${count} threads, not ${threads}: ${note}`);
      engines.push(shoalEngine(trainer, batches, threads));
    });
  }
  for (const [i, child] of children.entries()) {
    const threads = settings.torchThreads[i] as number;
    await attempt(key({ engine: 'PyTorch', threads }), async () => {
      await child.setup({ config, layout, B, T, params, batches, train, lr: LR });
      engines.push({ engine: 'PyTorch', threads, run: (n) => child.run(n) });
    });
  }

  // Warm-up, and the check that every engine trains the same model: same init, same batches.
  const warmupLosses: Record<string, number[]> = {};
  for (const engine of [...engines]) {
    const samples = await attempt(key(engine), () => engine.run(settings.warmup));
    if (samples) warmupLosses[key(engine)] = samples.losses;
  }
  const maxLossDifference = checkLosses(warmupLosses, config.vocabSize);

  const fullSquareFlops = fullSquareStepFlops(config, B, T);
  const torchEngine = engines.find((e) => e.engine === 'PyTorch');
  const torchChild = torchEngine && children[settings.torchThreads.indexOf(torchEngine.threads)];
  const torchProfilerFlops = torchChild ? ((await attempt(key(torchEngine), () => torchChild.flops())) ?? null) : null;
  if (torchProfilerFlops !== null) {
    console.log(
      `  FLOPs per step: trainingStepFlops ${(flops / 1e9).toFixed(3)} G (causal attention); with the whole T×T ` +
        `square ${(fullSquareFlops / 1e9).toFixed(3)} G; PyTorch's profiler counted ${(torchProfilerFlops / 1e9).toFixed(3)} G`,
    );
  }

  const runs = new Map<Engine, StepSamples[]>(engines.map((e) => [e, []]));
  // This process's CPU time while PyTorch runs: Shoal's idle threads must leave the cores alone.
  const idle = { cpuMs: 0, wallMs: 0 };
  for (let round = 0; round < settings.rounds; round++) {
    const line: string[] = [];
    for (const engine of roundOrder([...engines], round)) {
      const cpu = process.cpuUsage();
      const start = performance.now();
      const samples = await attempt(key(engine), () => engine.run(settings.steps));
      if (!samples) continue;
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
    console.log(`  WARNING: this process kept ${idleShare.toFixed(2)} cores busy while PyTorch ran (Shoal's threads?)`);
  }
  const rows: CpuTableRow[] = engines.map((engine) => ({
    preset,
    B,
    T,
    flops,
    engine: engine.engine,
    threads: engine.threads,
    ...summariseRuns(runs.get(engine) ?? []),
  }));
  // Fewer busy cores than threads: another process holds a core, so the figure is contention.
  for (const r of rows.filter((r) => r.threads > 1 && r.coresBusy < BUSY_SHARE * r.threads)) {
    console.log(`  WARNING: ${key(r)} kept ${r.coresBusy.toFixed(2)} cores busy: is the machine shared?`);
  }
  const report: CpuShapeReport = {
    ...shape,
    parameters: layout.size,
    flops,
    fullSquareFlops,
    torchProfilerFlops,
    warmupLosses,
    maxLossDifference,
    failures,
  };
  return { rows, report };
}

/** Prints the warm-up losses against the first engine's; returns each other engine's largest difference. */
function checkLosses(warmupLosses: Record<string, number[]>, vocabSize: number): Record<string, number> {
  const [[referenceName, reference] = ['', []], ...others] = Object.entries(warmupLosses);
  const firsts = Object.entries(warmupLosses).map(([name, losses]) => `${name} ${losses[0]?.toFixed(5)}`);
  console.log(`  first loss (ln ${vocabSize} = ${Math.log(vocabSize).toFixed(5)}): ${firsts.join(', ')}`);
  const largest: Record<string, number> = {};
  for (const [name, losses] of others) {
    const difference = Math.max(...losses.map((loss, i) => Math.abs(loss - (reference[i] ?? Number.NaN))));
    largest[name] = difference;
    console.log(
      `  ${name}: largest |Δloss| against ${referenceName} over ${losses.length} steps ${difference.toExponential(1)}`,
    );
    const first = Math.abs((losses[0] ?? Number.NaN) - (reference[0] ?? Number.NaN));
    if (!(first <= FIRST_LOSS_TOLERANCE)) {
      console.log(`  WARNING: ${name}'s first loss differs by ${first}: the engines do not compute the same model`);
    }
  }
  return largest;
}
