/**
 * `shoal simulate`'s engine: one method's run (dp, diloco, streaming, streaming-fp4) with M
 * workers and a host replica in one process, on the real training engine, over the simulated
 * network on a virtual clock (sim/). Compute time per inner step is modelled (FLOPs at a given
 * TFLOP/s, or a fixed --step-ms); bytes are what the Transport carried, headers included.
 *
 * - dp: one replica with batch M·b (the M workers' batches side by side; mathematically M
 *   synchronised workers), the same AdamW settings; its bytes are a ring all-reduce of fp32
 *   gradients every step, 2·(M−1)/M·4 bytes per parameter per worker, and its time per step is
 *   compute + the all-reduce (2·(M−1) hops of latency + a 1/M slice at link speed).
 * - diloco: the whole model (P = 1) every H steps, fp32, no overlap (τ = 0: workers wait for the
 *   round) and θ_local replaced by θ_global (α = 0), as in DiLoCo.
 * - streaming: P fragments, overlap τ, merge α, fp32. streaming-fp4: the same with --codec.
 * - dilocox (DiLoCoX's two ideas on streaming-fp4, docs/lowrank.md): the low-rank codec (rank
 *   --low-rank, adaptive to --low-rank-target) and the one-step-delay overlap; each part alone is
 *   streaming-lowrank and streaming-delay.
 * Evaluation: θ_global after a final round of every fragment, on the same validation batches.
 *
 * With `pipeline` (DiLoCoX's pipeline-parallel replicas), each worker is a replica of S volunteers
 * that hold a stage each: its engine is a CPU `PipelineTrainer` (the stages in one process, the
 * same arithmetic as over the mesh) and its inner step takes the time `pipelineTiming` models for
 * the schedule over the stage link, instead of one engine's. The room config does not carry the
 * pipeline: to the coordinator a replica is one worker (in a host's pipeline room each stage
 * volunteer is a member and the coordinator forms the groups: packages/swarm/src/pipeline/).
 * dp's replica all-reduces per stage, in parallel: its time is the largest stage's ring, its
 * bytes the whole model's (per replica, all stages together).
 */
import { BatchSampler } from '@shoal/data';
import { DEFAULT_LOW_RANK, LOW_RANK_TARGET } from '@shoal/diloco';
import { learningRate } from '@shoal/gpu';
import {
  buildLayout,
  buildStageLayout,
  defaultTrainConfig,
  type GptConfig,
  initParameters,
  PipelineTrainer,
  presetConfig,
  splitStages,
  type TrainConfig,
  trainingStepFlops,
} from '@shoal/model';
import { createWireCodec, MESSAGE_SPECS, type RunConfig } from '@shoal/protocol';
import { RUN_OPTION_DEFAULTS, type RunOptions, runConfigOf } from '@shoal/room/run-options';
import { Host, Member, Worker } from '@shoal/swarm';
import { type PipelineTiming, pipelineTiming, SimKeys, SimNetwork, VirtualClock } from './index.ts';
import { METHODS, type MethodName } from './methods.ts';
import { NullTrainer, SharedParams } from './null-trainer.ts';
import { SharedRounds } from './shared-rounds.ts';
import { SharedVectors } from './shared-vectors.ts';
import type { CurvePoint, MethodResult, SimulateOptions } from './simulate-options.ts';

export type { CurvePoint, MethodResult, SimulateOptions } from './simulate-options.ts';
export { METHODS, type MethodName };

const RUN_ID = 1;

/**
 * What a dry run needs beside a method's options: no engine (NullTrainer models the steps), a stub
 * of training text for the samplers, no evaluation.
 */
export function dryRunInputs(
  seqLen: number,
): Pick<SimulateOptions, 'dryRun' | 'createTrainer' | 'trainTokens' | 'evalBatches'> {
  return {
    dryRun: true,
    createTrainer: () => Promise.reject(new Error('a dry run trains nothing')),
    trainTokens: new Uint8Array(seqLen * 64),
    evalBatches: [],
  };
}

/** The modelled compute time of one inner step of b sequences, ms (a pipeline replica's, under `pipeline`). */
function computeMsPerStep(options: SimulateOptions, model: GptConfig, seqLen: number): number {
  const timing = replicaTiming(options, model, seqLen);
  if (timing) return timing.stepMs;
  if (options.stepMs !== undefined) return options.stepMs;
  return (trainingStepFlops(model, options.batch, seqLen) / (options.gpuTflops * 1e12)) * 1000;
}

/** The pipeline replica's modelled step (per worker, b rows), or null without a pipeline. */
function replicaTiming(options: SimulateOptions, model: GptConfig, seqLen: number): PipelineTiming | null {
  if (!options.pipeline) return null;
  return pipelineTiming({
    model,
    pipeline: options.pipeline,
    batch: options.batch,
    seqLen,
    gpuTflops: options.gpuTflops,
    stepMs: options.stepMs,
  });
}

