/**
 * `shoal simulate`: M workers and a host replica in one process, on the real engine, over the
 * in-memory network on a virtual clock, for each method (dp, diloco, streaming, streaming-fp4,
 * streaming-lowrank, streaming-delay, dilocox);
 * then a table (or, with --json, one JSON line last) of validation loss (bits per byte, nats
 * beside it), bytes, peak bytes per sync, simulated time and compute utilisation. See
 * packages/sim/src/simulate.ts for the model.
 *
 * With --pipeline-stages S (or --max-memory, which picks the fewest stages whose every volunteer
 * fits the cap), each worker is a replica of S stage volunteers on a --stage-link-mbps link; the
 * header then says S, M, the schedule, its bubble and the activation bytes per step.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { bitsPerByte, loadCorpus, validationBatches } from '@shoal/data';
import { DEFAULT_LOW_RANK } from '@shoal/diloco';
import {
  createGptKernels,
  formatMemory,
  type GptKernels,
  GpuTrainer,
  gptLayerShape,
  type PipelineSchedule,
} from '@shoal/model';
import type { RunConfig } from '@shoal/protocol';
import { RUN_OPTION_DEFAULTS, type RunOptions, runConfigOf } from '@shoal/room/run-options';
import {
  type MethodResult,
  type PipelinePlan,
  type PipelineTiming,
  planPipeline,
  type SimPipeline,
  type SimulateOptions,
  sharedCpuTrainers,
  simulateMethod,
} from '@shoal/sim';
import { METHODS, type MethodName } from '@shoal/sim/methods';
import cliProgress from 'cli-progress';
import { acquireCliGpu } from './grads-webgpu.ts';
import { TokenEta } from './simulate-eta.ts';
import { UsageError } from './usage.ts';

/**
 * The run options (all but --steps: the schedule spans --tokens; and --overlap-rounds: the methods
 * say) and the simulator's own.
 */
export interface SimulateCliOptions extends Omit<RunOptions, 'steps' | 'overlapRounds'> {
  workers: number;
  tokens: number;
  methods: string;
  backend: 'webgpu' | 'cpu';
  seed: number;
  csv?: string;
  gpuTflops: number;
  stepMs?: number;
  linkMbps: number;
  latencyMs: number;
  dryRun?: boolean;
  json?: boolean;
  /** Each volunteer's memory, bytes (`parseBytes`): picks S, or refuses a --pipeline-stages that does not fit. */
  maxMemory?: number;
  /** The link between a replica's stage volunteers. */
  stageLinkMbps: number;
  stageLatencyMs: number;
  /** Whether --pipeline-stages was given (its default 1 is not a choice that --max-memory must respect). */
  pipelineStagesSet?: boolean;
}

const BYTE_UNITS: Record<string, number> = {
  '': 1,
  b: 1,
  k: 1e3,
  kb: 1e3,
  kib: 2 ** 10,
  m: 1e6,
  mb: 1e6,
  mib: 2 ** 20,
  g: 1e9,
  gb: 1e9,
  gib: 2 ** 30,
  t: 1e12,
  tb: 1e12,
  tib: 2 ** 40,
};

/**
 * A byte count as people write it: 4000000, 4e6, 512MB, 1.5GiB, 2 gb (SI units are powers of
 * 1000, the -iB ones of 1024; a bare k, m, g is SI). Whole bytes ≥ 1; throws a RangeError.
 */
export function parseBytes(text: string): number {
  const match = /^\s*(\d+(?:\.\d*)?(?:e[+-]?\d+)?|\.\d+)\s*([a-z]*)\s*$/i.exec(text);
  const unit = BYTE_UNITS[match?.[2]?.toLowerCase() ?? 'none'];
  if (!match || unit === undefined) {
    throw new RangeError(`"${text}" is not a size: write bytes, or a number with kB, MB, GB, KiB, MiB, GiB`);
  }
  const bytes = Math.floor(Number(match[1]) * unit);
  if (!Number.isFinite(bytes) || bytes < 1) throw new RangeError(`"${text}" is not a size of at least 1 byte`);
  return bytes;
}

function parseMethods(list: string): MethodName[] {
  const names = list
    .split(',')
    .map((m) => m.trim())
    .filter(Boolean);
  for (const name of names) {
    if (!(METHODS as readonly string[]).includes(name)) {
      throw new UsageError(`unknown method ${name}: choose from ${METHODS.join(', ')}`);
    }
  }
  if (names.length === 0) throw new UsageError('--methods is empty');
  return names as MethodName[];
}

