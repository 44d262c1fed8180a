/**
 * The GPT-2 forward and backward pass on WebGPU, composed from the WGSL kernel families: the
 * same layer-by-layer plan as the CPU model (cpu/gpt.ts), bound once for one batch shape and
 * replayed every step with no allocation. buffers.ts lays out the memory, forward.ts and
 * backward.ts bind the two passes; this class owns the buffers, uploads batches and submits steps.
 * The parameter gradients are cleared with one clearBuffer per step.
 */
import { type BoundKernel, buildValidated, createStorageBuffer, readFloat32, STORAGE } from '@shoal/gpu';
import type { GptConfig } from '../config.ts';
import { buildLayout, type ParamLayout, padForGpu, unpadFromGpu } from '../layout.ts';
import { checkTokens } from '../tokens.ts';
import type { TensorArena } from './arena.ts';
import { bindBackward } from './backward.ts';
import { createActivationArenas, type GptBuffers } from './buffers.ts';
import { bindForward } from './forward.ts';
import { createGptKernels, type GptKernels } from './kernels.ts';

export { createGptKernels, type GptKernels } from './kernels.ts';

const MAP_READ = 0x1;
const COPY_DST = 0x8;

export class GpuGpt {
  readonly layout: ParamLayout;
  /** Parameters and their gradients, padded layout (layout.ts's paddedOffset). */
  readonly params: GPUBuffer;
  readonly grads: GPUBuffer;
  /** [0]: the batch's mean loss after a forward pass. */
  readonly loss: GPUBuffer;
  private readonly inputs: GPUBuffer;
  private readonly targets: GPUBuffer;
  private readonly lossStaging: GPUBuffer;
  readonly acts: TensorArena;
  readonly dacts: TensorArena;
  private readonly forwardKernels: BoundKernel[];
  private readonly backwardKernels: BoundKernel[];
  private destroyed = false;
  private pendingError: Error | null = null;

  private constructor(
    readonly device: GPUDevice,
    readonly config: GptConfig,
    readonly B: number,
    readonly T: number,
    readonly kernels: GptKernels,
  ) {
    const { nEmbd: C, nHead: NH, blockSize } = config;
    if (!Number.isInteger(B) || !Number.isInteger(T) || B < 1 || T < 1) {
      throw new RangeError(`batch shape B=${B} T=${T} must be positive integers`);
    }
    if (T > blockSize) throw new RangeError(`sequence length ${T} exceeds block_size ${blockSize}`);
    if (C / NH !== kernels.headSize) {
      throw new RangeError(`kernels were compiled for head size ${kernels.headSize}, the model has ${C / NH}`);
    }
    this.layout = buildLayout(config);
    const BT = B * T;
    const paramBytes = this.layout.paddedSize * 4;
    if (paramBytes > device.limits.maxBufferSize) {
      throw new RangeError(
        `the parameters need a ${paramBytes}-byte buffer; this adapter allows ${device.limits.maxBufferSize}`,
      );
    }
    this.params = device.createBuffer({ label: 'GpuGpt.params', size: paramBytes, usage: STORAGE });
    this.grads = device.createBuffer({ label: 'GpuGpt.grads', size: paramBytes, usage: STORAGE });
    this.loss = device.createBuffer({ label: 'GpuGpt.loss', size: 16, usage: STORAGE });
    this.lossStaging = device.createBuffer({ label: 'GpuGpt.loss.staging', size: 16, usage: MAP_READ | COPY_DST });
    this.inputs = createStorageBuffer(device, 'GpuGpt.inputs', new Int32Array(BT));
    this.targets = createStorageBuffer(device, 'GpuGpt.targets', new Int32Array(BT));

    const arenas = createActivationArenas(device, config, B, T);
    this.acts = arenas.acts;
    this.dacts = arenas.dacts;
    const bound: GptBuffers = {
      config,
      layout: this.layout,
      B,
      T,
      kernels,
      params: this.params,
      grads: this.grads,
      loss: this.loss,
      inputs: this.inputs,
      targets: this.targets,
      acts: this.acts,
      dacts: this.dacts,
    };
    this.forwardKernels = bindForward(bound);
    this.backwardKernels = bindBackward(bound);
  }

  /** Binds the model for batches of B sequences of T tokens; compiles the kernels unless given. */
  static async create(
    device: GPUDevice,
    config: GptConfig,
    B: number,
    T: number,
    kernels?: GptKernels,
  ): Promise<GpuGpt> {
    const families = kernels ?? (await createGptKernels(device, config.nEmbd / config.nHead));
    return buildValidated(device, 'GpuGpt: binding the model failed', () => new GpuGpt(device, config, B, T, families));
  }

