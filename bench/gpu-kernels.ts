/**
 * The kernel table shared by bench:engine and bench:device: every kernel family at one model
 * shape (GPT config, B, T), timed per dispatch (timestamp queries where the adapter has them), as
 * GFLOP/s for compute-bound kernels and GB/s for memory-bound ones; and square matmuls.
 * Free of TF.js, so bench:device's bundle does not carry it.
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
import { configName, type MatmulConfig } from '../packages/gpu/src/matmul/tune.ts';
import type { GptConfig } from '../packages/model/src/config.ts';
import { buildLayout } from '../packages/model/src/layout.ts';
import { DispatchTimer } from './timing.ts';

export interface KernelRow {
  preset: string;
  kernel: string;
  shape: string;
  ms: number;
  gflops?: number;
  gbps?: number;
}

export interface GpuBench {
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
  /** Seconds of timed dispatches per kernel. */
  kernelSeconds: number;
}

export async function createGpuBench(device: GPUDevice, software: boolean, kernelSeconds?: number): Promise<GpuBench> {
  return {
    device,
    timer: new DispatchTimer(device),
    software,
    kernelSeconds: kernelSeconds ?? (software ? 0.3 : 0.5),
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
}

type Units = { flops?: number; bytes?: number };
type Job = [kernel: string, shape: string, make: () => BoundKernel, units: Units];

/** Seconds of sustained dispatching before a table's first timed kernel (hardware only). */
const TABLE_WARMUP_SECONDS = 1;

/**
 * Times each job; before the first one, a second of repeated dispatches of it, so the GPU's clocks
 * are up before anything is timed (each kernel also gets its own warm-up pass in
 * DispatchTimer.perDispatch).
 */
async function runJobs(ctx: GpuBench, label: string, jobs: Job[]): Promise<KernelRow[]> {
  const rows: KernelRow[] = [];
  for (const [index, [kernel, shape, make, units]] of jobs.entries()) {
    const bound = make();
    if (index === 0 && !ctx.software) {
      const started = performance.now();
      while (performance.now() - started < TABLE_WARMUP_SECONDS * 1000) await ctx.timer.seconds(bound, 20);
    }
    const seconds = await ctx.timer.perDispatch(bound, ctx.kernelSeconds);
    bound.destroy();
    const row: KernelRow = { preset: label, kernel, shape, ms: seconds * 1000 };
    if (units.flops) row.gflops = units.flops / seconds / 1e9;
    if (units.bytes) row.gbps = units.bytes / seconds / 1e9;
    rows.push(row);
  }
  ctx.kernelRows.push(...rows);
  return rows;
}

function tensors(device: GPUDevice) {
  const owned: GPUBuffer[] = [];
  const tensor = (floats: number, seed = floats) => {
    const buffer = createStorageBuffer(device, 'Bench.tensor', randomFloats(floats, seed % 1000, -1, 1));
    owned.push(buffer);
    return { buffer };
  };
  return { tensor, owned };
}

/** Forward, backward-input and backward-weight of one N×inC → outC linear layer. */
function matmulJobs(
  matmul: MatmulKernels,
  tensor: (floats: number) => { buffer: GPUBuffer },
  name: string,
  N: number,
  inC: number,
  outC: number,
): Job[] {
  const shape = `${N}×${inC}→${outC}`;
  const flops = 2 * N * inC * outC;
  const inp = tensor(N * inC);
  const out = tensor(N * outC);
  const weight = tensor(outC * inC);
  const bias = tensor(outC);
  return [
    [`matmul.forward ${name}`, shape, () => matmul.forward({ out, inp, weight, bias, N, C: inC, OC: outC }), { flops }],
    [
      `matmul.backwardInput ${name}`,
      shape,
      () => matmul.backwardInput({ dinp: inp, dout: out, weight, N, C: inC, OC: outC }),
      { flops },
    ],
    [
      `matmul.backwardWeight ${name}`,
      shape,
      () => matmul.backwardWeight({ dweight: weight, dbias: bias, dout: out, inp, N, C: inC, OC: outC }),
      { flops: flops + N * outC },
    ],
  ];
}

/**
 * The three matmul products at N = C = OC = size (labelled `square`): with the engine's kernel, or
 * with the tile config `config` (one of the per-adapter search's candidates, named in the rows).
 */
export async function benchSquareMatmul(ctx: GpuBench, size: number, config?: MatmulConfig): Promise<KernelRow[]> {
  const { tensor, owned } = tensors(ctx.device);
  const matmul = config ? await MatmulKernels.create(ctx.device, config) : ctx.families.matmul;
  const name = config ? `${size}³ ${configName(config)}` : `${size}³`;
  try {
    return await runJobs(ctx, 'square', matmulJobs(matmul, tensor, name, size, size, size));
  } finally {
    for (const buffer of owned) buffer.destroy();
  }
}

/** Every kernel family at one model shape; rows are labelled `label` (a preset's name, say). */
export async function benchKernels(
  ctx: GpuBench,
  label: string,
  config: GptConfig,
  B: number,
  T: number,
): Promise<KernelRow[]> {
  const { device, families } = ctx;
  const { nEmbd: C, nHead: NH, vocabSize: V } = config;
  const N = B * T;
  const { tensor, owned } = tensors(device);
  const attention = await AttentionKernels.create(device, C / NH);
  const jobs: Job[] = [];
  for (const [name, inC, outC] of [
    ['qkv', C, 3 * C],
    ['fc', C, 4 * C],
    ['fcproj', 4 * C, C],
    ['head', C, V],
  ] as const) {
    jobs.push(...matmulJobs(families.matmul, tensor, name, N, inC, outC));
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
  try {
    return await runJobs(ctx, label, jobs);
  } finally {
    for (const buffer of owned) buffer.destroy();
  }
}

const fixed = (value: number | undefined, digits = 1) => (value === undefined ? '—' : value.toFixed(digits));

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
