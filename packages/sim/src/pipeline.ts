/**
 * A simulated worker as a pipeline-parallel replica (DiLoCoX): S volunteers, each holding a
 * stage's blocks, joined by a fast intra-group link (the same LAN). This file picks S from a
 * per-volunteer memory cap and models the replica's inner step: each stage's forward and backward
 * per micro-batch from its share of the step's FLOPs, activations (and their gradients) crossing
 * the stage link, scheduled GPipe or 1F1B by `simulateSchedule`; then the tied-wte gradient
 * exchange between the first and last stage and the clip-norm exchange.
 */
import {
  activationBytesPerStep,
  fewestStages,
  formatMemory,
  type GptConfig,
  modelMemoryBytes,
  type PipelineSchedule,
  type StageSpec,
  simulateSchedule,
  splitStages,
  stagePlan,
  trainingStepFlops,
} from '@shoal/model';
import { serializationMs } from './links.ts';

/** The replica's shape, as the simulator runs it. */
export interface SimPipeline {
  /** S ≥ 2. */
  stages: number;
  /** M: micro-batches per inner step; divides the batch. */
  micros: number;
  schedule: PipelineSchedule;
  activations: 'f32' | 'bf16';
  /** The link between two volunteers of a replica, Mbit/s, each way. */
  stageLinkMbps: number;
  /** Its one-way latency, ms. */
  stageLatencyMs: number;
}

export { DEFAULT_STAGE_LINK } from './methods.ts';

export interface PipelinePlanInput {
  model: GptConfig;
  /** Rows per inner step of one replica. */
  batch: number;
  seqLen: number;
  /** S the person asked for; undefined: the fewest that fit `maxMemoryBytes` (1 without a cap). */
  stages?: number;
  /** M, or undefined for `defaultMicros`. */
  micros?: number;
  schedule: PipelineSchedule;
  /** Each volunteer's memory cap, bytes. */
  maxMemoryBytes?: number;
}

export interface PipelinePlan {
  stages: number;
  /** 1 for S = 1. */
  micros: number;
  /** Bytes each stage's volunteer needs (one entry for S = 1). */
  stageBytes: number[];
  maxStageBytes: number;
  /** What one volunteer holding the whole model would need. */
  wholeModelBytes: number;
}

/**
 * The replica's S and M for a memory cap. With `stages` it checks them against the cap (a
 * RangeError saying which stage needs how much more, and the S that would fit); without, it
 * takes the fewest stages that fit (`fewestStages`).
 */
export function planPipeline(input: PipelinePlanInput): PipelinePlan {
  const { model, batch, seqLen, micros, schedule, maxMemoryBytes: cap } = input;
  const wholeModelBytes = modelMemoryBytes(model, batch, seqLen);
  if (input.stages === undefined) {
    const plan =
      cap === undefined
        ? stagePlan(model, batch, seqLen, 1, micros, schedule)
        : fewestStages(model, batch, seqLen, micros, schedule, cap);
    return { ...plan, wholeModelBytes };
  }
  const plan = stagePlan(model, batch, seqLen, input.stages, micros, schedule);
  if (cap !== undefined && plan.maxStageBytes > cap) {
    const worst = plan.stageBytes.indexOf(plan.maxStageBytes);
    let fits: string;
    try {
      fits = `; ${fewestStages(model, batch, seqLen, micros, schedule, cap).stages} stages fit`;
    } catch {
      fits = input.stages < model.nLayer ? `; nor does any split up to ${model.nLayer} stages` : '';
    }
    const what = input.stages === 1 ? '1 pipeline stage (the whole model) does' : `${input.stages} pipeline stages do`;
    throw new RangeError(
      `${what} not fit a memory cap of ${formatMemory(cap)}: ` +
        `stage ${worst} needs ${formatMemory(plan.maxStageBytes)}, ${formatMemory(plan.maxStageBytes - cap)} over${fits}`,
    );
  }
  return { ...plan, wholeModelBytes };
}

