/**
 * `shoal train`: single-machine training, top to bottom as nanoGPT reads: data, model,
 * optimizer, loop, evaluation, checkpoint.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { bitsPerByte } from '@shoal/data';
import { formatAdapter, learningRate, type MatmulPrecision } from '@shoal/gpu';
import {
  buildLayout,
  CpuTrainer,
  decodeState,
  decodeWeights,
  defaultTrainConfig,
  describeMatmul,
  encodeState,
  encodeWeights,
  type GptConfig,
  GpuTrainer,
  initParameters,
  type StepQueueStats,
  type TrainConfig,
  type Trainer,
} from '@shoal/model';
import cliProgress from 'cli-progress';
import { readInput, writeAtomically } from './files.ts';
import { acquireCliGpu } from './grads-webgpu.ts';
import { openTrainData, type SavedData } from './train-data.ts';
import { presetOption, UsageError } from './usage.ts';

export interface TrainOptions {
  preset: string;
  steps: number;
  /** Stop after this many steps although the schedule spans --steps (to split a run). */
  stopAfter?: number;
  batch: number;
  seq?: number;
  lr: number;
  seed: number;
  backend: 'webgpu' | 'cpu';
  /** The WebGPU engine's matmul operands (--precision): f32, or f16 with f32 accumulation. */
  precision?: MatmulPrecision;
  /** CPU engine threads (--backend cpu). */
  threads?: number;
  data?: string;
  /** A packed dataset's folder or URL (`shoal data pack`); not with --data. */
  dataset?: string;
  /** Shard budget, MiB (default 4 × the dataset's largest training shard). */
  cacheMib?: number;
  /** Keep fetched shards here (default: none for a folder, the XDG cache for a URL). */
  cacheDir?: string;
  /** Validation tokens per evaluation of a dataset run. */
  evalBytes?: number;
  resume?: string;
  checkpointDir: string;
  checkpointEvery: number;
  evalEvery: number;
  evalBatches: number;
  json?: boolean;
}

type SavedRun = SavedData & {
  step: number;
  tokens: number;
  train: TrainConfig;
};

/** How often a webgpu run reads its loss back (every step would stall the GPU queue each step). */
const LOSS_EVERY = 10;

const round3 = (x: number) => Math.round(x * 1000) / 1000;

/** A loss as people compare it: bits per byte, with the nats the model minimises beside it. */
const lossText = (nats: number) => `${bitsPerByte(nats).toFixed(3)} bits/byte (${nats.toFixed(3)} nats)`;

const statePath = (weightsPath: string) => `${weightsPath.replace(/\.safetensors$/, '')}.state.safetensors`;

async function createTrainer(
  options: Pick<TrainOptions, 'backend' | 'threads' | 'precision'>,
  config: GptConfig,
  train: TrainConfig,
  params: Float32Array,
): Promise<{
  trainer: Trainer;
  adapter: string | null;
  matmul?: string;
  precision?: MatmulPrecision;
  release(): void;
}> {
  if (options.backend === 'cpu') {
    const trainer = new CpuTrainer(config, train, params, { threads: options.threads });
    await trainer.ready();
    const { count, note } = trainer.threads;
    const adapter = `CPU (WebAssembly SIMD), ${count} thread${count === 1 ? '' : 's'}${note ? ` (${note})` : ''}`;
    return { trainer, adapter, release: () => trainer.destroy() };
  }
  const precision = options.precision ?? 'f32';
  // Only the f16 path asks for subgroup matrices (tensor cores).
  const gpu = await acquireCliGpu({ subgroupMatrix: precision === 'f16' });
  try {
    const trainer = await GpuTrainer.create(gpu.device, config, train, params, undefined, { precision });
    const matmul = describeMatmul(trainer.model.kernels.matmulConfig);
    return { trainer, adapter: formatAdapter(gpu.report), matmul, precision, release: () => gpu.destroy() };
  } catch (error) {
    gpu.destroy();
    throw error instanceof RangeError ? new UsageError(error.message) : error;
  }
}

/** What a run's last line reports. */
interface TrainResult {
  trainLoss: number;
  valLoss: number | null;
  step: number;
  tokens: number;
  seconds: number;
  tokensPerSecond: number;
  queue: StepQueueStats | null;
}

