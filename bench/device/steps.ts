/**
 * The training-step part: per model shape, Shoal's WebGPU engine (GpuTrainer, the bench:engine
 * loop) against PyTorch on CUDA (torch_step.py --device cuda: SDPA attention, fused AdamW) in
 * fp32 with TF32 off, TF32, and bf16 autocast: the same parameters, batches, clipping and AdamW.
 * Steps are forward + backward + global-norm clip + AdamW; milliseconds per step after a warm-up.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { acquireGpu } from '../../packages/gpu/src/device.node.ts';
import { formatAdapter } from '../../packages/gpu/src/report.ts';
import { trainingStepFlops } from '../../packages/model/src/config.ts';
import { GpuTrainer } from '../../packages/model/src/gpu/trainer.ts';
import { initParameters } from '../../packages/model/src/init.ts';
import { buildLayout } from '../../packages/model/src/layout.ts';
import { defaultTrainConfig } from '../../packages/model/src/train-config.ts';
import {
  pythonCandidates,
  startTorch,
  type TorchChild,
  type TorchHello,
  type TorchPrecision,
  writeParamsFile,
} from '../torch-child.ts';
import { benchBatches, timeSteps } from '../train-steps.ts';
import { errorMessage, type PartOutput } from './output.ts';
import type { DevicePlan, StepShape } from './plan.ts';

export const TORCH_PRECISIONS: TorchPrecision[] = ['fp32', 'tf32', 'bf16'];

export interface EngineTiming {
  msPerStep?: number;
  /** PyTorch: the median of the per-step times (CUDA events). */
  medianMs?: number;
  firstLoss?: number;
  tflops?: number;
  error?: string;
  /** Why it was not measured, where that is no failure (--local runs no PyTorch). */
  skipped?: string;
}

export interface StepRow {
  shape: string;
  config: { nLayer: number; nHead: number; nEmbd: number };
  B: number;
  T: number;
  parameters: number;
  /** FLOPs of one step (trainingStepFlops): the TFLOP/s figures divide by it. */
  flops: number;
  warmup: number;
  steps: number;
  shoal?: EngineTiming;
  torch: Partial<Record<TorchPrecision, EngineTiming>>;
  skipped?: string;
}

export interface StepsPart {
  adapter?: string;
  torch?: TorchHello | { error: string };
  rows: StepRow[];
}

const LR = 1e-3;

async function shoalTiming(device: GPUDevice, shape: StepShape, params: Float32Array, flops: number) {
  const { config, B, T, warmup, steps } = shape;
  const batches = benchBatches(config, B, T, warmup + steps);
  const trainer = await GpuTrainer.create(device, config, defaultTrainConfig({ batchSize: B, seqLen: T }), params);
  try {
    const { msPerStep, losses } = await timeSteps(trainer, batches, warmup, steps, LR);
    return { msPerStep, firstLoss: losses[0], tflops: flops / (msPerStep / 1000) / 1e12 };
  } finally {
    trainer.destroy();
  }
}

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
};

