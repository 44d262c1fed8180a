/**
 * `shoal simulate`: M workers and a host replica in one process, on the real engine, over the
 * in-memory network on a virtual clock, for each method (dp, diloco, streaming, streaming-fp4,
 * streaming-lowrank, streaming-delay, dilocox);
 * then a table (or, with --json, one JSON line last) of validation loss, bytes, peak bytes per
 * sync, simulated time and compute utilisation. See packages/swarm/src/simulate.ts for the model.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadCorpus, validationBatches } from '@shoal/data';
import { DEFAULT_LOW_RANK } from '@shoal/diloco';
import { CpuTrainer, createGptKernels, type GptKernels, GpuTrainer } from '@shoal/model';
import type { RunConfig } from '@shoal/protocol';
import { METHODS, type MethodName, type MethodResult, type SimulateOptions, simulateMethod } from '@shoal/swarm';
import { RUN_OPTION_DEFAULTS, type RunOptions, runConfigOf } from '@shoal/swarm/run-options';
import cliProgress from 'cli-progress';
import { acquireCliGpu } from './grads-webgpu.ts';
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
  // the room's config for these options: each checked against its range, and against the model
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
  ] as const) {
    if (!Number.isFinite(value) || value < 0) throw new UsageError(`${flag} must be a number ≥ 0, got ${value}`);
  }
  const { codec, codecBlockSize, aggregation } = config.diloco;
  // the low-rank methods' codec: --low-rank (DEFAULT_LOW_RANK at its 0, which turns a room's off)
  const lowRank = { rank: options.lowRank || DEFAULT_LOW_RANK, target: options.lowRankTarget };
  const seqLen = config.train.seqLen;
  const corpus = loadCorpus({ seqLen });
  const evalBatches = validationBatches(corpus.validation, { batchSize: options.batch, seqLen, count: 32 });

  // The engine: one GPU device and one set of compiled kernels shared by every simulated worker.
  let release = () => {};
  let createTrainer: SimulateOptions['createTrainer'] = async (m, train, params) => new CpuTrainer(m, train, params);
  if (options.backend === 'webgpu' && !options.dryRun) {
    const gpu = await acquireCliGpu();
    release = () => gpu.destroy();
    let kernels: GptKernels | undefined;
    createTrainer = async (m, train, params) => {
      kernels ??= await createGptKernels(gpu.device, m.nEmbd / m.nHead);
      return GpuTrainer.create(gpu.device, m, train, params, kernels);
    };
  }

  const bar = new cliProgress.SingleBar(
    {
      format: '{method} |{bar}| {value}/{total} tokens | ETA {eta_formatted}',
      stream: process.stderr,
      hideCursor: true,
      noTTYOutput: true,
      notTTYSchedule: 10_000,
    },
    cliProgress.Presets.shades_classic,
  );
  const results: MethodResult[] = [];
  try {
    for (const name of methods) {
      bar.start(options.tokens, 0, { method: name.padEnd(13) });
      const result = await simulateMethod(name, {
        preset: options.preset,
        workers: options.workers,
        batch: options.batch,
        seqLen,
        lr: options.lr,
        innerSteps: options.innerSteps,
        fragments: options.fragments,
        overlap: options.overlap,
        alpha: options.alpha,
        codec,
        codecBlockSize,
        aggregation,
        lowRank,
        outerLr: options.outerLr,
        outerMomentum: options.outerMomentum,
        tokens: options.tokens,
        seed: options.seed,
        gpuTflops: options.gpuTflops,
        stepMs: options.stepMs,
        linkMbps: options.linkMbps,
        latencyMs: options.latencyMs,
        dryRun: Boolean(options.dryRun),
        createTrainer,
        trainTokens: corpus.train,
        evalBatches,
        onProgress: (tokens) => bar.update(tokens),
      });
      bar.update(options.tokens);
      bar.stop();
      results.push(result);
      if (options.csv) {
        mkdirSync(options.csv, { recursive: true });
        const rows = result.curve.map((p) => `${p.tokens},${p.simSeconds.toFixed(3)},${p.trainLoss ?? ''}`);
        writeFileSync(join(options.csv, `${name}.csv`), `tokens,sim_seconds,train_loss\n${rows.join('\n')}\n`);
      }
    }
  } finally {
    release();
  }

  const dp = results.find((r) => r.name === 'dp');
  if (!options.json) {
    console.log(
      `${options.preset}, ${options.workers} workers × batch ${options.batch}×${seqLen}, ${options.tokens.toLocaleString()} tokens per method, ` +
        `H ${options.innerSteps}, P ${options.fragments}, τ ${options.overlap}, α ${options.alpha}, codec ${options.codec}, ` +
        `${options.linkMbps} Mbit/s, ${options.latencyMs} ms${options.dryRun ? ', dry run' : ''}`,
    );
    console.log(
      'method             eval loss   bytes/worker   vs dp     peak/sync    sim time   compute util   rounds (aborted)',
    );
    for (const r of results) {
      const ratio =
        dp && r !== dp && r.bytesPerWorker > 0 ? `${(dp.bytesPerWorker / r.bytesPerWorker).toFixed(0)}×` : '—';
      console.log(
        `${r.name.padEnd(19)}${(r.evalLoss === null ? '—' : r.evalLoss.toFixed(4)).padEnd(12)}` +
          `${formatBytes(r.bytesPerWorker).padEnd(15)}${ratio.padEnd(10)}${formatBytes(r.peakSyncBytes).padEnd(13)}` +
          `${`${r.simSeconds.toFixed(1)} s`.padEnd(11)}${`${(100 * r.computeUtilization).toFixed(1)}%`.padEnd(15)}` +
          `${r.committedRounds} (${r.abortedRounds})`,
      );
    }
  }
  if (!options.json) return;
  console.log(
    JSON.stringify({
      methods: results.map(({ name, evalLoss, bytesPerWorker, peakSyncBytes, simSeconds, computeUtilization }) => ({
        name,
        evalLoss,
        bytesPerWorker,
        peakSyncBytes,
        simSeconds,
        computeUtilization,
      })),
    }),
  );
}
