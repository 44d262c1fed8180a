/**
 * What `shoal train`, the simulator and the swarm worker need from a training engine, whatever
 * runs it (CPU or WebGPU). Parameters and optimiser state cross this boundary in the logical,
 * unpadded layout.
 */
import type { ParamLayout } from '../layout.ts';
import type { TrainConfig } from '../train-config.ts';

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
  getOptimizerState(): Promise<OptimizerState>;
  setOptimizerState(state: OptimizerState): Promise<void>;
  destroy(): void;
}
