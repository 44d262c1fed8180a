/**
 * The CPU training backend: the f32 CPU model, global-norm clipping and AdamW with nanoGPT's
 * decay rule (2-D tensors only). For tests, the simulator, and machines without WebGPU. On the
 * SIMD kernels the parameters, their gradient and the AdamW moments a step works on live in the
 * kernels' memory: the matmuls use weights and gradients in place, and the norm and the update
 * run in SIMD on the kernel threads (float32, as on the GPU). On the JS kernels, in float64 in JS.
 */
import { clipScale, gradNorm } from '@shoal/gpu';
import type { GptConfig } from '../config.ts';
import { buildLayout, type ParamLayout } from '../layout.ts';
import type { Batch, OptimizerState, ParamRange, Trainer } from '../train/trainer.ts';
import type { TrainConfig } from '../train-config.ts';
import { AdamWRuns } from './adamw-runs.ts';
import { CpuGpt } from './gpt.ts';
import type { CpuBackendOptions } from './kernels.ts';

/**
 * What a CPU trainer computes with but does not train: the model with its activations and their
 * gradients, the parameter gradient, and the parameters and AdamW moments a step works on (all
 * in the kernels' memory on the SIMD kernels), for one model and (B, T). Trainers that never step
 * at the same time (the simulator's workers take turns on one thread) can share one
 * (`CpuTrainerOptions.compute`): each then holds its own parameters, AdamW moments and step
 * count, 12 bytes a parameter, and copies them in for a step and out after it. Whoever made it
 * destroys it, after its trainers.
 */
export class CpuCompute {
  readonly model: CpuGpt<Float32Array>;
  readonly grads: Float32Array;
  /** The parameters and moments a step works on: a trainer's own when it made this compute. */
  readonly params: Float32Array;
  readonly m: Float32Array;
  readonly v: Float32Array;
  /** Updates params, m and v by a layout's AdamW runs (in SIMD where the model has it). */
  readonly runs: AdamWRuns;

  constructor(
    readonly config: GptConfig,
    readonly batchSize: number,
    readonly seqLen: number,
    options: CpuBackendOptions = {},
  ) {
    const size = buildLayout(config).size;
    // Four vectors in the kernels' memory, each rounded up to 4 floats there.
    const extraFloats = 4 * (size + 4);
    this.model = new CpuGpt<Float32Array>(config, batchSize, seqLen, Float32Array, { ...options, extraFloats });
    const allocate = (n: number) => (this.model.optimizer ? this.model.allocate(n) : new Float32Array(n));
    [this.params, this.grads, this.m, this.v] = [allocate(size), allocate(size), allocate(size), allocate(size)];
    this.runs = new AdamWRuns(this.model.layout, this.model.optimizer);
    this.runs.point({ params: this.params, grads: this.grads, m: this.m, v: this.v });
  }

  /** The global gradient norm of `grads` (in SIMD where the model has it). */
  gradNorm(): number {
    return this.model.optimizer ? this.model.optimizer.gradNorm(this.grads) : gradNorm(this.grads);
  }

  /** Bytes it holds: activations, their gradients, the parameter gradient and the step's parameters and moments. */
  get bytes(): number {
    return this.model.activationBytes + 4 * this.grads.byteLength;
  }

  destroy(): void {
    this.model.destroy();
  }
}

export interface CpuTrainerOptions extends CpuBackendOptions {
  /**
   * A compute of this model and (batch, seq) shared with other trainers (the backend options are
   * then the compute's); without it the trainer makes its own, and destroys it with itself.
   */
  compute?: CpuCompute;
}

export class CpuTrainer implements Trainer {
  readonly backend = 'cpu' as const;
  readonly layout: ParamLayout;
  readonly compute: CpuCompute;
  private readonly ownsCompute: boolean;
  private readonly model: CpuGpt<Float32Array>;
  /** Its parameters and moments: the compute's own when it made the compute, else its own arrays (copied in for a step). */
  private readonly params: Float32Array;
  private readonly m: Float32Array;
  private readonly v: Float32Array;
  private adamStep = 0;

