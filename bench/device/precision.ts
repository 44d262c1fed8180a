/**
 * The precision part: f16 matmul operands with f32 accumulation (`shoal train --precision f16`)
 * against f32. First the tensor path on this adapter (Dawn with allow_unsafe_apis): its
 * subgroup-matrix configurations, the one the kernel takes and those it refuses, whether the
 * matrix kernel compiles, the start-up gate against the f32 tiled kernel, and square matmuls
 * per family. Then training: the same model from the same init on the same Moby Dick batches at
 * f32 and at f16, and how far the f16 run's losses are from the f32 run's.
 */
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadCorpus } from '../../packages/data/src/corpus.node.ts';
import { BatchSampler, validationBatches } from '../../packages/data/src/sampler.ts';
import { learningRate } from '../../packages/gpu/src/adamw/schedule.ts';
import { acquireGpu } from '../../packages/gpu/src/device.node.ts';
import { type GateResult, gateMatmulPath } from '../../packages/gpu/src/matmul/gate.ts';
import { MatmulKernels } from '../../packages/gpu/src/matmul/matmul.ts';
import {
  chooseMatrixConfig,
  type MatmulPrecision,
  matrixPrecisionName,
  SUBGROUP_MATRIX_FEATURE,
  type SubgroupMatrixConfig,
  subgroupMatrixConfigs,
} from '../../packages/gpu/src/matmul/matrix.ts';
import { bindLayer, CANDIDATES, type LayerShape, layerOperands } from '../../packages/gpu/src/matmul/tune.ts';
import { formatAdapter } from '../../packages/gpu/src/report.ts';
import { describeMatmul, F16_GATE_TOLERANCE } from '../../packages/model/src/gpu/kernels.ts';
import { GpuTrainer } from '../../packages/model/src/gpu/trainer.ts';
import { initParameters } from '../../packages/model/src/init.ts';
import { buildLayout } from '../../packages/model/src/layout.ts';
import { defaultTrainConfig } from '../../packages/model/src/train-config.ts';
import { DispatchTimer } from '../timing.ts';
import { CORPUS_FILE, errorMessage, type PartOutput } from './output.ts';
import type { DevicePlan } from './plan.ts';

export interface TensorPath {
  /** The features the matrix kernel needs, and whether the device has each. */
  features: Record<string, boolean>;
  configs: SubgroupMatrixConfig[];
  /** chooseMatrixConfig's choice (matrixPrecisionName), or null. */
  chosen: string | null;
  refused: string[];
  /** Whether MatmulKernels.create({ matrix }) compiled; absent when nothing was chosen. */
  compiled?: boolean;
  compileError?: string;
  /** The matrix kernel against the f32 tiled kernel (tolerance F16_GATE_TOLERANCE). */
  gate?: GateResult;
  /** The tiled kernel rounding its operands to f16 against the f32 tiled kernel: f16's numerics on any adapter. */
  roundingGate?: GateResult;
}

export interface MatmulTimingRow {
  /** 'f32 tiled', 'f16 rounding tiled', or 'tensor cores <configuration>'. */
  family: string;
  product: 'forward' | 'backwardInput' | 'backwardWeight';
  size: number;
  ms: number;
  tflops: number;
}

export interface PrecisionRun {
  /** describeMatmul: which matmul path ran, and why. */
  matmul?: string;
  firstLoss?: number;
  /** Mean train loss over the last `lastSteps` steps. */
  trainLoss?: number;
  valLoss?: number;
  msPerStep?: number;
  /** The loss every 50 steps, and at the last. */
  curve?: { step: number; loss: number }[];
  error?: string;
}

export interface PrecisionTraining {
  shape: string;
  B: number;
  T: number;
  steps: number;
  lastSteps: number;
  evalBatches: number;
  corpus: string;
  tolerance: number;
  runs: Partial<Record<MatmulPrecision, PrecisionRun>>;
  /** |f16 − f32| / f32 of the train loss (last steps' mean) and of the validation loss. */
  difference?: { trainLoss: number; valLoss: number };
  passed?: boolean;
}

export interface PrecisionPart {
  adapter?: string;
  timing?: string;
  tensor?: TensorPath;
  matmul: MatmulTimingRow[];
  training?: PrecisionTraining;
  skipped?: string[];
}

const PRODUCTS = ['forward', 'backwardInput', 'backwardWeight'] as const;
const CURVE_EVERY = 50;

