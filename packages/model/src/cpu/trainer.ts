/**
 * The CPU training backend: the f32 CPU model, global-norm clipping and AdamW with nanoGPT's
 * decay rule (2-D tensors only). For tests, the simulator, and machines without WebGPU.
 */
import { clipScale, gradNorm } from '@shoal/gpu';
import type { GptConfig } from '../config.ts';
import type { ParamLayout } from '../layout.ts';
import type { Batch, OptimizerState, Trainer } from '../train/trainer.ts';
import type { TrainConfig } from '../train-config.ts';
import { AdamWRuns } from './adamw-runs.ts';
import { CpuGpt } from './gpt.ts';
import type { CpuBackendOptions } from './kernels.ts';

/**
 * What a CPU trainer computes with but does not train: the model with its activations and their
 * gradients (in the kernels' memory) and the parameter gradient, for one model and (B, T).
 * Trainers that never step at the same time (the simulator's workers take turns on one thread)
 * can share one (`CpuTrainerOptions.compute`): each then holds only its parameters, AdamW moments
 * and step count, 12 bytes a parameter. Whoever made it destroys it, after its trainers.
 */
export class CpuCompute {
  readonly model: CpuGpt<Float32Array>;
  readonly grads: Float32Array;

  constructor(
    readonly config: GptConfig,
    readonly batchSize: number,
    readonly seqLen: number,
    options: CpuBackendOptions = {},
  ) {
    this.model = new CpuGpt<Float32Array>(config, batchSize, seqLen, Float32Array, options);
    this.grads = new Float32Array(this.model.layout.size);
  }

  /** Bytes it holds: activations, their gradients and the parameter gradient (kernel scratch not included). */
  get bytes(): number {
    return this.model.activationBytes + this.grads.byteLength;
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
  private readonly grads: Float32Array;
  private m: Float32Array;
  private v: Float32Array;
  private adamStep = 0;
  private readonly runs: AdamWRuns;

  constructor(
    config: GptConfig,
    readonly train: TrainConfig,
    private params: Float32Array,
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
    this.grads = this.compute.grads;
    this.m = new Float32Array(this.layout.size);
    this.v = new Float32Array(this.layout.size);
    this.runs = new AdamWRuns(this.layout);
    this.pointRuns();
  }

  /** Bytes this trainer holds of its own: parameters and AdamW moments, and its compute unless shared. */
  get ownBytes(): number {
    const state = this.params.byteLength + this.m.byteLength + this.v.byteLength;
    return state + (this.ownsCompute ? this.compute.bytes : 0);
  }

  /** Threads the kernels run on (CpuBackendOptions.threads), and why fewer than asked when so. */
  get threads(): { count: number; note?: string } {
    return this.model.threads;
  }

  /** Resolves once the kernel threads have started (steps run on one thread until then, with the same results). */
  ready(): Promise<void> {
    return this.model.ready;
  }

  private pointRuns(): void {
    this.runs.point({ params: this.params, grads: this.grads, m: this.m, v: this.v });
  }

  async step(batch: Batch, lr: number): Promise<number> {
    const loss = this.model.forward(this.params, batch.inputs, batch.targets);
    this.model.backward(this.params, this.grads);
    const scale = clipScale(gradNorm(this.grads), this.train.gradClip);
    this.adamStep++;
    this.runs.update(this.train, lr, this.adamStep, scale);
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
    this.params = params.slice();
    this.pointRuns();
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
    this.m = state.m.slice();
    this.v = state.v.slice();
    this.adamStep = state.step;
    this.pointRuns();
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