/** The model and run state: fresh from a preset, or resumed from a checkpoint (--resume). */
function loadModel(options: TrainOptions): {
  config: GptConfig;
  params: Float32Array;
  saved: { run: SavedRun; m: Float32Array; v: Float32Array; adamStep: number } | null;
} {
  let config: GptConfig;
  let params: Float32Array;
  let saved: { run: SavedRun; m: Float32Array; v: Float32Array; adamStep: number } | null = null;
  if (options.resume) {
    try {
      ({ config, params } = decodeWeights(readInput(options.resume, 'checkpoint')));
      const { vectors, state } = decodeState(readInput(statePath(options.resume), 'run state'), buildLayout(config), [
        'adamw.m',
        'adamw.v',
      ]);
      const run = state as unknown as SavedRun & { adamStep: number };
      saved = {
        run,
        m: vectors['adamw.m'] as Float32Array,
        v: vectors['adamw.v'] as Float32Array,
        adamStep: run.adamStep,
      };
    } catch (error) {
      if (error instanceof UsageError) throw error;
      throw new UsageError(`cannot resume from ${options.resume}: ${(error as Error).message}`);
    }
  } else {
    config = presetOption(options.preset);
    params = initParameters(buildLayout(config), options.seed);
  }
  return { config, params, saved };
}

/** The progress bar on stderr. */
function progressBar(): cliProgress.SingleBar {
  return new cliProgress.SingleBar(
    {
      format: 'step {value}/{total} |{bar}| bits/byte {loss} | val {val} | {tps} tok/s | ETA {eta_formatted}',
      stream: process.stderr,
      hideCursor: true,
      etaBuffer: 20,
      // Piped or in CI: a plain line every 10 s instead of a redrawn bar.
      noTTYOutput: true,
      notTTYSchedule: 10_000,
    },
    cliProgress.Presets.shades_classic,
  );
}

/** The run's last line: one JSON object with --json, else a sentence. */
function printResult(
  options: TrainOptions,
  engine: Awaited<ReturnType<typeof createTrainer>>,
  data: Awaited<ReturnType<typeof openTrainData>>,
  weightsPath: string,
  { trainLoss, valLoss, step, tokens, seconds, tokensPerSecond, queue }: TrainResult,
): void {
  if (options.json) {
    console.log(
      JSON.stringify({
        valLoss,
        trainLoss,
        valBitsPerByte: valLoss === null ? null : bitsPerByte(valLoss),
        trainBitsPerByte: bitsPerByte(trainLoss),
        steps: step,
        tokens,
        seconds,
        tokensPerSecond,
        backend: options.backend,
        adapter: engine.adapter,
        ...(engine.matmul ? { matmul: engine.matmul, precision: engine.precision } : {}),
        checkpoint: weightsPath,
        ...(queue ? { queued: round3(queue.fraction) } : {}),
        ...data.summary(),
      }),
    );
  } else {
    console.log(
      `trained ${step} steps (${tokens.toLocaleString()} tokens) in ${seconds.toFixed(1)} s on ${options.backend} ` +
        `(${tokensPerSecond.toLocaleString()} tokens/s in training steps): ` +
        `train ${lossText(trainLoss)}, val ${valLoss === null ? '—' : lossText(valLoss)}; checkpoint ${weightsPath}` +
        (queue ? `; a step queued on the GPU ${(100 * queue.fraction).toFixed(1)}% of the loop's time` : ''),
    );
  }
}

