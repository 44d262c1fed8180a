/**
 * A pipeline stage on WebGPU (the StageTrainer of stage-trainer.ts, as CpuStageTrainer on the
 * CPU): the stage's blocks bound once per slot, one set of parameter, gradient and AdamW moment
 * buffers that every slot binds, and the existing AdamW kernels with the step's gradScale.
 *
 * Memory: each slot is a GpuGpt over the shared `params` and `grads` with activations (and
 * activation gradients) of its own, so up to `slots` micro-batches can sit between their forward
 * and backward; the parameters, gradients and moments exist once per stage. The activation
 * gradients could be shared too (backward runs one slot at a time), but a slot's input gradient
 * stays readable until its own next backward, as the interface promises, only if they are not.
 *
 * gradSumSquares is a GPU reduction of the owned gradient range (GradNormKernels with clipping
 * off) and a 4-byte readback: ‖g‖² in f32 arithmetic, which differs from the CPU stage's f64 sum
 * by rounding only; the clip factor itself is computed outside, over every stage
 * (pipelineGradScale), and arrives in `update` as a number.
 */
import {
  AdamWKernels,
  type BoundKernel,
  buildValidated,
  createEmptyStorageBuffer,
  GRAD_NORM_INDEX,
  GradNormKernels,
  readFloat32,
} from '@shoal/gpu';
import type { GptConfig } from '../config.ts';
import { createGptKernels, type GptKernels, GpuGpt, gptLayerShape } from '../gpu/gpt.ts';
import { adamwRanges } from '../gpu/trainer.ts';
import { padForGpu, type TensorSpec, unpadFromGpu } from '../layout.ts';
import type { OptimizerState } from '../train/trainer.ts';
import type { TrainConfig } from '../train-config.ts';
import type { StageTrainer } from './stage-trainer.ts';
import { buildStageLayout, type StageLayout, type StageSpec } from './stages.ts';

export interface GpuStageTrainerOptions {
  /** Rows per micro-batch. */
  microBatch: number;
  /** Micro-batches whose activations the stage holds at once (default 1). */
  slots?: number;
  /** Compiled kernel families to share (between stages on one device, say); compiled here if omitted. */
  kernels?: GptKernels;
}

/** What a slot holds between its forward and its backward. */
type SlotState = 'empty' | 'forward' | 'forward-with-targets';

export class GpuStageTrainer implements StageTrainer {
  readonly backend = 'webgpu' as const;
  readonly microBatch: number;
  readonly slots: number;
  /** The stage's flat buffers, padded layout; every slot's GpuGpt binds `params` and `grads`. */
  readonly params: GPUBuffer;
  readonly grads: GPUBuffer;
  private readonly m: GPUBuffer;
  private readonly v: GPUBuffer;
  /** [gradScale] for AdamW, written by `update`. */
  private readonly scale: GPUBuffer;
  /** [‖owned g‖₂, clip scale (unused)], written by the norm kernel. */
  private readonly norm: GPUBuffer;
  private readonly stepUniform: GPUBuffer;
  private readonly normKernel: BoundKernel;
  private readonly adamwKernel: BoundKernel;
  private readonly states: SlotState[];
  private adamStep = 0;
  private destroyed = false;

  private constructor(
    readonly device: GPUDevice,
    readonly layout: StageLayout,
    readonly train: TrainConfig,
    private readonly models: GpuGpt[],
    buffers: { params: GPUBuffer; grads: GPUBuffer },
    private readonly adamw: AdamWKernels,
    gradNorm: GradNormKernels,
  ) {
    this.microBatch = (models[0] as GpuGpt).B;
    this.slots = models.length;
    this.params = buffers.params;
    this.grads = buffers.grads;
    const bytes = layout.paddedSize * 4;
    this.m = createEmptyStorageBuffer(device, 'GpuStageTrainer.m', bytes);
    this.v = createEmptyStorageBuffer(device, 'GpuStageTrainer.v', bytes);
    this.scale = createEmptyStorageBuffer(device, 'GpuStageTrainer.scale', 4);
    this.norm = createEmptyStorageBuffer(device, 'GpuStageTrainer.norm', 8);
    this.stepUniform = adamw.createStepBuffer('GpuStageTrainer.step');
    this.states = models.map(() => 'empty');
    // The owned range starts at the first tensor after the tied copy; its padding is never
    // written, so it adds zeros to the norm.
    const ownedStart = (layout.tensors[layout.tiedCopy ? 1 : 0] as TensorSpec).paddedOffset;
    this.normKernel = gradNorm.norm(
      [{ buffer: this.grads, offset: ownedStart, n: layout.paddedSize - ownedStart }],
      { buffer: this.norm },
      0, // clipping off: the norm only
    );
    this.adamwKernel = adamw.update(
      {
        params: this.params,
        grads: this.grads,
        m: this.m,
        v: this.v,
        gradScale: { view: { buffer: this.scale }, index: 0 },
      },
      adamwRanges(layout, train.weightDecay),
      this.stepUniform,
    );
  }

