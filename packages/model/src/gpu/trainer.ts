/**
 * The WebGPU training backend: GpuGpt's forward and backward, the global gradient norm and clip
 * scale, and AdamW, recorded as one compute pass in one command buffer per step. The clip scale
 * goes from the norm kernel to AdamW on the GPU; the step's only readback is the loss, and only
 * when asked (StepOptions.readLoss), so steps can be queued back to back.
 */
import {
  AdamWKernels,
  type AdamWRange,
  type BoundKernel,
  buildValidated,
  CLIP_SCALE_INDEX,
  createEmptyStorageBuffer,
  GradNormKernels,
  readFloat32,
} from '@shoal/gpu';
import type { GptConfig } from '../config.ts';
import { GPU_ALIGN_FLOATS, type ParamLayout, padForGpu, rangePieces, unpadFromGpu } from '../layout.ts';
import type { Batch, OptimizerState, ParamRange, StepOptions, Trainer } from '../train/trainer.ts';
import type { TrainConfig } from '../train-config.ts';
import { QueueMeter } from './queue-meter.ts';

// GPUBufferUsage / GPUMapMode values (not globals in every runtime)
const MAP_READ = 0x1;
const COPY_DST = 0x8;

import { createGptKernels, type GptKernelOptions, type GptKernels, GpuGpt, gptLayerShape } from './gpt.ts';
import { assertGpuFits } from './memory.ts';

/**
 * AdamW ranges over the padded layout: each tensor with its alignment padding, so neighbours with
 * the same decay merge into one dispatch (the padding's gradients and moments are zero, so its
 * parameters stay zero).
 */
export function adamwRanges(layout: ParamLayout, weightDecay: number): AdamWRange[] {
  return layout.tensors.map((t, i) => {
    const next = layout.tensors[i + 1];
    const end = next ? next.paddedOffset : Math.ceil((t.paddedOffset + t.size) / GPU_ALIGN_FLOATS) * GPU_ALIGN_FLOATS;
    return { offset: t.paddedOffset, n: end - t.paddedOffset, weightDecay: t.decay ? weightDecay : 0 };
  });
}

export class GpuTrainer implements Trainer {
  readonly backend = 'webgpu' as const;
  readonly layout: ParamLayout;
  private readonly m: GPUBuffer;
  private readonly v: GPUBuffer;
  /** [norm, clip scale], written by the norm kernel each step. */
  private readonly norm: GPUBuffer;
  private readonly stepUniform: GPUBuffer;
  private readonly optimizer: BoundKernel[];
  private adamStep = 0;
  /** How busy the queue is with this trainer's steps (the swarm worker and `shoal train` report it). */
  readonly queue = new QueueMeter();

  private constructor(
    readonly model: GpuGpt,
    readonly train: TrainConfig,
    private readonly adamw: AdamWKernels,
    gradNorm: GradNormKernels,
  ) {
    const { device, layout } = model;
    this.layout = layout;
    const bytes = layout.paddedSize * 4;
    this.m = createEmptyStorageBuffer(device, 'GpuTrainer.m', bytes);
    this.v = createEmptyStorageBuffer(device, 'GpuTrainer.v', bytes);
    this.norm = createEmptyStorageBuffer(device, 'GpuTrainer.norm', 8);
    this.stepUniform = adamw.createStepBuffer('GpuTrainer.step');
    this.optimizer = [
      gradNorm.norm([{ buffer: model.grads, n: layout.paddedSize }], { buffer: this.norm }, train.gradClip),
      adamw.update(
        {
          params: model.params,
          grads: model.grads,
          m: this.m,
          v: this.v,
          gradScale: { view: { buffer: this.norm }, index: CLIP_SCALE_INDEX },
        },
        adamwRanges(layout, train.weightDecay),
        this.stepUniform,
      ),
    ];
  }

  /**
   * Compiles (or reuses) the kernels and binds a model for train.batchSize × train.seqLen.
   * `params` in the logical layout.
   */
  static async create(
    device: GPUDevice,
    config: GptConfig,
    train: TrainConfig,
    params: Float32Array,
    kernels?: GptKernels,
    /** How to build the kernels when `kernels` is not given (precision, matmul choice). */
    kernelOptions: Omit<GptKernelOptions, 'layer'> = {},
  ): Promise<GpuTrainer> {
    assertGpuFits(config, train.batchSize, train.seqLen, device.limits);
    const layer = gptLayerShape(config, train.batchSize, train.seqLen);
    const families =
      kernels ??
      (await createGptKernels(device, config.nEmbd / config.nHead, {
        ...kernelOptions,
        layer,
        sequence: train.seqLen,
      }));
    const [adamw, gradNorm] = await Promise.all([AdamWKernels.create(device), GradNormKernels.create(device)]);
    const model = await GpuGpt.create(device, config, train.batchSize, train.seqLen, families);
    try {
      return await buildValidated(device, 'GpuTrainer: binding the optimizer failed', () => {
        const trainer = new GpuTrainer(model, train, adamw, gradNorm);
        try {
          trainer.model.writeParams(params);
        } catch (error) {
          trainer.destroy();
          throw error;
        }
        return trainer;
      });
    } catch (error) {
      model.destroy(); // idempotent: the trainer may have destroyed it already
      throw error;
    }
  }

