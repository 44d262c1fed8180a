/**
 * The matmul family's kernel and tile shape, chosen per adapter by a short measured search at
 * first use instead of one fixed tile. Each candidate (tune's CANDIDATES, those the device's
 * limits and features allow) is first checked against the float64 CPU reference on small shapes
 * off the tile multiples; one that fails is never timed, never chosen. The rest are timed on the
 * three products at the caller's layer shape, a few milliseconds each on a GPU, and the search
 * stops at a total budget with the best so far (once one candidate has passed). The present kernel
 * is the first candidate and the fallback.
 *
 * The choice is cached per adapter (its vendor, architecture, device and description) and shape
 * class (each dimension rounded to a power of two) in a TileCache: in memory for the process by
 * default; in Node, tune.node.ts keeps one in a file under the OS cache directory (the CLI makes it
 * the default with setDefaultTileCache). A cached
 * config is checked again before use. Tests and benches force a config and skip the search.
 */
import { createStorageBuffer } from '../buffers.ts';
import type { BoundKernel } from '../kernel.ts';
import { randomFloats } from '../random.ts';
import { checkMatmulShape, type MatmulCheckShape } from './check.ts';
import { MatmulKernels, type MatmulOptions } from './matmul.ts';
import { type MatmulKernelName, planningLimits, resolveTiles } from './plan.ts';

export interface MatmulConfig {
  kernel: MatmulKernelName;
  workgroupX: number;
  workgroupY: number;
  tileK: number;
}

/** Searched in this order; the first is the present kernel (the fallback). */
export const CANDIDATES: readonly MatmulConfig[] = [
  { kernel: 'tiled', workgroupX: 16, workgroupY: 16, tileK: 16 },
  { kernel: 'register', workgroupX: 8, workgroupY: 8, tileK: 8 },
  { kernel: 'register', workgroupX: 16, workgroupY: 8, tileK: 8 },
  { kernel: 'register', workgroupX: 16, workgroupY: 16, tileK: 8 }, // 128 × 128, needs 16.5 KiB
  { kernel: 'register', workgroupX: 8, workgroupY: 8, tileK: 16 },
  { kernel: 'register', workgroupX: 16, workgroupY: 16, tileK: 16 }, // needs 33 KiB
  { kernel: 'registerSubgroup', workgroupX: 8, workgroupY: 8, tileK: 8 },
  { kernel: 'registerSubgroup', workgroupX: 16, workgroupY: 16, tileK: 8 },
  { kernel: 'registerSubgroup', workgroupX: 16, workgroupY: 16, tileK: 16 },
];

/** A layer's shape: activations [N, C] to [N, OC] (N = B·T). */
export interface LayerShape {
  N: number;
  C: number;
  OC: number;
}

export interface TileCache {
  get(key: string): MatmulConfig | undefined;
  set(key: string, config: MatmulConfig): void;
}

/** The process's cache (Node: for the process; a browser: for the page). */
export const memoryTileCache: TileCache = (() => {
  const entries = new Map<string, MatmulConfig>();
  return { get: (key) => entries.get(key), set: (key, config) => void entries.set(key, config) };
})();

let defaultTileCache: TileCache = memoryTileCache;

/** The cache tuneMatmul uses when given none (memoryTileCache until set; the Node CLI sets fileTileCache()). */
export function setDefaultTileCache(cache: TileCache): void {
  defaultTileCache = cache;
}

export interface TuneOptions {
  /** The layer shape to time (the model's largest matmul is a good pick). */
  shape: LayerShape;
  /** Skip the search and use this config (tests, benches). */
  force?: MatmulConfig;
  candidates?: readonly MatmulConfig[];
  /** Default: the one setDefaultTileCache set, else memoryTileCache. */
  cache?: TileCache;
  /** Total wall-clock budget of the search in ms, compilation included (default 4000). */
  budgetMs?: number;
  /** GPU time to aim for when timing one product of a candidate, in ms (default 4). */
  sampleMs?: number;
  /** The rest of the family's options (targetWorkgroups). */
  options?: Omit<MatmulOptions, keyof MatmulConfig>;
}

