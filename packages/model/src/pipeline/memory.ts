/**
 * What a volunteer needs in memory to hold one pipeline stage (or the whole model), in bytes, and
 * the fewest stages that let every volunteer of a replica fit under a cap (DiLoCoX's reason for
 * pipelines: a model that no single volunteer could hold).
 *
 * Per stage, all fp32 (4 bytes a value):
 *   inner state  4 × (params + grads + AdamW m + v) over the stage's vector (the tied wte copy included)
 *   outer state  4 × (θ_global + outer momentum) over the parameters the stage owns: a stage
 *                worker's replica follows its stage's fragments only (docs/pipeline.md)
 *   activations  4 × activationFloats(microBatch, seqLen, the stage's blocks and head)
 *                × 2 (the activations and their gradients) × micro-batches in flight
 * Buffers an engine adds (kernel scratch, staging, alignment padding) are not counted.
 */

import type { GptConfig } from '../config.ts';
import { activationFloats } from '../cpu/activations.ts';
import { type PipelineSchedule, scheduleOrder } from './schedule.ts';
import { buildStageLayout, type StageSpec, splitStages } from './stages.ts';
import { pipelineMicros } from './trainer.ts';

const FLOAT_BYTES = 4;

export interface StageMemoryShape {
  /** Rows per micro-batch. */
  microBatch: number;
  seqLen: number;
  /** Micro-batches whose activations the stage holds at once (`stageInFlight`). */
  inFlight: number;
}

/** A stage's need, by part; `total` is what a volunteer must hold. */
export interface StageMemory {
  /** params + grads + AdamW m + v, the tied copy included. */
  innerBytes: number;
  /** θ_global + outer momentum over the owned range (its stage's fragments). */
  outerBytes: number;
  /** Activations and their gradients for `inFlight` micro-batches. */
  activationBytes: number;
  total: number;
}

function requireCount(field: string, value: number): void {
  if (!Number.isInteger(value) || value < 1) throw new RangeError(`${field} must be a positive integer, got ${value}`);
}

/** The bytes a volunteer holding `stage` needs, by part. */
export function stageMemory(config: GptConfig, stage: StageSpec, o: StageMemoryShape): StageMemory {
  requireCount('microBatch', o.microBatch);
  requireCount('seqLen', o.seqLen);
  requireCount('inFlight', o.inFlight);
  const layout = buildStageLayout(config, stage);
  const shape = { layers: stage.endBlock - stage.firstBlock, head: stage.head };
  const innerBytes = 4 * FLOAT_BYTES * layout.size;
  const outerBytes = 2 * FLOAT_BYTES * (layout.owned[1] - layout.owned[0]);
  const activationBytes = 2 * FLOAT_BYTES * activationFloats(config, o.microBatch, o.seqLen, shape) * o.inFlight;
  return { innerBytes, outerBytes, activationBytes, total: innerBytes + outerBytes + activationBytes };
}

/** The bytes a volunteer holding `stage` needs (`stageMemory(…).total`). */
export function stageMemoryBytes(config: GptConfig, stage: StageSpec, o: StageMemoryShape): number {
  return stageMemory(config, stage, o).total;
}

/** The bytes one volunteer holding the whole model needs (S = 1: one batch of `batch` rows in flight). */
export function modelMemoryBytes(config: GptConfig, batch: number, seqLen: number): number {
  const [whole] = splitStages(config.nLayer, 1) as [StageSpec];
  return stageMemoryBytes(config, whole, { microBatch: batch, seqLen, inFlight: 1 });
}

/**
 * Micro-batches whose activations stage s holds at once: 1F1B min(S − s, M) (its warm-up
 * forwards plus the one whose backward is next), GPipe all M. The same as `simulateSchedule`'s
 * peakInFlight, without timing anything.
 */
export function stageInFlight(schedule: PipelineSchedule, stages: number, micros: number): number[] {
  scheduleOrder(schedule, stages, micros); // checks the arguments
  return Array.from({ length: stages }, (_, s) => (schedule === 'gpipe' ? micros : Math.min(stages - s, micros)));
}

/** A pipeline's split and what each of its volunteers needs. */
export interface StagePlan {
  /** S. */
  stages: number;
  /** M (1 for S = 1: the whole batch in one pass). */
  micros: number;
  /** Bytes per stage, s = 0 … S−1. */
  stageBytes: number[];
  /** The largest of them: what the replica's smallest volunteer must hold. */
  maxStageBytes: number;
}

/**
 * Every stage's need for S stages: S = 1 is the whole model on one batch (`modelMemoryBytes`);
 * S > 1 splits the batch into M micro-batches (`micros`, else `defaultMicros`), each stage
 * holding `stageInFlight` of them.
 */
export function stagePlan(
  config: GptConfig,
  batch: number,
  seqLen: number,
  stages: number,
  micros: number | undefined,
  schedule: PipelineSchedule,
): StagePlan {
  const specs = splitStages(config.nLayer, stages);
  if (stages === 1) {
    const bytes = modelMemoryBytes(config, batch, seqLen);
    return { stages, micros: 1, stageBytes: [bytes], maxStageBytes: bytes };
  }
  const M = pipelineMicros(batch, stages, micros);
  const inFlight = stageInFlight(schedule, stages, M);
  const stageBytes = specs.map((spec, s) =>
    stageMemoryBytes(config, spec, { microBatch: batch / M, seqLen, inFlight: inFlight[s] as number }),
  );
  return { stages, micros: M, stageBytes, maxStageBytes: Math.max(...stageBytes) };
}

/** 1536 → '1.50 KiB': a byte count for messages. */
export function formatMemory(bytes: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes;
  let unit = 0;
  while (Math.abs(value) >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return unit === 0 ? `${bytes} B` : `${value.toFixed(2)} ${units[unit]}`;
}

/**
 * The smallest S (1 … n_layer) whose every stage fits in `maxBytes`, with its plan. Throws a
 * RangeError naming what the largest stage of the finest split (S = n_layer, one block a stage)
 * still needs, and by how much it exceeds the cap.
 */
export function fewestStages(
  config: GptConfig,
  batch: number,
  seqLen: number,
  micros: number | undefined,
  schedule: PipelineSchedule,
  maxBytes: number,
): StagePlan {
  if (!Number.isFinite(maxBytes) || maxBytes <= 0)
    throw new RangeError(`memory cap must be > 0 bytes, got ${maxBytes}`);
  let plan: StagePlan | undefined;
  for (let stages = 1; stages <= config.nLayer; stages++) {
    plan = stagePlan(config, batch, seqLen, stages, micros, schedule);
    if (plan.maxStageBytes <= maxBytes) return plan;
  }
  const finest = plan as StagePlan;
  const worst = finest.stageBytes.indexOf(finest.maxStageBytes);
  throw new RangeError(
    `no pipeline fits a cap of ${formatMemory(maxBytes)}: with ${finest.stages} stages (one block each, ` +
      `M = ${finest.micros}, ${schedule}) stage ${worst} still needs ${formatMemory(finest.maxStageBytes)}, ` +
      `${formatMemory(finest.maxStageBytes - maxBytes)} over the cap`,
  );
}