/**
 * FLOPs of one training step (forward + backward) of stage `stage` on B×T tokens: its blocks'
 * share of `trainingStepFlops` (matmuls 6·12C² per block per token, causal attention), plus the
 * tied head's V·C matmul on the last stage. Over the stages it sums to `trainingStepFlops`.
 */
export function stageStepFlops(config: GptConfig, stage: StageSpec, B: number, T: number): number {
  const { nEmbd: C, vocabSize: V } = config;
  const L = stage.endBlock - stage.firstBlock;
  const matmulParams = L * 12 * C * C + (stage.head ? V * C : 0);
  const attention = L * 2 * B * C * T * (T + 1);
  return 6 * matmulParams * B * T + 3 * attention;
}

export interface PipelineTiming {
  /** The replica's inner step, ms: the schedule's makespan plus the tied-gradient and norm exchanges. */
  stepMs: number;
  /** The schedule's idle share of the stages' time (the exchanges after it not counted). */
  bubbleFraction: number;
  /** Bytes over the replica's stage links per inner step (activations forward, gradients back). */
  activationBytesPerStep: number;
  /** Per stage, one micro-batch's forward and backward, ms. */
  forwardMs: number[];
  backwardMs: number[];
  /** One micro-batch's activations over a stage link, ms (latency included). */
  transferMs: number;
  /** After the last backward: the tied wte gradient between the first and last stage, and the norm, ms. */
  syncMs: number;
}

/**
 * The replica's inner step. Every volunteer's GPU is the modelled one: a stage's micro-batch
 * takes its FLOPs at `gpuTflops` (or, with `stepMs`, the single-engine step time scaled by the
 * stage's FLOP share and divided by M), a third forward and two thirds backward (2 + 4 FLOPs per
 * parameter per token). After the schedule, the first and last stage swap their tied wte
 * gradients (V·C f32 each way, at once) and every stage sends its Σg² and receives the sum
 * (two latencies); AdamW's own time is not modelled, as in the single-engine step.
 */
export function pipelineTiming(o: {
  model: GptConfig;
  pipeline: SimPipeline;
  batch: number;
  seqLen: number;
  gpuTflops: number;
  stepMs?: number;
}): PipelineTiming {
  const { model, pipeline, batch, seqLen } = o;
  const { stages, micros, stageLinkMbps, stageLatencyMs } = pipeline;
  const microBatch = batch / micros;
  const specs = splitStages(model.nLayer, stages);
  const microMs = specs.map((spec) => {
    const flops = stageStepFlops(model, spec, microBatch, seqLen);
    return o.stepMs !== undefined
      ? (o.stepMs * flops) / trainingStepFlops(model, microBatch, seqLen) / micros
      : (flops / (o.gpuTflops * 1e12)) * 1000;
  });
  const forwardMs = microMs.map((ms) => ms / 3);
  const backwardMs = microMs.map((ms) => (2 * ms) / 3);
  const bytesPerValue = pipeline.activations === 'bf16' ? 2 : 4;
  const transferMs = stageLatencyMs + serializationMs(microBatch * seqLen * model.nEmbd * bytesPerValue, stageLinkMbps);
  const schedule = simulateSchedule({
    schedule: pipeline.schedule,
    forwardSeconds: forwardMs.map((ms) => ms / 1000),
    backwardSeconds: backwardMs.map((ms) => ms / 1000),
    micros,
    transferSeconds: transferMs / 1000,
  });
  const tiedMs = stageLatencyMs + serializationMs(4 * model.vocabSize * model.nEmbd, stageLinkMbps);
  const syncMs = tiedMs + 2 * stageLatencyMs;
  return {
    stepMs: schedule.stepSeconds * 1000 + syncMs,
    bubbleFraction: schedule.bubbleFraction,
    activationBytesPerStep: activationBytesPerStep({
      stages,
      micros,
      microBatch,
      seqLen,
      channels: model.nEmbd,
      bytesPerValue,
    }),
    forwardMs,
    backwardMs,
    transferMs,
    syncMs,
  };
}