/**
 * A worker's engine: under `pipeline`, S CPU stages in one process with M micro-batches of the
 * same rows as a worker's (dp's replica trains M workers' batches at once: M times the micro-batches).
 */
function createEngine(options: SimulateOptions, model: GptConfig, train: TrainConfig, params: Float32Array) {
  const { pipeline } = options;
  if (!pipeline) return options.createTrainer(model, train, params);
  const micros = (pipeline.micros * train.batchSize) / options.batch;
  return PipelineTrainer.create(model, train, params, { stages: pipeline.stages, micros });
}

function trainConfig(options: SimulateOptions, model: GptConfig, batchSize: number): TrainConfig {
  const seqLen = options.seqLen ?? Math.min(64, model.blockSize);
  const steps = Math.max(1, Math.ceil(options.tokens / (options.workers * options.batch * seqLen)));
  return defaultTrainConfig({
    batchSize,
    seqLen,
    maxLr: options.lr,
    warmupSteps: Math.min(100, Math.floor(steps / 10)),
    totalSteps: steps,
    seed: options.seed,
  });
}

export async function simulateMethod(name: MethodName, options: SimulateOptions): Promise<MethodResult> {
  return name === 'dp' ? simulateDataParallel(options) : simulateSwarm(name, options);
}

async function simulateDataParallel(options: SimulateOptions): Promise<MethodResult> {
  const model = presetConfig(options.preset);
  const M = options.workers;
  const train = trainConfig(options, model, M * options.batch);
  const layout = buildLayout(model);
  const P = layout.size;
  const stepComputeMs = computeMsPerStep(options, model, train.seqLen);
  // a pipeline's stages all-reduce their own parameters at once, over their own links
  const ringP = options.pipeline ? largestStage(model, options.pipeline.stages) : P;
  const sliceMs = ((((4 * ringP) / M) * 8) / (options.linkMbps * 1e6)) * 1000;
  const allReduceMs = M > 1 ? 2 * (M - 1) * (options.latencyMs + sliceMs) : 0;
  const syncBytes = M > 1 ? (2 * (M - 1) * 4 * P) / M : 0;
  const steps = train.totalSteps;
  const tokensPerStep = M * options.batch * train.seqLen;
  const curve: CurvePoint[] = [];
  let evalLoss: number | null = null;
  if (!options.dryRun) {
    const samplers = Array.from(
      { length: M },
      (_, w) =>
        new BatchSampler(options.trainTokens, {
          batchSize: options.batch,
          seqLen: train.seqLen,
          seed: options.seed,
          worker: w,
        }),
    );
    const trainer = await createEngine(options, model, train, initParameters(layout, train.seed));
    try {
      const recent: number[] = [];
      for (let step = 0; step < steps; step++) {
        const parts = samplers.map((s) => s.next());
        const batch = {
          inputs: concat(parts.map((b) => b.inputs)),
          targets: concat(parts.map((b) => b.targets)),
        };
        recent.push(await trainer.step(batch, learningRate(step, train)));
        if (recent.length > 10) recent.shift();
        if ((step + 1) % 10 === 0 || step + 1 === steps) {
          curve.push({
            tokens: (step + 1) * tokensPerStep,
            simSeconds: ((step + 1) * (stepComputeMs + allReduceMs)) / 1000,
            trainLoss: recent.reduce((a, b) => a + b, 0) / recent.length,
          });
        }
        options.onProgress?.((step + 1) * tokensPerStep);
      }
      evalLoss = await evaluate(options, model, train, await trainer.getParams());
    } finally {
      trainer.destroy();
    }
  } else {
    options.onProgress?.(steps * tokensPerStep);
  }
  return {
    name: 'dp',
    evalLoss,
    bytesPerWorker: steps * syncBytes,
    peakSyncBytes: syncBytes,
    simSeconds: (steps * (stepComputeMs + allReduceMs)) / 1000,
    computeUtilization: stepComputeMs / (stepComputeMs + allReduceMs),
    curve,
    committedRounds: 0,
    abortedRounds: 0,
    pipeline: replicaTiming(options, model, train.seqLen),
  };
}

/** Parameters of the largest stage's owned range. */
function largestStage(model: GptConfig, stages: number): number {
  return Math.max(
    ...splitStages(model.nLayer, stages).map((spec) => {
      const [start, end] = buildStageLayout(model, spec).owned;
      return end - start;
    }),
  );
}

function concat(parts: Int32Array[]): Int32Array {
  const out = new Int32Array(parts.reduce((n, p) => n + p.length, 0));
  let offset = 0;
  for (const part of parts) {
    out.set(part, offset);
    offset += part.length;
  }
  return out;
}