  /** Binds `slots` copies of the stage's layers for micro-batches of `microBatch` × train.seqLen; params in the stage's logical layout. */
  static async create(
    device: GPUDevice,
    config: GptConfig,
    train: TrainConfig,
    stage: StageSpec,
    params: Float32Array,
    options: GpuStageTrainerOptions,
  ): Promise<GpuStageTrainer> {
    const layout = buildStageLayout(config, stage);
    if (params.length !== layout.size) {
      throw new RangeError(`stage ${stage.index} has ${layout.size} parameters, got ${params.length}`);
    }
    const { microBatch } = options;
    const slots = options.slots ?? 1;
    if (!Number.isInteger(microBatch) || microBatch < 1) throw new RangeError(`micro-batch ${microBatch} rows`);
    if (!Number.isInteger(slots) || slots < 1) throw new RangeError(`stage slots ${slots}`);
    const layer = gptLayerShape(config, microBatch, train.seqLen);
    const kernels =
      options.kernels ??
      (await createGptKernels(device, config.nEmbd / config.nHead, { layer, sequence: train.seqLen }));
    const [adamw, gradNorm] = await Promise.all([AdamWKernels.create(device), GradNormKernels.create(device)]);
    const bytes = layout.paddedSize * 4;
    const shared = {
      params: createEmptyStorageBuffer(device, `GpuStageTrainer[${stage.index}].params`, bytes),
      grads: createEmptyStorageBuffer(device, `GpuStageTrainer[${stage.index}].grads`, bytes),
    };
    const models: GpuGpt[] = [];
    try {
      for (let slot = 0; slot < slots; slot++) {
        models.push(await GpuGpt.create(device, config, microBatch, train.seqLen, kernels, { stage, ...shared }));
      }
      const trainer = await buildValidated(
        device,
        `GpuStageTrainer: binding stage ${stage.index} failed`,
        () => new GpuStageTrainer(device, layout, train, models, shared, adamw, gradNorm),
      );
      await trainer.setParams(params);
      return trainer;
    } catch (error) {
      for (const model of models) model.destroy();
      shared.params.destroy();
      shared.grads.destroy();
      throw error;
    }
  }

  private model(slot: number): GpuGpt {
    if (this.destroyed) throw new Error('GpuStageTrainer was destroyed');
    const model = Number.isInteger(slot) ? this.models[slot] : undefined;
    if (!model) throw new RangeError(`slot ${slot} of ${this.slots}`);
    return model;
  }

  async forward(slot: number, input: Int32Array | Float32Array, targets: Int32Array | null) {
    const model = this.model(slot);
    const { index, embeds, head } = this.layout.stage;
    if (embeds !== input instanceof Int32Array) {
      throw new RangeError(`stage ${index} expects ${embeds ? 'tokens' : 'activations'} as input`);
    }
    if (embeds) model.writeBatch(input as Int32Array, head ? targets : null);
    else {
      model.writeInput(input as Float32Array);
      if (head && targets) model.writeBatch(null, targets);
    }
    const withTargets = head && targets !== null;
    this.states[slot] = withTargets ? 'forward-with-targets' : 'forward';
    if (head) return model.submit(false, [], withTargets);
    await model.submit(false, [], false);
    return model.readOutput();
  }

  async backward(slot: number, dOutput: Float32Array | null, accumulate: boolean) {
    const model = this.model(slot);
    const { index, embeds, head } = this.layout.stage;
    const state = this.states[slot];
    if (state === 'empty' || (head && state !== 'forward-with-targets')) {
      throw new Error(`stage ${index} slot ${slot}: backward needs a forward pass${head ? ' with targets' : ''} first`);
    }
    if (!head) {
      if (!dOutput) throw new RangeError(`stage ${index} needs the gradient of its outputs`);
      model.writeOutputGrad(dOutput);
    }
    // The logits now hold dlogits (and the slot's activations may be reused): another backward needs another forward.
    this.states[slot] = 'empty';
    await model.submit(true, [], false, { forward: false, accumulate });
    return embeds ? null : model.readInputGrad();
  }

