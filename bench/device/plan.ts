/**
 * What bench:device measures, and how long each part may take. Two plans: the GPU machine's
 * (an H100/H200: every preset, GPT-2-small and a 304M model, within 4 minutes in all) and
 * `--local`'s (this machine's software adapter at 0.2–2 GFLOP/s: tiny shapes, seconds per part).
 */
import { type GptConfig, PRESETS, type PresetName } from '../../packages/model/src/config.ts';
import { PRESET_BATCH } from '../train-steps.ts';

export interface Shape {
  /** A preset's name, or the model's shape (`L24 C1024`) where it is no preset. */
  name: string;
  config: GptConfig;
  B: number;
  T: number;
}

export interface StepShape extends Shape {
  warmup: number;
  steps: number;
}

export const PART_NAMES = ['adapter', 'grads', 'steps', 'kernels', 'precision'] as const;
export type PartName = (typeof PART_NAMES)[number];

export interface DevicePlan {
  local: boolean;
  /** Whether PyTorch takes part (the GPU plan; --local only with --torch, against a stand-in). */
  torch: boolean;
  /** Seconds each part may run (run.sh stops a part at its budget; the parts also skip what would not fit). */
  budgets: Record<PartName, number>;
  grads: Shape[];
  /** Relative error (max |got − ref| / max |ref| per tensor) under which a gradient passes. */
  gradTolerance: number;
  steps: StepShape[];
  kernels: Shape[];
  /** Sizes of square matmuls (N = C = OC). */
  squareMatmul: number[];
  /** Seconds of timed dispatches per kernel (each also gets a quarter of that as warm-up). */
  kernelSeconds: number;
  precision: PrecisionPlan;
}

/** The precision part: f16 matmul operands (tensor cores, else rounding) against f32. */
export interface PrecisionPlan {
  /** Size of the square matmul timed per matmul family (N = C = OC). */
  matmulSize: number;
  /** The model trained twice, at f32 and at f16, from the same init on the same batches. */
  train: Shape;
  steps: number;
  /** The train loss compared is the mean over this many last steps. */
  lastSteps: number;
  evalBatches: number;
  /** Largest relative difference of the f16 run's losses from the f32 run's that passes. */
  tolerance: number;
}

const preset = (name: PresetName, B: number, T: number): Shape => ({ name, config: { ...PRESETS[name] }, B, T });

/** GPT-2 medium's shape on bytes: 304M parameters. */
const L24_C1024: GptConfig = { nLayer: 24, nHead: 16, nEmbd: 1024, blockSize: 1024, vocabSize: 256 };

/** Fewer timed steps the longer a step: about 1 s of steps per engine and precision at most. */
function stepCounts(shape: Shape): StepShape {
  const tokens = shape.B * shape.T * shape.config.nLayer * shape.config.nEmbd;
  if (tokens >= 8 * 1024 * 24 * 1024) return { ...shape, warmup: 2, steps: 4 };
  if (tokens >= 8 * 1024 * 12 * 768) return { ...shape, warmup: 3, steps: 8 };
  if (tokens >= 8 * 512 * 8 * 704) return { ...shape, warmup: 3, steps: 10 };
  return { ...shape, warmup: 5, steps: 20 };
}

function gpuPlan(): DevicePlan {
  const presets = (Object.keys(PRESETS) as PresetName[]).map((name) =>
    preset(name, PRESET_BATCH[name].B, PRESET_BATCH[name].T),
  );
  const gpt2Shape = presets.find((s) => s.config.nLayer === 12 && s.config.nEmbd === 768 && s.T === 1024);
  const steps = [...presets];
  // GPT-2 small's shape (86M) at 8×1024, unless a preset already is that shape.
  if (!gpt2Shape) {
    steps.push({
      name: 'L12 C768',
      config: { nLayer: 12, nHead: 12, nEmbd: 768, blockSize: 1024, vocabSize: 256 },
      B: 8,
      T: 1024,
    });
  }
  steps.push({ name: 'L24 C1024', config: L24_C1024, B: 8, T: 1024 });
  const l12 = gpt2Shape ?? (steps.at(-2) as Shape);
  return {
    local: false,
    torch: true,
    // precision: two 400-step runs of small at ~18 ms a step, kernels compiled twice, the gate
    // and three matmul families at 4096³
    budgets: { adapter: 15, grads: 40, steps: 95, kernels: 35, precision: 45 },
    grads: [preset('nano', 4, 64), preset('small', 4, 256), { ...l12, name: `${l12.name} T256`, B: 2, T: 256 }],
    gradTolerance: 1e-4,
    steps: steps.map(stepCounts),
    kernels: [{ ...l12, B: 8, T: 1024 }],
    squareMatmul: [4096],
    kernelSeconds: 0.25,
    // "its loss over 400 steps of small stays within 1% of the f32 engine's"
    precision: {
      matmulSize: 4096,
      train: preset('small', PRESET_BATCH.small.B, PRESET_BATCH.small.T),
      steps: 400,
      lastSteps: 50,
      evalBatches: 4,
      tolerance: 0.01,
    },
  };
}

function localPlan(): DevicePlan {
  return {
    local: true,
    torch: false,
    // a software adapter compiles each kernel family for seconds, more on a loaded machine with a
    // cold shader cache (CI): the budgets are backstops, not estimates
    budgets: { adapter: 60, grads: 90, steps: 90, kernels: 90, precision: 120 },
    grads: [preset('nano', 2, 16)],
    gradTolerance: 1e-4,
    steps: [{ ...preset('nano', 2, 32), warmup: 1, steps: 2 }],
    kernels: [preset('nano', 1, 32)],
    squareMatmul: [64],
    kernelSeconds: 0.1,
    precision: {
      matmulSize: 64,
      train: preset('nano', 4, 32),
      steps: 20,
      lastSteps: 5,
      evalBatches: 2,
      tolerance: 0.01,
    },
  };
}

export function devicePlan(local: boolean, torch = !local): DevicePlan {
  return { ...(local ? localPlan() : gpuPlan()), torch };
}
