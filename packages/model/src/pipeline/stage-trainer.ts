/**
 * One pipeline stage's engine and inner optimizer (DiLoCoX's dual optimizer, inner half): the
 * stage's layers for micro-batches in flight, its gradients accumulated over a step's
 * micro-batches, and AdamW on its own parameters. What runs a step (in one process, or over the
 * mesh between stage workers) drives it through this interface, so the CPU and WebGPU stages are
 * interchangeable.
 *
 * A step on stage s, for micro-batches 0 … M−1 in any schedule (GPipe, 1F1B):
 *   forward(slot, tokens | previous output, targets) → its output, or on the last stage the loss;
 *   backward(slot, next stage's input gradient, accumulate) → its input gradient (null on the first);
 * then, once per step: the first and last stages sum their tied wte gradients (`tiedGrad`,
 * `setTiedGrad`: first + last, in that order, on both, so the copies stay bitwise equal), every
 * stage reports `gradSumSquares` of what it owns, the sum over stages gives the global norm, and
 * each stage calls `update` with the same gradScale = clip(‖Σ g‖ / M) / M.
 */
import { clipScale } from '@shoal/gpu';
import { AdamWRuns } from '../cpu/adamw-runs.ts';
import { CpuGpt } from '../cpu/gpt.ts';
import type { CpuBackendOptions } from '../cpu/kernels.ts';
import type { OptimizerState } from '../train/trainer.ts';
import type { TrainConfig } from '../train-config.ts';
import { buildStageLayout, ownedValues, type StageLayout, type StageSpec, tiedValues } from './stages.ts';

export interface StageTrainer {
  readonly backend: 'cpu' | 'webgpu';
  readonly layout: StageLayout;
  readonly train: TrainConfig;
  /** Rows per micro-batch (the step's batch is micros × microBatch rows of train.seqLen tokens). */
  readonly microBatch: number;
  /** Micro-batches whose activations the stage can hold at once. */
  readonly slots: number;
  /**
   * One micro-batch forward into `slot`. The first stage takes tokens, the others the previous
   * stage's output. Returns the loss on the last stage (with targets), else the output
   * (microBatch × seqLen × nEmbd), valid until the slot's next forward.
   */
  forward(slot: number, input: Int32Array | Float32Array, targets: Int32Array | null): Promise<number | Float32Array>;
  /**
   * The slot's backward: the last stage starts from its loss, the others from `dOutput`. Adds
   * into the step's gradients when `accumulate`, else overwrites them. Returns the gradient with
   * respect to the input (null on the first stage), valid until the slot's next backward.
   */
  backward(slot: number, dOutput: Float32Array | null, accumulate: boolean): Promise<Float32Array | null>;
  /** The tied wte's accumulated gradient (first and last stage of a pipeline of two or more), else null. */
  tiedGrad(): Promise<Float32Array | null>;
  setTiedGrad(grad: Float32Array): Promise<void>;
  /** Σ g² over the gradients this stage owns (the tied copy excluded), accumulated, unscaled. */
  gradSumSquares(): Promise<number>;
  /** AdamW at `lr` with the gradient multiplied by `gradScale` (clip factor / micro-batches). */
  update(lr: number, gradScale: number): Promise<void>;
  getParams(): Promise<Float32Array>;
  setParams(params: Float32Array): Promise<void>;
  getOptimizerState(): Promise<OptimizerState>;
  setOptimizerState(state: OptimizerState): Promise<void>;
  destroy(): void;
}

/** The factor every stage applies: the clip of the mean gradient's norm, over M micro-batches. */
export function pipelineGradScale(sumSquares: number, micros: number, maxNorm: number): number {
  return clipScale(Math.sqrt(sumSquares) / micros, maxNorm) / micros;
}

/**
 * The tied wte's gradient both stages apply: the first stage's plus the last's, in that order on
 * both, so the two copies get bitwise the same update.
 */
export function tiedGradSum(first: Float32Array, last: Float32Array): Float32Array {
  if (first.length !== last.length) throw new RangeError(`tied gradients of ${first.length} and ${last.length} values`);
  const sum = new Float32Array(first.length);
  for (let i = 0; i < sum.length; i++) sum[i] = (first[i] as number) + (last[i] as number);
  return sum;
}

/** Σ x² in f64, in index order. */
export function sumSquares(values: Float32Array): number {
  let sum = 0;
  for (let i = 0; i < values.length; i++) {
    const x = values[i] as number;
    sum += x * x;
  }
  return sum;
}

