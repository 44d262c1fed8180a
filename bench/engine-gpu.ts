/**
 * bench:engine's WebGPU sections (bench/engine.ts is the command): on this machine's adapter,
 *   1. every kernel family at each preset's shapes: GFLOP/s (compute-bound) or GB/s (memory-bound);
 *   2. a whole training step (forward, backward, clip, AdamW) per preset: our WebGPU engine
 *      against TensorFlow.js's WebGPU backend on the same adapter, same model, batch and settings.
 * Presets whose step would take longer than maxStepSeconds on this adapter (estimated from the
 * last measured preset's rate and the FLOP ratio) are skipped and say so.
 */
import {
  AdamWKernels,
  AttentionKernels,
  type BoundKernel,
  CrossEntropyKernels,
  createStorageBuffer,
  GeluKernels,
  GradNormKernels,
  LayernormKernels,
  MatmulKernels,
  randomFloats,
} from '../packages/gpu/src/common.ts';
import { acquireGpu } from '../packages/gpu/src/device.node.ts';
import { formatAdapter } from '../packages/gpu/src/report.ts';
import { PRESETS, type PresetName, trainingStepFlops } from '../packages/model/src/config.ts';
import { GpuTrainer } from '../packages/model/src/gpu/trainer.ts';
import { initParameters } from '../packages/model/src/init.ts';
import { buildLayout } from '../packages/model/src/layout.ts';
import type { Trainer } from '../packages/model/src/train/trainer.ts';
import { defaultTrainConfig } from '../packages/model/src/train-config.ts';
import { benchBatches, measureTfjsStep, type TfjsStepResult } from './tfjs.ts';
import { DispatchTimer } from './timing.ts';

/** Batch shape per preset: nano's 1,024-token step, then 4,096 tokens. */
const SHAPES: Record<PresetName, { B: number; T: number }> = {
  nano: { B: 16, T: 64 },
  tiny: { B: 32, T: 128 },
  small: { B: 16, T: 256 },
  base: { B: 8, T: 512 },
};

export interface GpuSectionOptions {
  presets: PresetName[];
  /** Timed steps and warm-up per preset; fewer by default on a software adapter. */
  steps?: number;
  warmup?: number;
  maxStepSeconds: number;
  tfjs: boolean;
}