async function evaluate(options: SimulateOptions, model: GptConfig, train: TrainConfig, params: Float32Array) {
  const [first] = options.evalBatches;
  if (!first) throw new RangeError('no validation batches');
  const evalTrain = { ...train, batchSize: first.inputs.length / train.seqLen };
  const trainer = await options.createTrainer(model, evalTrain, params);
  try {
    return await trainer.evaluate(options.evalBatches);
  } finally {
    trainer.destroy();
  }
}

/** The DiLoCo settings that make each method what it is. */
function methodDiloco(name: Exclude<MethodName, 'dp'>, options: SimulateOptions): Partial<RunConfig['diloco']> {
  const streaming = { fragments: options.fragments, overlap: options.overlap, alpha: options.alpha };
  const lowRank = options.lowRank ?? { rank: DEFAULT_LOW_RANK, target: LOW_RANK_TARGET };
  switch (name) {
    case 'diloco':
      return { fragments: 1, overlap: 0, alpha: 0, codec: 'fp32' };
    case 'streaming':
      return { ...streaming, codec: 'fp32' };
    case 'streaming-fp4':
      return { ...streaming, codec: options.codec };
    case 'streaming-lowrank':
      return { ...streaming, codec: options.codec, lowRank };
    case 'streaming-delay':
      return { ...streaming, codec: options.codec, overlapRounds: 1 };
    case 'dilocox':
      return { ...streaming, codec: options.codec, lowRank, overlapRounds: 1 };
  }
}

/**
 * The run options these simulator options stand for: the room `shoal host` would open with them
 * (the rest at their defaults).
 */
function roomOptions(options: SimulateOptions, model: GptConfig): RunOptions {
  return {
    ...RUN_OPTION_DEFAULTS,
    preset: options.preset,
    batch: options.batch,
    seq: options.seqLen ?? Math.min(64, model.blockSize),
    lr: options.lr,
    innerSteps: options.innerSteps,
    fragments: options.fragments,
    overlap: options.overlap,
    alpha: options.alpha,
    codec: options.codec,
    seed: options.seed,
    ...(options.codecBlockSize === undefined ? {} : { blockSize: options.codecBlockSize }),
    ...(options.outerLr === undefined ? {} : { outerLr: options.outerLr }),
    ...(options.outerMomentum === undefined ? {} : { outerMomentum: options.outerMomentum }),
  };
}

/**
 * A method's RunConfig: the room's (runConfigOf, the one path from options to a RunConfig) with
 * the method's DiLoCo settings over it, and a schedule as long as the method's token budget.
 */
function methodConfig(name: Exclude<MethodName, 'dp'>, options: SimulateOptions, model: GptConfig): RunConfig {
  const room = runConfigOf(roomOptions(options, model), { model });
  const { warmupSteps, totalSteps } = trainConfig(options, model, options.batch);
  return {
    ...room,
    train: { ...room.train, warmupSteps, totalSteps },
    diloco: {
      ...room.diloco,
      ...methodDiloco(name, options),
      ...(options.aggregation ? { aggregation: options.aggregation } : {}),
    },
  };
}

const CONTRIBUTION = MESSAGE_SPECS.contribution.id;
const SHARD_RESULT = MESSAGE_SPECS['shard-result'].id;