export async function trainCommand(options: TrainOptions): Promise<void> {
  const started = performance.now();

  // --- model and run state: fresh from a preset, or resumed from a checkpoint -----------------
  const { config, params, saved } = loadModel(options);
  const seqLen = saved?.run.train.seqLen ?? options.seq ?? config.blockSize;
  if (seqLen > config.blockSize)
    throw new UsageError(`--seq ${seqLen} exceeds the model's block_size ${config.blockSize}`);
  const train: TrainConfig =
    saved?.run.train ??
    defaultTrainConfig({
      batchSize: options.batch,
      seqLen,
      maxLr: options.lr,
      totalSteps: options.steps,
      warmupSteps: Math.min(100, Math.floor(options.steps / 10)),
      seed: options.seed,
    });

  // --- data: a text, or a packed dataset's shards ------------------------------------------------
  if (options.data !== undefined && options.dataset !== undefined) {
    throw new UsageError('--data and --dataset cannot be used together: train on a text or on a packed dataset');
  }
  const data = await openTrainData(options, { batchSize: train.batchSize, seqLen, seed: train.seed }, saved?.run);
  if (data.describe && !options.json) console.error(data.describe);
  const evalSet = data.evalSet;

  // --- optimizer --------------------------------------------------------------------------------
  const engine = await createTrainer(options, config, train, params);
  const { trainer } = engine;
  if (engine.adapter && !options.json) {
    console.error(`adapter: ${engine.adapter}${engine.matmul ? `; ${engine.matmul}` : ''}`);
  }
  // The GPU queues steps back to back and reads the loss every LOSS_EVERY steps (and at the last).
  const lossEvery = options.backend === 'webgpu' ? LOSS_EVERY : 1;
  if (saved) await trainer.setOptimizerState({ m: saved.m, v: saved.v, step: saved.adamStep });
  const tokensPerStep = train.batchSize * seqLen;
  let step = saved?.run.step ?? 0;
  let tokens = saved?.run.tokens ?? 0;
  const lastStep = step + Math.min(options.steps, options.stopAfter ?? options.steps);

  mkdirSync(options.checkpointDir, { recursive: true });
  const weightsPath = join(options.checkpointDir, `shoal-${options.resume ? 'resumed' : options.preset}.safetensors`);
  const checkpoint = async () => {
    const optimizer = await trainer.getOptimizerState();
    const run: SavedRun & { adamStep: number } = {
      step,
      tokens,
      ...data.saved(),
      train,
      adamStep: optimizer.step,
    };
    writeAtomically(weightsPath, encodeWeights(trainer.layout, await trainer.getParams()));
    writeAtomically(
      statePath(weightsPath),
      encodeState(trainer.layout, { 'adamw.m': optimizer.m, 'adamw.v': optimizer.v }, run),
    );
  };

  // --- loop -------------------------------------------------------------------------------------
  const bar = progressBar();
  bar.start(lastStep, step, { loss: '—', val: '—', tps: '—' });
  const recent: number[] = [];
  let lastLoss = Number.NaN;
  let valLoss: number | null = null;
  // Training throughput: time in steps only (validation and checkpoints are not training).
  let stepSeconds = 0;
  const firstStep = step;
  // how busy the GPU queue is over the loop, to its last step (validation and checkpoints on the
  // way count as idle time; the final validation does not count)
  trainer.queue?.reset();
  let queue: StepQueueStats | null = null;
  // A failed step or shard stops the run; the engine (and the CPU engine's threads) go either way.
  try {
    while (step < lastStep) {
      const lr = learningRate(step, {
        maxLr: train.maxLr,
        minLr: train.minLr,
        warmupSteps: train.warmupSteps,
        totalSteps: train.totalSteps,
      });
      const readLoss = (step + 1) % lossEvery === 0 || step + 1 === lastStep;
      const batch = await data.next();
      const stepStarted = performance.now();
      const loss = await trainer.step(batch, lr, { readLoss });
      stepSeconds += (performance.now() - stepStarted) / 1000;
      if (readLoss && !Number.isFinite(loss)) throw new UsageError(`loss became ${loss} at step ${step}: lower --lr`);
      step++;
      tokens += tokensPerStep;
      if (readLoss) {
        lastLoss = loss;
        recent.push(loss);
        if (recent.length > 20) recent.shift();
      }
      if (step === lastStep) queue = trainer.queue?.stats() ?? null;
      if ((options.evalEvery > 0 && step % options.evalEvery === 0) || step === lastStep)
        valLoss = await trainer.evaluate(evalSet);
      if (options.checkpointEvery > 0 && step % options.checkpointEvery === 0) await checkpoint();
      bar.update(step, {
        loss: Number.isNaN(lastLoss) ? '—' : bitsPerByte(lastLoss).toFixed(3),
        val: valLoss === null ? '—' : bitsPerByte(valLoss).toFixed(3),
        tps: Math.round(((step - firstStep) * tokensPerStep) / stepSeconds).toLocaleString(),
      });
    }
    await checkpoint();
  } finally {
    bar.stop();
    trainer.destroy();
    engine.release();
  }

  const trainLoss = recent.reduce((a, b) => a + b, 0) / Math.max(1, recent.length);
  const seconds = (performance.now() - started) / 1000;
  const tokensPerSecond = Math.round(((step - firstStep) * tokensPerStep) / stepSeconds);
  printResult(options, engine, data, weightsPath, {
    trainLoss,
    valLoss,
    step,
    tokens,
    seconds,
    tokensPerSecond,
    queue,
  });
}
