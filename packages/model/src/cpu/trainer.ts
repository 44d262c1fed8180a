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

export class CpuTrainer implements Trainer {
  readonly backend = 'cpu' as const;
  readonly layout: ParamLayout;
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
    options: CpuBackendOptions = {},
  ) {
    this.model = new CpuGpt<Float32Array>(config, train.batchSize, train.seqLen, Float32Array, options);
    this.layout = this.model.layout;
    if (params.length !== this.layout.size)
      throw new RangeError(`params have ${params.length} values, the model needs ${this.layout.size}`);
    this.grads = new Float32Array(this.layout.size);
    this.m = new Float32Array(this.layout.size);
    this.v = new Float32Array(this.layout.size);
    this.runs = new AdamWRuns(this.layout);
    this.pointRuns();
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
    this.model.destroy();
  }
}