export interface CandidateResult {
  config: MatmulConfig;
  /** Why it was not timed: too large for the device, a failed correctness check, an error. */
  refused?: string;
  /** Seconds of forward + backwardInput + backwardWeight at the shape. */
  seconds?: number;
}

export interface TuneResult {
  kernels: MatmulKernels;
  config: MatmulConfig;
  /** 'forced', 'cache' or 'search'. */
  source: 'forced' | 'cache' | 'search';
  results: CandidateResult[];
}

/** The adapter as the cache knows it. */
export function adapterKey(info: GPUAdapterInfo): string {
  return [info.vendor, info.architecture, info.device, info.description].join(' | ');
}

/** Each dimension rounded to the nearest power of two within 16 … 65536: shapes that tune alike. */
export function shapeClass({ N, C, OC }: LayerShape): string {
  const round = (n: number) => 2 ** Math.min(16, Math.max(4, Math.round(Math.log2(Math.max(1, n)))));
  return `${round(N)}x${round(C)}x${round(OC)}`;
}

export const configName = (c: MatmulConfig) => `${c.kernel} ${c.workgroupX}x${c.workgroupY} k${c.tileK}`;

/** Why the device cannot run a config, or null when it can. */
export function unsupported(device: GPUDevice, config: MatmulConfig): string | null {
  if (config.kernel === 'registerSubgroup' && !device.features.has('subgroups')) return 'no subgroups feature';
  try {
    resolveTiles(planningLimits(device.limits), config);
    return null;
  } catch (error) {
    return (error as Error).message;
  }
}

// Small shapes off every tile multiple: the vec4 and the scalar pipelines, bias, split-K.
const CHECK_SHAPES: MatmulCheckShape[] = [
  { N: 67, C: 36, OC: 132, bias: true },
  { N: 9, C: 7, OC: 13, bias: true, accumulate: false },
  { N: 300, C: 20, OC: 68, bias: true, splitK: 3 },
];

/** Runs the checks of a candidate family; the failures, empty when it is correct. */
export async function checkFamily(device: GPUDevice, family: MatmulKernels): Promise<string[]> {
  const failures: string[] = [];
  for (const [index, shape] of CHECK_SHAPES.entries()) {
    for (const failure of await checkMatmulShape(device, family, shape, 9100 + 10 * index)) {
      failures.push(`N=${shape.N} C=${shape.C} OC=${shape.OC}: ${failure}`);
    }
  }
  return failures;
}

/** A matmul family for this adapter and layer shape: forced, cached, or searched for. */
export async function tuneMatmul(device: GPUDevice, info: GPUAdapterInfo, tune: TuneOptions): Promise<TuneResult> {
  const { shape, options = {}, cache = defaultTileCache } = tune;
  if (tune.force) {
    const kernels = await MatmulKernels.create(device, { ...options, ...tune.force });
    return { kernels, config: tune.force, source: 'forced', results: [] };
  }
  const key = `${adapterKey(info)} | ${shapeClass(shape)}`;
  const cached = cache.get(key);
  if (cached && unsupported(device, cached) === null) {
    // Checked again (three small shapes): a cache kept in a file may predate a driver update.
    const kernels = await MatmulKernels.create(device, { ...options, ...cached });
    if ((await checkFamily(device, kernels)).length === 0) {
      return { kernels, config: cached, source: 'cache', results: [] };
    }
    kernels.destroy();
  }
  const { budgetMs = 4000, sampleMs = 4, candidates = CANDIDATES } = tune;
  const started = performance.now();
  const operands = layerOperands(device, shape);
  const results: CandidateResult[] = [];
  let best: { family: MatmulKernels; config: MatmulConfig; seconds: number } | undefined;
  try {
    for (const config of candidates) {
      // The budget ends the search only once some candidate has passed: there is then a result.
      if (best && performance.now() - started > budgetMs) {
        results.push({ config, refused: 'search budget spent' });
        continue;
      }
      const reason = unsupported(device, config);
      if (reason) {
        results.push({ config, refused: reason });
        continue;
      }
      let family: MatmulKernels | undefined;
      try {
        family = await MatmulKernels.create(device, { ...options, ...config });
        const failures = await checkFamily(device, family);
        if (failures.length > 0) {
          results.push({ config, refused: `wrong results: ${failures[0]}` });
          family.destroy();
          continue;
        }
        const seconds = await timeLayer(device, family, operands, shape, sampleMs / 1000);
        results.push({ config, seconds });
        if (!best || seconds < best.seconds) {
          best?.family.destroy();
          best = { family, config, seconds };
        } else {
          family.destroy();
        }
      } catch (error) {
        family?.destroy();
        results.push({ config, refused: `error: ${(error as Error).message.split('\n')[0]}` });
      }
    }
  } finally {
    for (const buffer of Object.values(operands)) buffer.destroy();
  }
  if (!best) {
    throw new Error(
      `MatmulKernels: no candidate passed its checks on this adapter:\n${results.map((r) => `  ${configName(r.config)}: ${r.refused}`).join('\n')}`,
    );
  }
  cache.set(key, best.config);
  return { kernels: best.family, config: best.config, source: 'search', results };
}