  /** Uploads parameters in the logical layout. */
  writeParams(params: Float32Array): void {
    if (params.length !== this.layout.size) {
      throw new RangeError(`params have ${params.length} values, the model needs ${this.layout.size}`);
    }
    this.device.queue.writeBuffer(this.params, 0, padForGpu(this.layout, params));
  }

  async readParams(): Promise<Float32Array> {
    return unpadFromGpu(this.layout, await readFloat32(this.device, this.params, this.layout.paddedSize));
  }

  /** The gradient of the last forward + backward, logical layout. */
  async readGrads(): Promise<Float32Array> {
    return unpadFromGpu(this.layout, await readFloat32(this.device, this.grads, this.layout.paddedSize));
  }

  /** Uploads a batch (validated: B·T tokens each, all in [0, V)). Targets may be omitted for forward-only use. */
  writeBatch(inputs: Int32Array, targets: Int32Array | null): void {
    const count = this.B * this.T;
    const V = this.config.vocabSize;
    for (const [tokens, what] of [
      [inputs, 'inputs'],
      [targets, 'targets'],
    ] as const) {
      if (!tokens) continue;
      if (tokens.length !== count) throw new RangeError(`expected ${count} ${what}, got ${tokens.length}`);
      checkTokens(tokens, V, what);
    }
    this.device.queue.writeBuffer(this.inputs, 0, inputs);
    if (targets) this.device.queue.writeBuffer(this.targets, 0, targets);
  }

  /**
   * Records one forward pass (and backward, with its gradient clear) into `encoder`, in one
   * compute pass; `extra` kernels (clipping, the optimiser) run after them in the same pass.
   */
  encode(encoder: GPUCommandEncoder, backward: boolean, extra: BoundKernel[] = []): void {
    if (this.destroyed) throw new Error('GpuGpt was destroyed');
    if (backward) encoder.clearBuffer(this.grads);
    const pass = encoder.beginComputePass({ label: backward ? 'GpuGpt.step' : 'GpuGpt.forward' });
    for (const kernel of this.forwardKernels) kernel.dispatch(pass);
    if (backward) for (const kernel of this.backwardKernels) kernel.dispatch(pass);
    for (const kernel of extra) kernel.dispatch(pass);
    pass.end();
  }

  /**
   * Submits `encode`'s work as one command buffer. With `readLoss`, waits for it and returns the
   * batch's mean loss (the only readback); otherwise returns NaN at once.
   */
  async submit(backward: boolean, extra: BoundKernel[] = [], readLoss = true): Promise<number> {
    // A validation error in an unread step surfaces at the next submit; a read step waits for its own.
    const earlier = this.pendingError;
    this.pendingError = null;
    if (earlier) throw earlier;
    this.device.pushErrorScope('validation');
    const encoder = this.device.createCommandEncoder({ label: 'GpuGpt' });
    this.encode(encoder, backward, extra);
    if (readLoss) encoder.copyBufferToBuffer(this.loss, 0, this.lossStaging, 0, 4);
    this.device.queue.submit([encoder.finish()]);
    const scope = this.device
      .popErrorScope()
      .then((error) => (error ? new Error(`GpuGpt step: ${error.message}`) : null));
    if (!readLoss) {
      void scope.then((error) => {
        if (error) this.pendingError ??= error;
      });
      return Number.NaN;
    }
    const error = await scope;
    if (error) throw error;
    await this.lossStaging.mapAsync(MAP_READ);
    const loss = new Float32Array(this.lossStaging.getMappedRange(0, 4))[0] as number;
    this.lossStaging.unmap();
    return loss;
  }

  /** Forward + backward on one batch: returns the mean loss; the gradient is then in `grads`. */
  async forwardBackward(inputs: Int32Array, targets: Int32Array): Promise<number> {
    this.writeBatch(inputs, targets);
    return this.submit(true);
  }

  /** Mean loss of one batch, parameters untouched. */
  async forwardLoss(inputs: Int32Array, targets: Int32Array): Promise<number> {
    this.writeBatch(inputs, targets);
    return this.submit(false);
  }

  /** The bound kernels of a step, in dispatch order (for profiling one kernel at a time). */
  get stepKernels(): { forward: readonly BoundKernel[]; backward: readonly BoundKernel[] } {
    return { forward: this.forwardKernels, backward: this.backwardKernels };
  }

  /** Logits [B·T, V] of the last forward pass (debugging, sampling, ONNX comparisons). */
  async readLogits(): Promise<Float32Array> {
    const view = this.acts.view('logits');
    return readFloat32(this.device, view.buffer, this.B * this.T * this.config.vocabSize, view.offset ?? 0);
  }

  destroy(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    for (const kernel of [...this.forwardKernels, ...this.backwardKernels]) kernel.destroy();
    for (const buffer of [this.params, this.grads, this.loss, this.lossStaging, this.inputs, this.targets]) {
      buffer.destroy();
    }
    this.acts.destroy();
    this.dacts.destroy();
  }
}