/** The tensor path's facts; the matrix family (when it compiled) and the two tiled ones are returned for timing. */
async function probeTensorPath(device: GPUDevice) {
  const info = (device as GPUDevice & { adapterInfo?: GPUAdapterInfo }).adapterInfo;
  const configs = info ? subgroupMatrixConfigs(info) : [];
  const { config, refused } = chooseMatrixConfig(configs, device.features);
  const features = Object.fromEntries(
    [SUBGROUP_MATRIX_FEATURE, 'subgroups', 'shader-f16'].map((name) => [name, device.features.has(name)]),
  );
  const tensor: TensorPath = { features, configs, chosen: config ? matrixPrecisionName(config) : null, refused };
  const tiled = CANDIDATES[0];
  if (!tiled) throw new Error('tune.ts has no tile candidates');
  const reference = await MatmulKernels.create(device, tiled);
  const rounding = await MatmulKernels.create(device, { ...tiled, roundOperands: 'f16' });
  let matrix: MatmulKernels | null = null;
  if (config) {
    try {
      matrix = await MatmulKernels.create(device, { matrix: config });
      tensor.compiled = true;
    } catch (error) {
      tensor.compiled = false;
      tensor.compileError = errorMessage(error);
    }
  }
  const tolerance = F16_GATE_TOLERANCE;
  if (matrix) tensor.gate = await gateMatmulPath(device, matrix, reference, { tolerance });
  tensor.roundingGate = await gateMatmulPath(device, rounding, reference, { tolerance });
  const families: [string, MatmulKernels][] = [
    ['f32 tiled', reference],
    ['f16 rounding tiled', rounding],
  ];
  if (matrix && config && tensor.gate?.accepted) families.push([`tensor cores ${matrixPrecisionName(config)}`, matrix]);
  const destroy = () => {
    for (const family of [reference, rounding, matrix]) family?.destroy();
  };
  return { tensor, families, destroy };
}

/** Seconds per dispatch of each product of each family at size³, by the kernel table's timer. */
async function timeFamilies(
  device: GPUDevice,
  timer: DispatchTimer,
  families: [string, MatmulKernels][],
  size: number,
  { seconds, software }: { seconds: number; software: boolean },
): Promise<MatmulTimingRow[]> {
  const shape: LayerShape = { N: size, C: size, OC: size };
  const operands = layerOperands(device, shape, 'PrecisionBench');
  const rows: MatmulTimingRow[] = [];
  try {
    for (const [index, [family, kernels]] of families.entries()) {
      const bound = bindLayer(kernels, operands, shape);
      try {
        // a GPU that idled while kernels compiled runs at low clocks: a second of dispatches first
        if (index === 0 && !software) {
          const started = performance.now();
          while (performance.now() - started < 1000) await timer.seconds(bound.forward, 20);
        }
        for (const product of PRODUCTS) {
          const perDispatch = await timer.perDispatch(bound[product], seconds);
          // 2·N·C·OC multiply-adds; backwardWeight also sums dbias (N·OC)
          const flops = 2 * size ** 3 + (product === 'backwardWeight' ? size * size : 0);
          rows.push({ family, product, size, ms: perDispatch * 1000, tflops: flops / perDispatch / 1e12 });
        }
      } finally {
        for (const kernel of Object.values(bound)) kernel.destroy();
      }
    }
  } finally {
    for (const buffer of Object.values(operands)) buffer.destroy();
  }
  return rows;
}

/** Moby Dick: the copy beside the bundle where there is one, else @stdlib's (a run from the repository). */
function corpus() {
  const carried = join(dirname(fileURLToPath(import.meta.url)), CORPUS_FILE);
  return existsSync(carried) ? loadCorpus({ data: carried }) : loadCorpus();
}