const formatBytes = (bytes: number) =>
  bytes >= 1e9
    ? `${(bytes / 1e9).toFixed(2)} GB`
    : bytes >= 1e6
      ? `${(bytes / 1e6).toFixed(2)} MB`
      : `${(bytes / 1e3).toFixed(1)} kB`;

export async function simulateCommand(options: SimulateCliOptions): Promise<void> {
  const methods = parseMethods(options.methods);
  const { plan, config } = roomConfigOf(options);
  const pipeline: SimPipeline | undefined = config.pipeline && {
    ...config.pipeline,
    stageLinkMbps: options.stageLinkMbps,
    stageLatencyMs: options.stageLatencyMs,
  };
  if (pipeline && options.backend === 'webgpu' && !options.dryRun) {
    throw new UsageError(
      'pipeline stages train on the CPU in the simulator (no WebGPU stage engine yet): use --backend cpu',
    );
  }
  const results = await runMethods(methods, options, config, pipeline);
  if (!options.json) printTable(results, options, config, plan);
  else printJson(results, options, config, plan);
}

/**
 * The room these options open (runConfigOf: each checked against its range, and against the
 * model), the simulator's own flags checked, and the pipeline plan when S or a memory cap is asked.
 */
function roomConfigOf(options: SimulateCliOptions): { plan: PipelinePlan | null; config: RunConfig } {
  let config: RunConfig;
  try {
    config = runConfigOf({ ...RUN_OPTION_DEFAULTS, ...options });
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  for (const [flag, value] of [
    ['--gpu-tflops', options.gpuTflops],
    ['--link-mbps', options.linkMbps],
    ['--latency-ms', options.latencyMs],
    ['--stage-latency-ms', options.stageLatencyMs],
  ] as const) {
    if (!Number.isFinite(value) || value < 0) throw new UsageError(`${flag} must be a number ≥ 0, got ${value}`);
  }
  if (!(options.stageLinkMbps > 0)) {
    throw new UsageError(`--stage-link-mbps must be a number > 0, got ${options.stageLinkMbps}`);
  }
  return pipelineFor(options, config);
}

/**
 * The simulator's options for the room `config`: the room's settings as the simulator names them,
 * and the simulator's own (workers, tokens, links, the modelled GPU).
 */
function simulatorOptions(
  options: SimulateCliOptions,
  config: RunConfig,
  pipeline: SimPipeline | undefined,
): Omit<SimulateOptions, 'createTrainer' | 'trainTokens' | 'evalBatches'> {
  const { train, diloco } = config;
  return {
    preset: options.preset,
    workers: options.workers,
    batch: train.batchSize,
    seqLen: train.seqLen,
    lr: train.maxLr,
    innerSteps: diloco.innerSteps,
    fragments: diloco.fragments,
    overlap: diloco.overlap,
    alpha: diloco.alpha,
    codec: diloco.codec,
    codecBlockSize: diloco.codecBlockSize,
    aggregation: diloco.aggregation,
    // the low-rank methods' codec: --low-rank (DEFAULT_LOW_RANK at its 0, which turns a room's off)
    lowRank: { rank: options.lowRank || DEFAULT_LOW_RANK, target: options.lowRankTarget },
    outerLr: diloco.outerLr,
    outerMomentum: diloco.outerMomentum,
    tokens: options.tokens,
    seed: train.seed,
    gpuTflops: options.gpuTflops,
    stepMs: options.stepMs,
    linkMbps: options.linkMbps,
    latencyMs: options.latencyMs,
    dryRun: Boolean(options.dryRun),
    ...(pipeline ? { pipeline } : {}),
  };
}

/**
 * The WebGPU engine for every simulated worker: one device and one set of compiled kernels
 * shared by all (null on the CPU backend or in a dry run), and how to release it.
 */
async function gpuEngine(
  options: SimulateCliOptions,
): Promise<{ createTrainer: SimulateOptions['createTrainer'] | null; release(): void }> {
  if (options.backend !== 'webgpu' || options.dryRun) return { createTrainer: null, release: () => {} };
  const gpu = await acquireCliGpu();
  let kernels: GptKernels | undefined;
  return {
    createTrainer: async (m, train, params) => {
      // shared by every worker, so timed at the first one's shape (the workers' batches are alike)
      const layer = gptLayerShape(m, train.batchSize, train.seqLen);
      kernels ??= await createGptKernels(gpu.device, m.nEmbd / m.nHead, { layer, sequence: train.seqLen });
      return GpuTrainer.create(gpu.device, m, train, params, kernels);
    },
    release: () => gpu.destroy(),
  };
}

/** The progress bar on stderr: the method, its tokens, and the ETA from its wall time per token so far. */
function progressBar(eta: () => TokenEta) {
  const format = '{method} |{bar}| {value}/{total} tokens | ETA {left}';
  return new cliProgress.SingleBar(
    {
      format: (options, params, payload) => {
        const seconds = eta().secondsLeft(Date.now(), params.value, params.total);
        const left = seconds === null ? '—' : cliProgress.Format.TimeFormat(Math.ceil(seconds), options, 5);
        return cliProgress.Format.Formatter({ ...options, format }, params, { ...payload, left });
      },
      stream: process.stderr,
      hideCursor: true,
      noTTYOutput: true,
      notTTYSchedule: 10_000,
    },
    cliProgress.Presets.shades_classic,
  );
}

/**
 * Each method in turn, on one engine: on the CPU, one compute (activations, gradients) per method
 * and batch shape shared by every simulated worker (sim/shared-cpu.ts); on WebGPU one device and
 * one set of compiled kernels shared by every simulated worker. Writes each method's curve under --csv.
 */
async function runMethods(
  methods: MethodName[],
  options: SimulateCliOptions,
  config: RunConfig,
  pipeline: SimPipeline | undefined,
): Promise<MethodResult[]> {
  const seqLen = config.train.seqLen;
  const corpus = loadCorpus({ seqLen });
  const evalBatches = validationBatches(corpus.validation, { batchSize: options.batch, seqLen, count: 32 });
  const gpu = await gpuEngine(options);
  let eta = new TokenEta();
  const bar = progressBar(() => eta);
  const results: MethodResult[] = [];
  try {
    for (const name of methods) {
      eta = new TokenEta();
      bar.start(options.tokens, 0, { method: name.padEnd(13) });
      // a method's own computes: dp's holds M workers' batches, not kept for the methods after it
      const cpu = sharedCpuTrainers();
      const result = await simulateMethod(name, {
        ...simulatorOptions(options, config, pipeline),
        createTrainer: gpu.createTrainer ?? cpu.createTrainer,
        trainTokens: corpus.train,
        evalBatches,
        onProgress: (tokens) => {
          eta.note(tokens, Date.now());
          bar.update(tokens);
        },
      }).finally(() => cpu.destroy());
      bar.update(options.tokens);
      bar.stop();
      results.push(result);
      if (options.csv) writeCurve(options.csv, name, result);
    }
  } finally {
    gpu.release();
  }
  return results;
}

function writeCurve(dir: string, name: MethodName, result: MethodResult): void {
  mkdirSync(dir, { recursive: true });
  const rows = result.curve.map((p) => `${p.tokens},${p.simSeconds.toFixed(3)},${p.trainLoss ?? ''}`);
  writeFileSync(join(dir, `${name}.csv`), `tokens,sim_seconds,train_loss\n${rows.join('\n')}\n`);
}

/** The header (the room, the links, the pipeline) and one row per method. */
function printTable(
  results: MethodResult[],
  options: SimulateCliOptions,
  config: RunConfig,
  plan: PipelinePlan | null,
): void {
  const seqLen = config.train.seqLen;
  const dp = results.find((r) => r.name === 'dp');
  console.log(
    `${options.preset}, ${options.workers} workers × batch ${options.batch}×${seqLen}, ${options.tokens.toLocaleString()} tokens per method, ` +
      `H ${options.innerSteps}, P ${options.fragments}, τ ${options.overlap}, α ${options.alpha}, codec ${options.codec}, ` +
      `${options.linkMbps} Mbit/s, ${options.latencyMs} ms${options.dryRun ? ', dry run' : ''}`,
  );
  const line = pipelineLine(plan, results[0]?.pipeline ?? null, options);
  if (line) console.log(line);
  console.log(
    'method             eval bits/byte (nats)   bytes/worker   vs dp     peak/sync    sim time   compute util   rounds (aborted)',
  );
  for (const r of results) {
    const ratio =
      dp && r !== dp && r.bytesPerWorker > 0 ? `${(dp.bytesPerWorker / r.bytesPerWorker).toFixed(0)}×` : '—';
    console.log(
      `${r.name.padEnd(19)}${(r.evalLoss === null ? '—' : `${bitsPerByte(r.evalLoss).toFixed(4)} (${r.evalLoss.toFixed(4)})`).padEnd(24)}` +
        `${formatBytes(r.bytesPerWorker).padEnd(15)}${ratio.padEnd(10)}${formatBytes(r.peakSyncBytes).padEnd(13)}` +
        `${`${r.simSeconds.toFixed(1)} s`.padEnd(11)}${`${(100 * r.computeUtilization).toFixed(1)}%`.padEnd(15)}` +
        `${r.committedRounds} (${r.abortedRounds})`,
    );
  }
}

/** --json: one line with each method's figures and, under a pipeline plan, the replica's. */
function printJson(
  results: MethodResult[],
  options: SimulateCliOptions,
  config: RunConfig,
  plan: PipelinePlan | null,
): void {
  const timing = results[0]?.pipeline ?? null;
  console.log(
    JSON.stringify({
      methods: results.map(({ name, evalLoss, bytesPerWorker, peakSyncBytes, simSeconds, computeUtilization }) => ({
        name,
        evalLoss,
        evalBitsPerByte: evalLoss === null ? null : bitsPerByte(evalLoss),
        bytesPerWorker,
        peakSyncBytes,
        simSeconds,
        computeUtilization,
      })),
      ...(plan
        ? {
            pipeline: {
              stages: plan.stages,
              micros: plan.micros,
              schedule: config.pipeline?.schedule ?? null,
              activations: config.pipeline?.activations ?? null,
              bubbleFraction: timing?.bubbleFraction ?? 0,
              activationBytesPerStep: timing?.activationBytesPerStep ?? 0,
              stepMs: timing?.stepMs ?? null,
              stageBytes: plan.stageBytes,
              wholeModelBytes: plan.wholeModelBytes,
              maxMemoryBytes: options.maxMemory ?? null,
            },
          }
        : {}),
    }),
  );
}

/**
 * The replica's S for these options and the config that carries it: --max-memory without
 * --pipeline-stages takes the fewest stages that fit; with it, a S whose stages do not fit is
 * refused. Null plan: no pipeline and no cap (nothing to report).
 */
function pipelineFor(options: SimulateCliOptions, config: RunConfig): { plan: PipelinePlan | null; config: RunConfig } {
  const asked = options.pipelineStagesSet
    ? options.pipelineStages
    : config.pipeline
      ? config.pipeline.stages
      : undefined;
  if (options.maxMemory === undefined && asked === undefined) return { plan: null, config };
  let plan: PipelinePlan;
  try {
    plan = planPipeline({
      model: config.model,
      batch: config.train.batchSize,
      seqLen: config.train.seqLen,
      stages: asked,
      micros: options.microBatches || undefined,
      schedule: options.pipelineSchedule as PipelineSchedule,
      maxMemoryBytes: options.maxMemory,
    });
  } catch (error) {
    throw new UsageError(`--max-memory: ${(error as Error).message}`);
  }
  if (plan.stages === (config.pipeline?.stages ?? 1)) return { plan, config };
  try {
    return { plan, config: runConfigOf({ ...RUN_OPTION_DEFAULTS, ...options, pipelineStages: plan.stages }) };
  } catch (error) {
    throw new UsageError(`--max-memory needs ${plan.stages} pipeline stages: ${(error as Error).message}`);
  }
}

/** The header's line about the replica: S, M, schedule, bubble, activation bytes, memory. */
function pipelineLine(plan: PipelinePlan | null, timing: PipelineTiming | null, options: SimulateCliOptions) {
  if (!plan) return null;
  const cap = options.maxMemory === undefined ? '' : `, cap ${formatMemory(options.maxMemory)}`;
  const memory =
    `memory per volunteer ${plan.stageBytes.map(formatMemory).join(' / ')}` +
    `${cap} (whole model ${formatMemory(plan.wholeModelBytes)})`;
  if (!timing) return `no pipeline (S 1): ${memory}`;
  return (
    `pipeline: S ${plan.stages} × M ${plan.micros} ${options.pipelineSchedule}, ${options.activations} activations, ` +
    `stage link ${options.stageLinkMbps} Mbit/s ${options.stageLatencyMs} ms; bubble ${(100 * timing.bubbleFraction).toFixed(1)}%, ` +
    `activations ${formatBytes(timing.activationBytesPerStep)}/step, step ${timing.stepMs.toFixed(2)} ms; ${memory}; ` +
    'bytes are per replica'
  );
}
