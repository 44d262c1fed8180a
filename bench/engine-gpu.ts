/**
 * bench:engine's WebGPU sections (bench/engine.ts is the command): on this machine's adapter,
 *   1. every kernel family at each preset's shapes: GFLOP/s (compute-bound) or GB/s (memory-bound);
 *   2. a whole training step (forward, backward, clip, AdamW) per preset: our WebGPU engine
 *      against TensorFlow.js's WebGPU backend on the same adapter, same model, batch and settings.
 * Presets whose step would take longer than maxStepSeconds on this adapter (estimated from the
 * last measured preset's rate and the FLOP ratio) are skipped and say so.
 */
import { acquireGpu } from '../packages/gpu/src/device.node.ts';
import { formatAdapter } from '../packages/gpu/src/report.ts';
import { PRESETS, type PresetName, trainingStepFlops } from '../packages/model/src/config.ts';
import { GpuTrainer } from '../packages/model/src/gpu/trainer.ts';
import { initParameters } from '../packages/model/src/init.ts';
import { buildLayout } from '../packages/model/src/layout.ts';
import { defaultTrainConfig } from '../packages/model/src/train-config.ts';
import { benchKernels, createGpuBench, type KernelRow, printKernels } from './gpu-kernels.ts';
import { measureTfjsStep, type TfjsStepResult } from './tfjs.ts';
import { benchBatches, PRESET_BATCH, timeSteps } from './train-steps.ts';

export { type KernelRow, printKernels };

export interface GpuSectionOptions {
  presets: PresetName[];
  /** Timed steps and warm-up per preset; fewer by default on a software adapter. */
  steps?: number;
  warmup?: number;
  maxStepSeconds: number;
  tfjs: boolean;
}

export interface StepRow {
  preset: string;
  B: number;
  T: number;
  parameters: number;
  shoalMsPerStep?: number;
  shoalTokensPerSecond?: number;
  shoalGflops?: number;
  tfjsMsPerStep?: number;
  tfjsTokensPerSecond?: number;
  ratio?: number;
  firstLossDifference?: number;
  skipped?: string;
}

export interface GpuSections {
  adapter: string;
  timing: string;
  steps: number;
  warmup: number;
  kernels: KernelRow[];
  trainingSteps: StepRow[];
  destroy(): void;
}

const fixed = (value: number | undefined, digits = 1) => (value === undefined ? '—' : value.toFixed(digits));

export function printSteps(adapter: string, rows: StepRow[]): void {
  console.log(`\nTraining step (forward + backward + clip + AdamW), ${adapter}`);
  console.log(
    'preset  params      B×T        Shoal ms   tokens/s  GFLOP/s   TF.js-WebGPU ms  tokens/s   Shoal ÷ TF.js',
  );
  for (const r of rows) {
    if (r.skipped) {
      console.log(`${r.preset.padEnd(8)}${String(r.parameters).padEnd(12)}skipped: ${r.skipped}`);
      continue;
    }
    console.log(
      `${r.preset.padEnd(8)}${String(r.parameters).padEnd(12)}${`${r.B}×${r.T}`.padEnd(11)}` +
        `${fixed(r.shoalMsPerStep).padStart(9)}${fixed(r.shoalTokensPerSecond, 0).padStart(11)}` +
        `${fixed(r.shoalGflops, 2).padStart(9)}${fixed(r.tfjsMsPerStep).padStart(19)}` +
        `${fixed(r.tfjsTokensPerSecond, 0).padStart(10)}${`${fixed(r.ratio, 2)}×`.padStart(16)}`,
    );
  }
}

// --- training steps -----------------------------------------------------------------------------
/** Acquires the adapter, measures every preset (printing each as it goes) and returns the rows. */
export async function runGpuSections(options: GpuSectionOptions): Promise<GpuSections> {
  const gpu = await acquireGpu();
  const { device, report } = gpu;
  const software = report.isSoftware;
  const steps = options.steps ?? (software ? 4 : 20);
  const warmup = options.warmup ?? (software ? 1 : 5);
  const ctx = await createGpuBench(device, software);
  const { timer } = ctx;
  const adapter = formatAdapter(report);
  console.log(`adapter: ${adapter} (timing: ${timer.method}); steps ${steps} after ${warmup} warm-up`);
  const stepRows: StepRow[] = [];
  let flopRate: number | null = null; // measured FLOP/s of our step, to estimate the larger presets
  for (const preset of options.presets) {
    const config = PRESETS[preset];
    const { B, T } = PRESET_BATCH[preset];
    const layout = buildLayout(config);
    const row: StepRow = { preset, B, T, parameters: layout.size };
    stepRows.push(row);
    const flops = trainingStepFlops(config, B, T);
    if (flopRate !== null && flops / flopRate > options.maxStepSeconds) {
      row.skipped = `about ${(flops / flopRate).toFixed(0)} s per step on this adapter (over --max-step-seconds ${options.maxStepSeconds})`;
      console.log(`${preset}: skipped, ${row.skipped}`);
      continue;
    }
    await benchKernels(ctx, preset, config, B, T);
    const settings = defaultTrainConfig({ batchSize: B, seqLen: T });
    const batches = benchBatches(config, B, T, warmup + steps);
    const trainer = await GpuTrainer.create(device, config, settings, initParameters(layout, 1337));
    const ours = await timeSteps(trainer, batches, warmup, steps);
    trainer.destroy();
    row.shoalMsPerStep = ours.msPerStep;
    row.shoalTokensPerSecond = (B * T * 1000) / ours.msPerStep;
    row.shoalGflops = flops / (ours.msPerStep / 1000) / 1e9;
    flopRate = flops / (ours.msPerStep / 1000);
    if (options.tfjs) {
      const tfjs: TfjsStepResult = await measureTfjsStep({ backend: 'webgpu', config, B, T, warmup, steps });
      row.tfjsMsPerStep = tfjs.msPerStep;
      row.tfjsTokensPerSecond = tfjs.tokensPerSecond;
      row.ratio = tfjs.msPerStep / ours.msPerStep;
      row.firstLossDifference = Math.abs(tfjs.firstLoss - (ours.losses[0] ?? Number.NaN));
    }
    printKernels(
      adapter,
      ctx.kernelRows.filter((k) => k.preset === preset),
    );
    printSteps(adapter, [row]);
  }
  return {
    adapter,
    timing: timer.method,
    steps,
    warmup,
    kernels: ctx.kernelRows,
    trainingSteps: stepRows,
    destroy: () => gpu.destroy(),
  };
}