  constructor(
    config: GptConfig,
    readonly train: TrainConfig,
    params: Float32Array,
    options: CpuTrainerOptions = {},
  ) {
    const shared = options.compute;
    if (shared && !sameShape(shared, config, train)) {
      throw new RangeError(
        `a shared compute of another model or batch shape: it is for batch ${shared.batchSize}×${shared.seqLen}, this trainer's is ${train.batchSize}×${train.seqLen}`,
      );
    }
    this.compute = shared ?? new CpuCompute(config, train.batchSize, train.seqLen, options);
    this.ownsCompute = !shared;
    this.model = this.compute.model;
    this.layout = this.model.layout;
    if (params.length !== this.layout.size)
      throw new RangeError(`params have ${params.length} values, the model needs ${this.layout.size}`);
    const own = (x: Float32Array) => (shared ? new Float32Array(this.layout.size) : x);
    [this.params, this.m, this.v] = [own(this.compute.params), own(this.compute.m), own(this.compute.v)];
    this.params.set(params);
  }

  /** Bytes this trainer holds of its own: parameters and AdamW moments, and its compute unless shared. */
  get ownBytes(): number {
    if (this.ownsCompute) return this.compute.bytes;
    return this.params.byteLength + this.m.byteLength + this.v.byteLength;
  }

  /** Threads the kernels run on (CpuBackendOptions.threads), and why fewer than asked when so. */
  get threads(): { count: number; note?: string } {
    return this.model.threads;
  }

  /** Resolves once the kernel threads have started (steps run on one thread until then, with the same results). */
  ready(): Promise<void> {
    return this.model.ready;
  }

  async step(batch: Batch, lr: number): Promise<number> {
    const { compute } = this;
    if (!this.ownsCompute) for (const name of ['params', 'm', 'v'] as const) compute[name].set(this[name]);
    const loss = this.model.forward(compute.params, batch.inputs, batch.targets);
    this.model.backward(compute.params, compute.grads);
    const scale = clipScale(compute.gradNorm(), this.train.gradClip);
    this.adamStep++;
    compute.runs.update(this.train, lr, this.adamStep, scale);
    if (!this.ownsCompute) for (const name of ['params', 'm', 'v'] as const) this[name].set(compute[name]);
    return loss;
  }

  async evaluate(batches: Batch[]): Promise<number> {
    let total = 0;
    for (const batch of batches) total += this.model.forward(this.params, batch.inputs, batch.targets);
    return total / batches.length;
  }

  async getParams(): Promise<Float32Array> {
    return this.params.slice();
  }

  async setParams(params: Float32Array): Promise<void> {
    if (params.length !== this.layout.size)
      throw new RangeError(`params have ${params.length} values, the model needs ${this.layout.size}`);
    this.params.set(params);
  }

  async readRanges(ranges: readonly ParamRange[], out: Float32Array): Promise<void> {
    let at = 0;
    for (const [start, end] of ranges) {
      out.set(this.params.subarray(start, end), at);
      at += end - start;
    }
  }

  async writeRanges(ranges: readonly ParamRange[], values: Float32Array): Promise<void> {
    let at = 0;
    for (const [start, end] of ranges) {
      this.params.set(values.subarray(at, at + end - start), start);
      at += end - start;
    }
  }

  async getOptimizerState(): Promise<OptimizerState> {
    return { m: this.m.slice(), v: this.v.slice(), step: this.adamStep };
  }

  async setOptimizerState(state: OptimizerState): Promise<void> {
    if (state.m.length !== this.layout.size || state.v.length !== this.layout.size) {
      throw new RangeError(
        `optimizer state has ${state.m.length}/${state.v.length} values, the model needs ${this.layout.size}`,
      );
    }
    this.m.set(state.m);
    this.v.set(state.v);
    this.adamStep = state.step;
  }

  destroy(): void {
    if (this.ownsCompute) this.compute.destroy();
  }
}

/** Whether a compute fits a trainer of this model and batch shape. */
function sameShape(compute: CpuCompute, config: GptConfig, train: TrainConfig): boolean {
  const a = compute.config;
  return (
    compute.batchSize === train.batchSize &&
    compute.seqLen === train.seqLen &&
    a.nLayer === config.nLayer &&
    a.nHead === config.nHead &&
    a.nEmbd === config.nEmbd &&
    a.blockSize === config.blockSize &&
    a.vocabSize === config.vocabSize
  );
}