/** One training run at `precision`: the same init, batches and schedule for every precision. */
async function trainRun(
  device: GPUDevice,
  plan: DevicePlan['precision'],
  data: ReturnType<typeof corpus>,
  precision: MatmulPrecision,
  deadline: number,
): Promise<PrecisionRun> {
  const { config, B, T } = plan.train;
  // as `shoal train --steps N`: warm-up a tenth of the run (at most 100 steps), cosine to maxLr/10
  const train = defaultTrainConfig({
    batchSize: B,
    seqLen: T,
    totalSteps: plan.steps,
    warmupSteps: Math.min(100, Math.floor(plan.steps / 10)),
  });
  const params = initParameters(buildLayout(config), train.seed);
  const sampler = new BatchSampler(data.train, { batchSize: B, seqLen: T, seed: train.seed });
  const evalSet = validationBatches(data.validation, { batchSize: B, seqLen: T, count: plan.evalBatches });
  const trainer = await GpuTrainer.create(device, config, train, params, undefined, { precision });
  const run: PrecisionRun = { matmul: describeMatmul(trainer.model.kernels.matmulConfig), curve: [] };
  try {
    const last: number[] = [];
    const started = performance.now();
    for (let step = 0; step < plan.steps; step++) {
      const lr = learningRate(step, train);
      const inLast = step >= plan.steps - plan.lastSteps;
      const onCurve = step === 0 || (step + 1) % CURVE_EVERY === 0;
      const loss = await trainer.step(sampler.next(), lr, { readLoss: inLast || onCurve });
      if (inLast) last.push(loss);
      if (onCurve) {
        run.curve?.push({ step: step + 1, loss });
        if (step === 0) run.firstLoss = loss;
        if (!Number.isFinite(loss)) throw new Error(`loss became ${loss} at step ${step + 1}`);
        if (performance.now() > deadline) throw new Error(`out of the part's time at step ${step + 1}`);
      }
    }
    await trainer.flush();
    run.msPerStep = (performance.now() - started) / plan.steps;
    run.trainLoss = last.reduce((a, b) => a + b, 0) / last.length;
    run.valLoss = await trainer.evaluate(evalSet);
    return run;
  } finally {
    trainer.destroy();
  }
}

const relative = (got: number | undefined, want: number | undefined) =>
  got === undefined || want === undefined ? Number.NaN : Math.abs(got - want) / Math.abs(want);

export async function precisionPart(
  out: PartOutput<PrecisionPart>,
  plan: DevicePlan,
  deadline: number,
): Promise<boolean> {
  const gpu = await acquireGpu({ subgroupMatrix: true });
  const { device } = gpu;
  const skipped: string[] = [];
  try {
    const timer = new DispatchTimer(device);
    out.update({ adapter: formatAdapter(gpu.report), timing: timer.method });

    const probe = await probeTensorPath(device);
    out.update({ tensor: probe.tensor });
    let matmul: MatmulTimingRow[] = [];
    try {
      const size = plan.precision.matmulSize;
      if (performance.now() > deadline) skipped.push(`matmul ${size}³`);
      else {
        const options = { seconds: plan.kernelSeconds, software: gpu.report.isSoftware };
        matmul = await timeFamilies(device, timer, probe.families, size, options);
        out.update({ matmul });
      }
    } finally {
      probe.destroy();
    }

    const { train: shape, steps, lastSteps, evalBatches, tolerance } = plan.precision;
    const data = corpus();
    const training: PrecisionTraining = {
      shape: shape.name,
      B: shape.B,
      T: shape.T,
      steps,
      lastSteps,
      evalBatches,
      corpus: `${data.name.endsWith(CORPUS_FILE) ? 'moby-dick' : data.name} (${data.fingerprint})`,
      tolerance,
      runs: {},
    };
    for (const precision of ['f32', 'f16'] as const) {
      try {
        training.runs[precision] = await trainRun(device, plan.precision, data, precision, deadline);
      } catch (error) {
        training.runs[precision] = { error: errorMessage(error) };
      }
      out.update({ training });
    }
    const { f32, f16 } = training.runs;
    training.difference = {
      trainLoss: relative(f16?.trainLoss, f32?.trainLoss),
      valLoss: relative(f16?.valLoss, f32?.valLoss),
    };
    // NaN (a run failed) compares false
    training.passed = training.difference.trainLoss <= tolerance && training.difference.valLoss <= tolerance;
    out.update({ training, skipped });
    for (const r of matmul) {
      console.log(
        `precision ${r.family} ${r.product} ${r.size}³: ${r.ms.toFixed(3)} ms, ${r.tflops.toFixed(3)} TFLOP/s`,
      );
    }
    for (const precision of ['f32', 'f16'] as const) {
      const r = training.runs[precision];
      console.log(
        `precision ${precision}: ${r?.error ?? `train ${r?.trainLoss?.toFixed(4)}, val ${r?.valLoss?.toFixed(4)}, ${r?.msPerStep?.toFixed(1)} ms/step; ${r?.matmul}`}`,
      );
    }
    console.log(
      `precision: f16 vs f32 train ${(training.difference.trainLoss * 100).toPrecision(2)}%, val ${(training.difference.valLoss * 100).toPrecision(2)}%: ${training.passed ? 'passed' : 'failed'}`,
    );
    return training.passed && skipped.length === 0;
  } finally {
    gpu.destroy();
  }
}
