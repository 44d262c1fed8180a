/**
 * The CPU training backend: the f32 CPU model, global-norm clipping and AdamW with nanoGPT's
 * decay rule (2-D tensors only). For tests, the simulator, and machines without WebGPU.
 */
import { adamwUpdate, clipScale, gradNorm } from '@shoal/gpu';
import type { GptConfig } from '../config.ts';
import type { ParamLayout } from '../layout.ts';
import type { Batch, OptimizerState, Trainer } from '../train/trainer.ts';
import type { TrainConfig } from '../train-config.ts';
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
  /** Contiguous runs of tensors with the same decay flag: one AdamW call each. */
  private readonly decayRuns: { offset: number; size: number; decay: boolean }[] = [];
  /** Each run's views of params, grads, m and v, made when those arrays change, not per step. */
  private runViews: { params: Float32Array; grads: Float32Array; m: Float32Array; v: Float32Array; decay: boolean }[] =
    [];

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
    for (const t of this.layout.tensors) {
      const last = this.decayRuns.at(-1);
      if (last && last.decay === t.decay) last.size += t.size;
      else this.decayRuns.push({ offset: t.offset, size: t.size, decay: t.decay });
    }
    this.pointRuns();
  }

  private pointRuns(): void {
    this.runViews = this.decayRuns.map(({ offset, size, decay }) => {
      const range = (a: Float32Array) => a.subarray(offset, offset + size);
      return { params: range(this.params), grads: range(this.grads), m: range(this.m), v: range(this.v), decay };
    });
  }

  async step(batch: Batch, lr: number): Promise<number> {
    const loss = this.model.forward(this.params, batch.inputs, batch.targets);
    this.model.backward(this.params, this.grads);
    const scale = clipScale(gradNorm(this.grads), this.train.gradClip);
    this.adamStep++;
    const { beta1, beta2, eps, weightDecay } = this.train;
    for (const run of this.runViews) {
      adamwUpdate(
        run.params,
        run.grads,
        run.m,
        run.v,
        run.params.length,
        lr,
        beta1,
        beta2,
        eps,
        run.decay ? weightDecay : 0,
        this.adamStep,
        scale,
      );
    }
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

  destroy(): void {}
}