/** Random operands of the three products at a layer shape (the search's, bench:matmul's). */
export function layerOperands(device: GPUDevice, { N, C, OC }: LayerShape, label = 'MatmulTune') {
  const buffer = (name: string, floats: number) =>
    createStorageBuffer(device, `${label}.${name}`, randomFloats(floats, floats % 997));
  return {
    inp: buffer('inp', N * C),
    weight: buffer('weight', OC * C),
    bias: buffer('bias', OC),
    out: buffer('out', N * OC),
    dinp: buffer('dinp', N * C),
    dweight: buffer('dweight', OC * C),
    dbias: buffer('dbias', OC),
  };
}

/** The three products of `family` bound to `t` at the layer shape. */
export function bindLayer(family: MatmulKernels, t: ReturnType<typeof layerOperands>, { N, C, OC }: LayerShape) {
  const v = (buffer: GPUBuffer) => ({ buffer });
  return {
    forward: family.forward({ out: v(t.out), inp: v(t.inp), weight: v(t.weight), bias: v(t.bias), N, C, OC }),
    backwardInput: family.backwardInput({ dinp: v(t.dinp), dout: v(t.out), weight: v(t.weight), N, C, OC }),
    backwardWeight: family.backwardWeight({
      dweight: v(t.dweight),
      dbias: v(t.dbias),
      dout: v(t.out),
      inp: v(t.inp),
      N,
      C,
      OC,
    }),
  };
}

/** Seconds of the three products at the layer shape: each warmed up, then repeated for ~sample s. */
async function timeLayer(
  device: GPUDevice,
  family: MatmulKernels,
  t: ReturnType<typeof layerOperands>,
  { N, C, OC }: LayerShape,
  sample: number,
): Promise<number> {
  const bound = Object.values(bindLayer(family, t, { N, C, OC }));
  let total = 0;
  try {
    for (const kernel of bound) {
      const once = await wallSeconds(device, kernel, 2); // the first dispatches pay for first use
      const reps = Math.max(1, Math.min(64, Math.ceil(sample / Math.max(once / 2, 1e-6))));
      total += (await wallSeconds(device, kernel, reps)) / reps;
    }
  } finally {
    for (const kernel of bound) kernel.destroy();
  }
  return total;
}

async function wallSeconds(device: GPUDevice, kernel: BoundKernel, reps: number): Promise<number> {
  const encoder = device.createCommandEncoder({ label: 'MatmulTune.encoder' });
  const pass = encoder.beginComputePass({ label: 'MatmulTune.pass' });
  for (let i = 0; i < reps; i++) kernel.dispatch(pass);
  pass.end();
  const start = performance.now();
  device.queue.submit([encoder.finish()]);
  await device.queue.onSubmittedWorkDone();
  return (performance.now() - start) / 1000;
}