export interface KernelRow {
  preset: string;
  kernel: string;
  shape: string;
  ms: number;
  gflops?: number;
  gbps?: number;
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

interface GpuBench {
  device: GPUDevice;
  timer: DispatchTimer;
  software: boolean;
  families: {
    matmul: MatmulKernels;
    layernorm: LayernormKernels;
    gelu: GeluKernels;
    crossEntropy: CrossEntropyKernels;
    adamw: AdamWKernels;
    gradNorm: GradNormKernels;
  };
  kernelRows: KernelRow[];
}

const fixed = (value: number | undefined, digits = 1) => (value === undefined ? '—' : value.toFixed(digits));

// --- 1. kernels at each preset's shapes ----------------------------------------------------------
async function benchKernels(ctx: GpuBench, preset: PresetName): Promise<void> {
  const { device, timer, software, families, kernelRows } = ctx;
  const config = PRESETS[preset];
  const { B, T } = SHAPES[preset];
  const { nEmbd: C, nHead: NH, vocabSize: V } = config;
  const N = B * T;
  const owned: GPUBuffer[] = [];
  const tensor = (floats: number, seed = floats) => {
    const buffer = createStorageBuffer(device, 'Bench.tensor', randomFloats(floats, seed % 1000, -1, 1));
    owned.push(buffer);
    return { buffer };
  };
  const attention = await AttentionKernels.create(device, C / NH);
  const jobs: [string, string, () => BoundKernel, { flops?: number; bytes?: number }][] = [];
  for (const [name, inC, outC] of [
    ['qkv', C, 3 * C],
    ['fc', C, 4 * C],
    ['fcproj', 4 * C, C],
    ['head', C, V],
  ] as const) {
    const shape = `${N}×${inC}→${outC}`;
    const flops = 2 * N * inC * outC;
    const inp = tensor(N * inC);
    const out = tensor(N * outC);
    const weight = tensor(outC * inC);
    const bias = tensor(outC);
    jobs.push(
      [
        `matmul.forward ${name}`,
        shape,
        () => families.matmul.forward({ out, inp, weight, bias, N, C: inC, OC: outC }),
        { flops },
      ],
      [
        `matmul.backwardInput ${name}`,
        shape,
        () => families.matmul.backwardInput({ dinp: inp, dout: out, weight, N, C: inC, OC: outC }),
        { flops },
      ],
      [
        `matmul.backwardWeight ${name}`,
        shape,
        () => families.matmul.backwardWeight({ dweight: weight, dbias: bias, dout: out, inp, N, C: inC, OC: outC }),
        { flops: flops + N * outC },
      ],
    );
  }
  const qkv = tensor(N * 3 * C);
  const atty = tensor(N * C);
  const lse = tensor(B * NH * T);
  const datty = tensor(N * C);
  const dqkv = tensor(N * 3 * C);
  const attentionFlops = 2 * B * C * T * (T + 1);
  const attentionShape = `B${B} T${T} NH${NH} hs${C / NH} (${attention.strategy})`;
  jobs.push(
    [
      'attention.forward',
      attentionShape,
      () => attention.forward({ qkv, out: atty, lse }, { B, T, C, NH }),
      { flops: attentionFlops },
    ],
    [
      'attention.backward',
      attentionShape,
      () => attention.backward({ qkv, out: atty, lse, dout: datty, dqkv }, { B, T, C, NH }),
      { flops: 2.5 * attentionFlops },
    ],
  );
  const x = tensor(N * C);
  const y = tensor(N * C);
  const dx = tensor(N * C);
  const w = tensor(C);
  const b = tensor(C);
  const mean = tensor(N);
  const rstd = tensor(N);
  jobs.push(
    [
      'layernorm.forward',
      `${N}×${C}`,
      () => families.layernorm.forward(y, mean, rstd, x, w, b, N, C),
      { bytes: 8 * N * C },
    ],
    [
      'layernorm.backward',
      `${N}×${C}`,
      () => families.layernorm.backward(dx, w, b, y, x, w, mean, rstd, N, C),
      { bytes: 16 * N * C },
    ],
  );
  const h = tensor(N * 4 * C);
  const hg = tensor(N * 4 * C);
  const dh = tensor(N * 4 * C);
  jobs.push(
    ['gelu.forward', `${N * 4 * C}`, () => families.gelu.forward(hg, h, N * 4 * C), { bytes: 8 * N * 4 * C }],
    ['gelu.backward', `${N * 4 * C}`, () => families.gelu.backward(dh, h, hg, N * 4 * C), { bytes: 16 * N * 4 * C }],
  );
  const logits = tensor(N * V);
  const targets = {
    buffer: createStorageBuffer(
      device,
      'Bench.targets',
      Int32Array.from({ length: N }, (_, i) => (i * 7) % V),
    ),
  };
  owned.push(targets.buffer);
  const losses = tensor(N);
  const dlogits = tensor(N * V);
  jobs.push(
    [
      'crossentropy.forward',
      `${N}×${V}`,
      () => families.crossEntropy.forward({ logits, targets, losses }, N, V),
      { bytes: 4 * N * V },
    ],
    [
      'crossentropy.backward',
      `${N}×${V}`,
      () => families.crossEntropy.backward({ logits, targets, dlogits }, N, V),
      { bytes: 8 * N * V },
    ],
  );
  const P = buildLayout(config).paddedSize;
  const [params, grads, m, v, norm] = [tensor(P), tensor(P), tensor(P), tensor(P), tensor(2)];
  const stepUniform = families.adamw.createStepBuffer();
  owned.push(stepUniform);
  families.adamw.writeStep(stepUniform, { lr: 1e-4, t: 1 });
  jobs.push(
    ['gradnorm', `${P}`, () => families.gradNorm.norm([{ buffer: grads.buffer, n: P }], norm, 1), { bytes: 4 * P }],
    [
      'adamw',
      `${P}`,
      () =>
        families.adamw.update(
          { params: params.buffer, grads: grads.buffer, m: m.buffer, v: v.buffer },
          [{ offset: 0, n: P, weightDecay: 0.1 }],
          stepUniform,
        ),
      { bytes: 28 * P },
    ],
  );
  for (const [kernel, shape, make, units] of jobs) {
    const bound = make();
    const seconds = await timer.perDispatch(bound, software ? 0.3 : 0.5);
    bound.destroy();
    const row: KernelRow = { preset, kernel, shape, ms: seconds * 1000 };
    if (units.flops) row.gflops = units.flops / seconds / 1e9;
    if (units.bytes) row.gbps = units.bytes / seconds / 1e9;
    kernelRows.push(row);
  }
  for (const buffer of owned) buffer.destroy();
}

export function printKernels(adapter: string, rows: KernelRow[]): void {
  console.log(`\nKernels (${adapter})`);
  console.log(`${'preset'.padEnd(7)}${'kernel'.padEnd(30)}${'shape'.padEnd(34)}${'ms'.padStart(9)}  rate`);
  for (const r of rows) {
    const rate = r.gflops !== undefined ? `${r.gflops.toFixed(2)} GFLOP/s` : `${fixed(r.gbps, 2)} GB/s`;
    console.log(
      `${r.preset.padEnd(7)}${r.kernel.padEnd(30)}${r.shape.padEnd(34)}${r.ms.toFixed(3).padStart(9)}  ${rate}`,
    );
  }
}

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

// --- 2. training steps ---------------------------------------------------------------------------
async function timeSteps(trainer: Trainer, batches: ReturnType<typeof benchBatches>, warmup: number, count: number) {
  const lr = 1e-3;
  const losses: number[] = [];
  for (const batch of batches.slice(0, warmup)) losses.push(await trainer.step(batch, lr));
  const started = performance.now();
  for (const batch of batches.slice(warmup, warmup + count)) {
    losses.push(await trainer.step(batch, lr, { readLoss: false }));
  }
  if (trainer instanceof GpuTrainer) await trainer.flush();
  return { msPerStep: (performance.now() - started) / count, losses };
}

/** Acquires the adapter, measures every preset (printing each as it goes) and returns the rows. */
export async function runGpuSections(options: GpuSectionOptions): Promise<GpuSections> {
  const gpu = await acquireGpu();
  const { device, report } = gpu;
  const software = report.isSoftware;
  const steps = options.steps ?? (software ? 4 : 20);
  const warmup = options.warmup ?? (software ? 1 : 5);
  const timer = new DispatchTimer(device);
  const adapter = formatAdapter(report);
  console.log(`adapter: ${adapter} (timing: ${timer.method}); steps ${steps} after ${warmup} warm-up`);
  const ctx: GpuBench = {
    device,
    timer,
    software,
    families: {
      matmul: await MatmulKernels.create(device),
      layernorm: await LayernormKernels.create(device),
      gelu: await GeluKernels.create(device),
      crossEntropy: await CrossEntropyKernels.create(device),
      adamw: await AdamWKernels.create(device),
      gradNorm: await GradNormKernels.create(device),
    },
    kernelRows: [],
  };
  const stepRows: StepRow[] = [];
  let flopRate: number | null = null; // measured FLOP/s of our step, to estimate the larger presets
  for (const preset of options.presets) {
    const config = PRESETS[preset];
    const { B, T } = SHAPES[preset];
    const layout = buildLayout(config);
    const row: StepRow = { preset, B, T, parameters: layout.size };
    stepRows.push(row);
    const flops = trainingStepFlops(config, B, T);
    if (flopRate !== null && flops / flopRate > options.maxStepSeconds) {
      row.skipped = `about ${(flops / flopRate).toFixed(0)} s per step on this adapter (over --max-step-seconds ${options.maxStepSeconds})`;
      console.log(`${preset}: skipped, ${row.skipped}`);
      continue;
    }
    await benchKernels(ctx, preset);
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