export async function stepsPart(
  out: PartOutput<StepsPart>,
  plan: DevicePlan,
  options: { python?: string; deadline: number },
): Promise<boolean> {
  const rows: StepRow[] = [];
  // Python and torch start while the first shapes run on Shoal.
  const torchStarting = !plan.torch
    ? null
    : startTorch(pythonCandidates(options.python), cpus().length, undefined, 'cuda').catch((error: unknown) => ({
        missing: [errorMessage(error)],
      }));
  let child: TorchChild | null = null;
  let torchError: string | null = null;
  const gpu = await acquireGpu();
  const dir = mkdtempSync(join(tmpdir(), 'shoal-device-steps-'));
  let ok = true;
  try {
    out.update({ adapter: formatAdapter(gpu.report) });
    for (const shape of plan.steps) {
      const { config, B, T, warmup, steps } = shape;
      const layout = buildLayout(config);
      const flops = trainingStepFlops(config, B, T);
      const { nLayer, nHead, nEmbd } = config;
      const row: StepRow = {
        shape: shape.name,
        config: { nLayer, nHead, nEmbd },
        B,
        T,
        parameters: layout.size,
        flops,
        warmup,
        steps,
        torch: {},
      };
      rows.push(row);
      if (performance.now() > options.deadline) {
        row.skipped = 'the part’s time budget is spent';
        ok = false;
        out.update({ rows });
        continue;
      }
      const params = initParameters(layout, 1337);
      try {
        row.shoal = await shoalTiming(gpu.device, shape, params, flops);
      } catch (error) {
        row.shoal = { error: errorMessage(error) };
        ok = false;
      }
      out.update({ rows });
      if (torchStarting && !child && torchError === null) {
        const started = await torchStarting;
        if ('child' in started) {
          child = started.child;
          out.update({ torch: child.hello });
        } else {
          torchError = `no PyTorch with CUDA: ${started.missing.join('; ')}`;
          out.update({ torch: { error: torchError } });
          ok = false;
        }
      }
      if (!child) {
        for (const precision of TORCH_PRECISIONS) {
          row.torch[precision] = plan.torch ? { error: torchError ?? 'no PyTorch' } : { skipped: '--local' };
        }
      } else {
        ok = (await torchTimings(child, row, shape, params, join(dir, 'params.f32'), options.deadline)) && ok;
      }
      const fmt = (t?: EngineTiming) =>
        t?.msPerStep === undefined ? (t?.error ?? t?.skipped ?? '—') : t.msPerStep.toFixed(2);
      console.log(
        `steps ${shape.name} ${B}×${T}: Shoal ${fmt(row.shoal)} ms; PyTorch ${TORCH_PRECISIONS.map((p) => `${p} ${fmt(row.torch[p])}`).join(', ')}`,
      );
      out.update({ rows });
    }
    return ok;
  } finally {
    gpu.destroy();
    await child?.close();
    if (!child && torchStarting) {
      const started = await torchStarting;
      if ('child' in started) await started.child.close();
    }
    rmSync(dir, { recursive: true, force: true });
  }
}

/** PyTorch's three precisions on one shape, into row.torch; false when any failed or was cut for time. */
async function torchTimings(
  child: TorchChild,
  row: StepRow,
  shape: StepShape,
  params: Float32Array,
  paramsPath: string,
  deadline: number,
): Promise<boolean> {
  const { config, B, T, warmup, steps } = shape;
  const layout = buildLayout(config);
  let ok = true;
  try {
    const batches = benchBatches(config, B, T, warmup + steps);
    const paramsFile = writeParamsFile(paramsPath, params);
    const train = defaultTrainConfig({ batchSize: B, seqLen: T });
    await child.setup({ config, layout, B, T, params, paramsFile, batches, train, lr: LR, precision: 'fp32' });
    rmSync(paramsFile, { force: true });
    for (const precision of TORCH_PRECISIONS) {
      if (performance.now() > deadline) {
        row.torch[precision] = { error: 'skipped: the part’s time budget is spent' };
        ok = false;
        continue;
      }
      try {
        await child.setPrecision(precision);
        const warm = await child.run(warmup);
        const timed = await child.run(steps);
        const msPerStep = timed.ms.reduce((a, b) => a + b, 0) / steps;
        row.torch[precision] = {
          msPerStep,
          medianMs: median(timed.ms),
          firstLoss: warm.losses[0],
          tflops: row.flops / (msPerStep / 1000) / 1e12,
        };
      } catch (error) {
        row.torch[precision] = { error: errorMessage(error) };
        ok = false;
      }
    }
  } catch (error) {
    for (const precision of TORCH_PRECISIONS) row.torch[precision] ??= { error: errorMessage(error) };
    ok = false;
  }
  return ok;
}
