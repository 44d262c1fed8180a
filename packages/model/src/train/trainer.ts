/**
 * What `shoal train`, the simulator and the swarm worker need from a training engine, whatever
 * runs it (CPU or WebGPU). Parameters and optimizer state cross this boundary in the logical,
 * unpadded layout.
 */
import type { ParamLayout } from '../layout.ts';
import type { TrainConfig } from '../train-config.ts';

/** A logical range of parameters, [start, end). */
export type ParamRange = readonly [number, number];

export interface Batch {
  inputs: Int32Array;
  targets: Int32Array;
}

export interface OptimizerState {
  m: Float32Array;
  v: Float32Array;
  /** AdamW steps taken (bias correction). */
  step: number;
}

export interface StepOptions {
  /**
   * Return the batch's loss (default). false lets a GPU backend queue the step and return NaN
   * at once, so steps run back to back without a readback; the CPU backend always has the loss.
   */
  readLoss?: boolean;
}

/** How busy an engine's step queue has been since its last reset (QueueMeter). */
export interface StepQueueStats {
  /** Wall time during which at least one submitted step had not finished, ms. */
  busyMs: number;
  wallMs: number;
  /** busyMs / wallMs: the fraction of the time the engine had a step queued. */
  fraction: number;
  /** Steps submitted and not yet finished. */
  inFlight: number;
  /** Steps finished since the reset. */
  steps: number;
  /**
   * A step's time on the engine, ms: the mean over the last few finished steps, each from its
   * submit or its predecessor's end (whichever is later) to its own end.
   */
  stepMs: number;
}

/** A GPU engine's queue of submitted steps, which may run while JavaScript does other work. */
export interface StepQueue {
  stats(): StepQueueStats;
  /** Starts the figures of stats() afresh (steps in flight count from now). */
  reset(): void;
  /** Resolves once at most `steps` submitted steps are unfinished. */
  atMost(steps: number): Promise<void>;
}

export interface Trainer {
  readonly backend: 'cpu' | 'webgpu';
  readonly layout: ParamLayout;
  readonly train: TrainConfig;
  /** One step: forward, backward, clip, AdamW at learning rate `lr`. Returns the batch's mean loss. */
  step(batch: Batch, lr: number, options?: StepOptions): Promise<number>;
  /** Mean loss over the batches, without touching parameters or optimizer state. */
  evaluate(batches: Batch[]): Promise<number>;
  getParams(): Promise<Float32Array>;
  setParams(params: Float32Array): Promise<void>;
  /**
   * The values of logical `ranges` (a fragment's), concatenated, into `out`: a round reads its
   * fragment's θ_local, not the whole model. Optional: without it, getParams and a gather.
   */
  readRanges?(ranges: readonly ParamRange[], out: Float32Array): Promise<void>;
  /** Writes `values` (the ranges' values, concatenated) into logical `ranges`: a round's merge. */
  writeRanges?(ranges: readonly ParamRange[], values: Float32Array): Promise<void>;
  /** Present where steps are queued and finish later (WebGPU): how busy the queue is. */
  readonly queue?: StepQueue;
  getOptimizerState(): Promise<OptimizerState>;
  setOptimizerState(state: OptimizerState): Promise<void>;
  /**
   * True where a step waits on other machines over the network and times its own compute (a
   * pipeline-parallel stage, whose step is its group's): the caller neither holds a simulated
   * clock still over the step nor queues steps behind it. Absent: a step is local work.
   */
  readonly distributed?: boolean;
  /**
   * Why it cannot step now (a pipeline stage not placed in a group yet, its group incomplete,
   * its engine still being built), or null when it can. Absent: it always can.
   */
  readonly waiting?: string | null;
  /**
   * The stage of a pipeline-parallel model it trains, where it trains one (null until it is
   * given one). Absent: it trains the whole model.
   */
  readonly pipelineStage?: number | null;
  /** Ends a step that waits on others at once, and refuses any later one (its owner is stopping). */
  stop?(): void;
  destroy(): void;
}