  async step(batch: Batch, lr: number, options: StepOptions = {}): Promise<number> {
    if (!Number.isFinite(lr) || lr < 0) throw new RangeError(`learning rate ${lr} must be finite and ≥ 0`);
    this.model.writeBatch(batch.inputs, batch.targets);
    this.adamStep++;
    const { beta1, beta2, eps } = this.train;
    this.adamw.writeStep(this.stepUniform, { lr, t: this.adamStep, beta1, beta2, eps });
    // the submit happens before submit() first awaits: the queue's done-promise asked next covers it
    const loss = this.model.submit(true, this.optimizer, options.readLoss ?? true);
    this.queue.submitted(this.model.device.queue.onSubmittedWorkDone());
    return loss;
  }

  async evaluate(batches: Batch[]): Promise<number> {
    if (batches.length === 0) throw new RangeError('evaluate needs at least one batch');
    let total = 0;
    for (const batch of batches) total += await this.model.forwardLoss(batch.inputs, batch.targets);
    return total / batches.length;
  }

  /** Waits for every queued step (after steps with readLoss: false). */
  async flush(): Promise<void> {
    await this.model.device.queue.onSubmittedWorkDone();
  }

  async getParams(): Promise<Float32Array> {
    return this.model.readParams();
  }

  async setParams(params: Float32Array): Promise<void> {
    this.model.writeParams(params);
  }

  /**
   * Just the ranges' values, one staging copy (a piece per tensor they cross) and one map: a
   * round's θ_local[p] crosses the bus, not the model. Queued after the steps submitted so far.
   */
  async readRanges(ranges: readonly ParamRange[], out: Float32Array): Promise<void> {
    const { device, params } = this.model;
    const pieces = rangePieces(this.layout, ranges);
    const count = pieces.reduce((sum, piece) => sum + piece.length, 0);
    if (out.length < count) throw new RangeError(`out holds ${out.length} values, the ranges have ${count}`);
    const staging = device.createBuffer({
      label: 'GpuTrainer.readRanges',
      size: Math.max(4, 4 * count),
      usage: MAP_READ | COPY_DST,
    });
    const encoder = device.createCommandEncoder({ label: 'GpuTrainer.readRanges' });
    for (const piece of pieces)
      encoder.copyBufferToBuffer(params, 4 * piece.padded, staging, 4 * piece.at, 4 * piece.length);
    device.queue.submit([encoder.finish()]);
    await staging.mapAsync(MAP_READ);
    out.set(new Float32Array(staging.getMappedRange(), 0, count));
    staging.unmap();
    staging.destroy();
  }

  /** Writes the ranges' values in place: one queue write per piece, ordered after the steps submitted so far. */
  async writeRanges(ranges: readonly ParamRange[], values: Float32Array): Promise<void> {
    const { device, params } = this.model;
    for (const piece of rangePieces(this.layout, ranges)) {
      device.queue.writeBuffer(params, 4 * piece.padded, values, piece.at, piece.length);
    }
  }

  /** The gradient norm of the last step, before clipping (one readback). */
  async lastGradNorm(): Promise<number> {
    return (await readFloat32(this.model.device, this.norm, 1))[0] as number;
  }

  async getOptimizerState(): Promise<OptimizerState> {
    const { device, layout } = this.model;
    const [m, v] = await Promise.all([
      readFloat32(device, this.m, layout.paddedSize),
      readFloat32(device, this.v, layout.paddedSize),
    ]);
    return { m: unpadFromGpu(layout, m), v: unpadFromGpu(layout, v), step: this.adamStep };
  }

  async setOptimizerState(state: OptimizerState): Promise<void> {
    const { layout, device } = this.model;
    if (state.m.length !== layout.size || state.v.length !== layout.size) {
      throw new RangeError(
        `optimizer state has ${state.m.length}/${state.v.length} values, the model needs ${layout.size}`,
      );
    }
    if (!Number.isInteger(state.step) || state.step < 0) throw new RangeError(`optimizer step ${state.step}`);
    device.queue.writeBuffer(this.m, 0, padForGpu(layout, state.m));
    device.queue.writeBuffer(this.v, 0, padForGpu(layout, state.v));
    this.adamStep = state.step;
  }

  destroy(): void {
    for (const kernel of this.optimizer) kernel.destroy();
    for (const buffer of [this.m, this.v, this.norm, this.stepUniform]) buffer.destroy();
    this.model.destroy();
  }
}
