/**
 * What `shoal train`, the simulator and the swarm worker need from a training engine, whatever
 * runs it (CPU or WebGPU). Parameters and optimiser state cross this boundary in the logical,
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

export interface Trainer {
  readonly backend: 'cpu' | 'webgpu';
  readonly layout: ParamLayout;
  readonly train: TrainConfig;
  /** One step: forward, backward, clip, AdamW at learning rate `lr`. Returns the batch's mean loss. */
  step(batch: Batch, lr: number, options?: StepOptions): Promise<number>;
  /** Mean loss over the batches, without touching parameters or optimiser state. */
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
  getOptimizerState(): Promise<OptimizerState>;
  setOptimizerState(state: OptimizerState): Promise<void>;
  destroy(): void;
}