async function simulateSwarm(name: Exclude<MethodName, 'dp'>, options: SimulateOptions): Promise<MethodResult> {
  const model = presetConfig(options.preset);
  const config = methodConfig(name, options, model);
  const { train } = config;
  const M = options.workers;
  const stepComputeMs = computeMsPerStep(options, model, train.seqLen);
  const clock = new VirtualClock();
  const network = new SimNetwork(clock, {
    latencyMs: options.latencyMs,
    upMbps: options.linkMbps,
    downMbps: options.linkMbps,
    copyOnSend: options.copyMessages ?? false,
  });
  // A dry run's workers share one θ_local while theirs are equal (sim/null-trainer.ts).
  const dryParams = new SharedParams();
  // The replicas (host and workers) hold one copy of each θ_global, m and round result they agree on.
  const vectors = options.vectors === undefined ? new SharedVectors() : (options.vectors ?? undefined);
  // and each round's decoded results, outer step and aggregates once (round-memo.ts), and one init
  const memo = options.rounds ?? new SharedRounds();
  const codec = await createWireCodec();
  // Signed and checked as in every real room: each member has a key pair, bound to its id.
  const keys = await SimKeys.create(1 + M);
  let committed = 0;
  let aborted = 0;
  const curve: CurvePoint[] = [];
  const host = await Host.create({
    member: new Member(network.join('host'), codec, clock, RUN_ID, keys.memberOptions('host')),
    config,
    params: memo.seededInit(model, train.seed),
    vectors,
    memo,
    // Generous: a dry run of `base` over 1 Mbit/s moves ~100 MB per round.
    deadlineMs: 3_600_000 / 2,
    onEvent: (event) => {
      options.onEvent?.(event, clock.now());
      if (event.event === 'round-committed') {
        committed++;
        const losses = workers.map((w) => w.metrics.loss).filter((l): l is number => l !== null && Number.isFinite(l));
        curve.push({
          tokens: host.coordinator.roomTokens,
          simSeconds: clock.now() / 1000,
          trainLoss: losses.length > 0 ? losses.reduce((a, b) => a + b, 0) / losses.length : null,
        });
      }
      if (event.event === 'round-aborted') aborted++;
    },
  });
  // Bytes of the collective per (worker, fragment, round): the sync's peak.
  const syncBytes = new Map<string, number>();
  const perWorkerTokens = Math.ceil(options.tokens / M);
  const workers = Array.from({ length: M }, (_, i) => {
    const peer = `w${i}`;
    const transport = network.join(peer);
    countSyncBytes(network, peer, syncBytes);
    const sampler = new BatchSampler(options.trainTokens, {
      batchSize: options.batch,
      seqLen: train.seqLen,
      seed: options.seed,
      worker: i,
    });
    return new Worker({
      member: new Member(transport, codec, clock, RUN_ID, keys.memberOptions(peer)),
      coordinator: 'host',
      capabilities: { backend: options.dryRun ? 'none' : 'cpu', adapter: 'simulated', tokensPerSecond: 0 },
      createTrainer: (run, params) =>
        options.dryRun
          ? Promise.resolve(new NullTrainer(run.model, run.train, params, dryParams))
          : createEngine(options, run.model, run.train, params),
      nextBatch: () => sampler.next(),
      sleepAfterStepMs: () => stepComputeMs,
      // the clock models each step's time: a WebGPU engine's steps are awaited one by one, as the
      // CPU engine's, so the run does not depend on how far its real queue runs ahead
      pipelineDepth: 1,
      vectors,
      memo,
      initialParams: (run) => memo.seededInit(run.model, run.train.seed),
    });
  });
  try {
    let reported = 0;
    const running = workers.map((w) =>
      w.join().then(() =>
        w.run(() => {
          const room = workers.reduce((n, x) => n + x.metrics.tokens, 0);
          if (room - reported >= 8192 || w.metrics.tokens >= perWorkerTokens) {
            reported = room;
            options.onProgress?.(Math.min(room, options.tokens));
          }
          return w.metrics.tokens >= perWorkerTokens;
        }),
      ),
    );
    let stopped = false;
    void Promise.all(running).then(() => {
      stopped = true;
    });
    await clock.runAsync({ stopWhen: () => stopped });
    const trainingEnd = clock.now();

    await finalSync(host, workers, clock);

    const bytesPerWorker = workers.reduce((n, _, i) => n + network.stats(`w${i}`).bytesSent, 0) / M;
    const computeMs = workers.reduce((n, w) => n + w.metrics.innerStep * stepComputeMs, 0);
    const evalLoss = options.dryRun ? null : await evaluate(options, model, train, host.params());
    return {
      name,
      evalLoss,
      bytesPerWorker,
      peakSyncBytes: Math.max(0, ...syncBytes.values()),
      simSeconds: clock.now() / 1000,
      computeUtilization: trainingEnd > 0 ? Math.min(1, computeMs / (M * trainingEnd)) : 0,
      curve,
      committedRounds: committed,
      abortedRounds: aborted,
      pipeline: replicaTiming(options, model, train.seqLen),
    };
  } finally {
    for (const w of workers) w.destroy();
  }
}

/** Counts `peer`'s bytes of the collective per (fragment, round): the sync's peak. */
function countSyncBytes(network: SimNetwork, peer: string, syncBytes: Map<string, number>): void {
  network.onSend(peer, (_to, bytes) => {
    const kind = bytes[6];
    if (kind === CONTRIBUTION || kind === SHARD_RESULT) {
      const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
      const key = `${peer}:${view.getUint16(16, true)}:${view.getUint32(12, true)}`;
      syncBytes.set(key, (syncBytes.get(key) ?? 0) + bytes.byteLength);
    }
    return 'deliver';
  });
}

/** The final sync: one more round of every fragment, after the inner loops have stopped. */
async function finalSync(host: Host, workers: Worker[], clock: VirtualClock): Promise<void> {
  const fragments = host.fragments.map((f) => f.index);
  const pending = new Set(fragments);
  let done = false;
  const syncing = (async () => {
    while (pending.size > 0 || fragments.some((p) => host.coordinator.isInFlight(p))) {
      for (const p of [...pending]) if (host.coordinator.openNow(p)) pending.delete(p);
      for (const w of workers) await w.boundary();
      await clock.sleep(10);
    }
    for (const w of workers) await w.boundary();
    done = true;
  })();
  await clock.runAsync({ stopWhen: () => done });
  await syncing;
}