  /** The tied wte in the stage's padded buffers, on the first and last stage of a pipeline of two or more. */
  private tiedTensor(): TensorSpec | null {
    const { stage } = this.layout;
    if (stage.count === 1 || (!stage.embeds && !stage.head)) return null;
    return this.layout.byName.get('transformer.wte.weight') ?? null;
  }

  async tiedGrad() {
    const wte = this.tiedTensor();
    return wte ? readFloat32(this.device, this.grads, wte.size, wte.paddedOffset * 4) : null;
  }

  async setTiedGrad(grad: Float32Array) {
    const wte = this.tiedTensor();
    if (!wte || grad.length !== wte.size) {
      throw new RangeError(`stage ${this.layout.stage.index} has no tied gradient of ${grad.length} values`);
    }
    this.device.queue.writeBuffer(this.grads, wte.paddedOffset * 4, grad);
  }

  async gradSumSquares() {
    await this.dispatch('GpuStageTrainer.gradNorm', [this.normKernel]);
    const norm = (await readFloat32(this.device, this.norm, 1, GRAD_NORM_INDEX * 4))[0] as number;
    return norm * norm;
  }

  async update(lr: number, gradScale: number) {
    if (!Number.isFinite(lr) || lr < 0) throw new RangeError(`learning rate ${lr} must be finite and ≥ 0`);
    if (!Number.isFinite(gradScale)) throw new RangeError(`gradient scale ${gradScale} must be finite`);
    this.adamStep++;
    const { beta1, beta2, eps } = this.train;
    this.adamw.writeStep(this.stepUniform, { lr, t: this.adamStep, beta1, beta2, eps });
    this.device.queue.writeBuffer(this.scale, 0, new Float32Array([gradScale]));
    await this.dispatch('GpuStageTrainer.update', [this.adamwKernel]);
  }

  /** One compute pass of `kernels`; waits for its validation, not for the GPU. */
  private async dispatch(label: string, kernels: BoundKernel[]): Promise<void> {
    if (this.destroyed) throw new Error('GpuStageTrainer was destroyed');
    this.device.pushErrorScope('validation');
    const encoder = this.device.createCommandEncoder({ label });
    const pass = encoder.beginComputePass({ label });
    for (const kernel of kernels) kernel.dispatch(pass);
    pass.end();
    this.device.queue.submit([encoder.finish()]);
    const error = await this.device.popErrorScope();
    if (error) throw new Error(`${label}: ${error.message}`);
  }

  private async readLogical(buffer: GPUBuffer): Promise<Float32Array> {
    return unpadFromGpu(this.layout, await readFloat32(this.device, buffer, this.layout.paddedSize));
  }

  private checkSize(values: Float32Array, what: string): void {
    if (values.length !== this.layout.size) {
      throw new RangeError(`stage ${this.layout.stage.index} has ${this.layout.size} ${what}, got ${values.length}`);
    }
  }

  getParams(): Promise<Float32Array> {
    return this.readLogical(this.params);
  }

  async setParams(params: Float32Array) {
    this.checkSize(params, 'parameters');
    this.device.queue.writeBuffer(this.params, 0, padForGpu(this.layout, params));
  }

  /** The accumulated gradient, logical layout (tests and debugging). */
  getGrads(): Promise<Float32Array> {
    return this.readLogical(this.grads);
  }

  async getOptimizerState(): Promise<OptimizerState> {
    const [m, v] = await Promise.all([this.readLogical(this.m), this.readLogical(this.v)]);
    return { m, v, step: this.adamStep };
  }

  async setOptimizerState(state: OptimizerState) {
    this.checkSize(state.m, 'first moments');
    this.checkSize(state.v, 'second moments');
    if (!Number.isInteger(state.step) || state.step < 0) throw new RangeError(`optimizer step ${state.step}`);
    this.device.queue.writeBuffer(this.m, 0, padForGpu(this.layout, state.m));
    this.device.queue.writeBuffer(this.v, 0, padForGpu(this.layout, state.v));
    this.adamStep = state.step;
  }

  destroy(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    for (const model of this.models) model.destroy();
    this.normKernel.destroy();
    this.adamwKernel.destroy();
    for (const buffer of [this.params, this.grads, this.m, this.v, this.scale, this.norm, this.stepUniform]) {
      buffer.destroy();
    }
  }
}