export interface StageTrainerOptions extends CpuBackendOptions {
  microBatch: number;
  /** Micro-batches in flight (default 1: a step that runs each micro-batch through before the next). */
  slots?: number;
}

export class CpuStageTrainer implements StageTrainer {
  readonly backend = 'cpu' as const;
  readonly layout: StageLayout;
  readonly microBatch: number;
  readonly slots: number;
  private readonly models: CpuGpt<Float32Array>[];
  private params: Float32Array;
  private readonly grads: Float32Array;
  private m: Float32Array;
  private v: Float32Array;
  private adamStep = 0;
  private readonly runs: AdamWRuns;

  constructor(
    readonly train: TrainConfig,
    stage: StageSpec,
    params: Float32Array,
    config: StageLayout['config'],
    options: StageTrainerOptions,
  ) {
    this.layout = buildStageLayout(config, stage);
    if (params.length !== this.layout.size) {
      throw new RangeError(`stage ${stage.index} has ${this.layout.size} parameters, got ${params.length}`);
    }
    const { microBatch } = options;
    const slots = options.slots ?? 1;
    if (!Number.isInteger(microBatch) || microBatch < 1) throw new RangeError(`micro-batch ${microBatch} rows`);
    if (!Number.isInteger(slots) || slots < 1) throw new RangeError(`stage slots ${slots}`);
    this.microBatch = microBatch;
    this.slots = slots;
    this.models = Array.from(
      { length: slots },
      () => new CpuGpt<Float32Array>(config, microBatch, train.seqLen, Float32Array, { ...options, stage }),
    );
    this.params = params.slice();
    this.grads = new Float32Array(this.layout.size);
    this.m = new Float32Array(this.layout.size);
    this.v = new Float32Array(this.layout.size);
    this.runs = new AdamWRuns(this.layout);
    this.pointRuns();
  }

  private pointRuns(): void {
    this.runs.point({ params: this.params, grads: this.grads, m: this.m, v: this.v });
  }

  private model(slot: number): CpuGpt<Float32Array> {
    const model = this.models[slot];
    if (!model) throw new RangeError(`slot ${slot} of ${this.slots}`);
    return model;
  }

  async forward(slot: number, input: Int32Array | Float32Array, targets: Int32Array | null) {
    const model = this.model(slot);
    const loss = model.forward(this.params, input, targets);
    return this.layout.stage.head ? loss : model.output;
  }

  async backward(slot: number, dOutput: Float32Array | null, accumulate: boolean) {
    const model = this.model(slot);
    model.backward(this.params, this.grads, { dOutput: dOutput ?? undefined, accumulate });
    return this.layout.stage.embeds ? null : model.inputGrad;
  }

  async tiedGrad() {
    const tied = tiedValues(this.layout, this.grads);
    return tied ? tied.slice() : null;
  }

  async setTiedGrad(grad: Float32Array) {
    const tied = tiedValues(this.layout, this.grads);
    if (!tied || grad.length !== tied.length) {
      throw new RangeError(`stage ${this.layout.stage.index} has no tied gradient of ${grad.length} values`);
    }
    tied.set(grad);
  }

  async gradSumSquares() {
    return sumSquares(ownedValues(this.layout, this.grads));
  }

  async update(lr: number, gradScale: number) {
    this.adamStep++;
    this.runs.update(this.train, lr, this.adamStep, gradScale);
  }

  async getParams() {
    return this.params.slice();
  }

  async setParams(params: Float32Array) {
    if (params.length !== this.layout.size) {
      throw new RangeError(`stage ${this.layout.stage.index} has ${this.layout.size} parameters, got ${params.length}`);
    }
    this.params = params.slice();
    this.pointRuns();
  }

  async getOptimizerState(): Promise<OptimizerState> {
    return { m: this.m.slice(), v: this.v.slice(), step: this.adamStep };
  }

  async setOptimizerState(state: OptimizerState) {
    if (state.m.length !== this.layout.size || state.v.length !== this.layout.size) {
      throw new RangeError(`stage ${this.layout.stage.index} optimizer state needs ${this.layout.size} values`);
    }
    this.m = state.m.slice();
    this.v = state.v.slice();
    this.adamStep = state.step;
    this.pointRuns();
  }

  destroy(): void {}
}
