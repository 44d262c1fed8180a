/**
 * The GPT-2 forward and backward pass on WebGPU, composed from the WGSL kernel families: the
 * same layer-by-layer plan as the CPU model (cpu/gpt.ts), bound once for one batch shape and
 * replayed every step with no allocation. buffers.ts lays out the memory, forward.ts and
 * backward.ts bind the two passes; this class owns the buffers, uploads batches and submits steps.
 * The parameter gradients are cleared with one clearBuffer per step.
 *
 * With the `stage` option it runs one pipeline stage (pipeline/stages.ts) instead, as CpuGpt
 * does: the stage's layout; a stage that does not embed takes the previous stage's output into
 * its `encoded` activation (`writeInput`); one without the head ends at its last block's
 * residual (`outputView`) and its backward starts from the next stage's input gradient
 * (`writeOutputGrad`), leaving its own in `inputGradView`. Forward and backward may then run as
 * separate submissions (a pipeline schedule runs other micro-batches between them), and the
 * backward may add into the gradients instead of clearing them (micro-batch accumulation).
 */
import {
  type BoundKernel,
  buildValidated,
  createStorageBuffer,
  readFloat32,
  STORAGE,
  type TensorView,
} from '@shoal/gpu';
import type { GptConfig } from '../config.ts';
import { buildLayout, type ParamLayout, padForGpu, unpadFromGpu } from '../layout.ts';
import { buildStageLayout, type StageSpec } from '../pipeline/stages.ts';
import { checkTokens } from '../tokens.ts';
import type { TensorArena } from './arena.ts';
import { bindBackward } from './backward.ts';
import { createActivationArenas, type GptBuffers, wholeModelStage } from './buffers.ts';
import { bindForward } from './forward.ts';
import { createGptKernels, type GptKernels, gptLayerShape } from './kernels.ts';

export {
  createGptKernels,
  describeMatmul,
  type GptKernelOptions,
  type GptKernels,
  type GptMatmulConfig,
  gptLayerShape,
  MATMUL_PRECISIONS,
  type MatmulChoice,
  type MatmulPrecision,
} from './kernels.ts';

const MAP_READ = 0x1;
const COPY_DST = 0x8;

export interface GpuGptOptions {
  /** One pipeline stage of the model instead of the whole of it (the layout is then the stage's). */
  stage?: StageSpec;
  /**
   * Parameter and gradient buffers (padded layout, at least layout.paddedSize floats) to bind
   * instead of allocating them: a stage's slots share one set. The caller keeps ownership.
   */
  params?: GPUBuffer;
  grads?: GPUBuffer;
}

/** Which parts of a step `encode` records. */
export interface PassOptions {
  /** Run the forward pass (default true); false: a backward over the activations a previous submission kept. */
  forward?: boolean;
  /** Add this backward's parameter gradients into `grads` instead of clearing them first. */
  accumulate?: boolean;
}

export class GpuGpt {
  readonly layout: ParamLayout;
  /** The blocks this model runs, and whether it embeds and ends in the head (the whole model: all). */
  readonly stage: StageSpec;
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
  /** Buffers this model allocated (the shared parameter and gradient buffers are the caller's). */
  private readonly owned: GPUBuffer[];
  private destroyed = false;
  private pendingError: Error | null = null;

  private constructor(
    readonly device: GPUDevice,
    readonly config: GptConfig,
    readonly B: number,
    readonly T: number,
    readonly kernels: GptKernels,
    options: GpuGptOptions,
  ) {
    const { nEmbd: C, nHead: NH, blockSize } = config;
    if (!Number.isInteger(B) || !Number.isInteger(T) || B < 1 || T < 1) {
      throw new RangeError(`batch shape B=${B} T=${T} must be positive integers`);
    }
    if (T > blockSize) throw new RangeError(`sequence length ${T} exceeds block_size ${blockSize}`);
    if (C / NH !== kernels.headSize) {
      throw new RangeError(`kernels were compiled for head size ${kernels.headSize}, the model has ${C / NH}`);
    }
    this.stage = options.stage ?? wholeModelStage(config);
    this.layout = options.stage ? buildStageLayout(config, options.stage) : buildLayout(config);
    const BT = B * T;
    const paramBytes = this.layout.paddedSize * 4;
    if (paramBytes > device.limits.maxBufferSize) {
      throw new RangeError(
        `the parameters need a ${paramBytes}-byte buffer; this adapter allows ${device.limits.maxBufferSize}`,
      );
    }
    const flat = (label: string, given: GPUBuffer | undefined): GPUBuffer => {
      if (given && given.size < paramBytes) {
        throw new RangeError(`${given.label} has ${given.size} bytes, the ${label} need ${paramBytes}`);
      }
      return given ?? device.createBuffer({ label: `GpuGpt.${label}`, size: paramBytes, usage: STORAGE });
    };
    this.params = flat('params', options.params);
    this.grads = flat('grads', options.grads);
    this.loss = device.createBuffer({ label: 'GpuGpt.loss', size: 16, usage: STORAGE });
    this.lossStaging = device.createBuffer({ label: 'GpuGpt.loss.staging', size: 16, usage: MAP_READ | COPY_DST });
    this.inputs = createStorageBuffer(device, 'GpuGpt.inputs', new Int32Array(BT));
    this.targets = createStorageBuffer(device, 'GpuGpt.targets', new Int32Array(BT));
    this.owned = [this.loss, this.lossStaging, this.inputs, this.targets];
    if (!options.params) this.owned.push(this.params);
    if (!options.grads) this.owned.push(this.grads);

    const arenas = createActivationArenas(device, config, B, T, this.stage);
    this.acts = arenas.acts;
    this.dacts = arenas.dacts;
    const bound: GptBuffers = {
      config,
      layout: this.layout,
      stage: this.stage,
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
    options: GpuGptOptions = {},
  ): Promise<GpuGpt> {
    const families =
      kernels ??
      (await createGptKernels(device, config.nEmbd / config.nHead, {
        layer: gptLayerShape(config, B, T),
        sequence: T,
      }));
    return buildValidated(
      device,
      'GpuGpt: binding the model failed',
      () => new GpuGpt(device, config, B, T, families, options),
    );
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

  /**
   * Uploads a batch (validated: B·T tokens each, all in [0, V)). Targets may be omitted for
   * forward-only use. A stage takes input tokens only if it embeds, targets only if it has the head.
   */
  writeBatch(inputs: Int32Array | null, targets: Int32Array | null): void {
    const count = this.B * this.T;
    const V = this.config.vocabSize;
    const { index, embeds, head } = this.stage;
    if (inputs && !embeds) throw new RangeError(`stage ${index} takes activations (writeInput), not tokens`);
    if (targets && !head) throw new RangeError(`stage ${index} has no head: it takes no targets`);
    for (const [tokens, what] of [
      [inputs, 'inputs'],
      [targets, 'targets'],
    ] as const) {
      if (!tokens) continue;
      if (tokens.length !== count) throw new RangeError(`expected ${count} ${what}, got ${tokens.length}`);
      checkTokens(tokens, V, what);
    }
    if (inputs) this.device.queue.writeBuffer(this.inputs, 0, inputs);
    if (targets) this.device.queue.writeBuffer(this.targets, 0, targets);
  }

  /** A stage that does not embed: the previous stage's output (B,T,C), from the CPU or another GPU buffer. */
  writeInput(input: Float32Array | TensorView): void {
    if (this.stage.embeds) throw new RangeError(`stage ${this.stage.index} embeds: it takes tokens (writeBatch)`);
    this.writeActivation(this.acts.view('encoded'), input, 'input activations');
  }

  /** A stage without the head: ∂L/∂output (B,T,C), the next stage's input gradient, before its backward. */
  writeOutputGrad(dOutput: Float32Array | TensorView): void {
    if (this.stage.head)
      throw new RangeError(`stage ${this.stage.index} has the head: its backward starts from the loss`);
    this.writeActivation(this.dacts.view('dresidual'), dOutput, 'output gradients');
  }

  /** Where a stage's output (B,T,C) lies after forward: its last block's residual stream. */
  get outputView(): TensorView {
    return this.acts.view(`${this.stage.endBlock - 1}.residual3`);
  }

  /** Where ∂L/∂input (B,T,C) lies after backward, on a stage that does not embed. */
  get inputGradView(): TensorView {
    if (this.stage.embeds) throw new RangeError(`stage ${this.stage.index} embeds: it has no input gradient`);
    return this.dacts.view('dresidual');
  }

  async readOutput(): Promise<Float32Array> {
    const view = this.outputView;
    return readFloat32(this.device, view.buffer, this.B * this.T * this.config.nEmbd, view.offset ?? 0);
  }

  async readInputGrad(): Promise<Float32Array> {
    const view = this.inputGradView;
    return readFloat32(this.device, view.buffer, this.B * this.T * this.config.nEmbd, view.offset ?? 0);
  }

  /** B·T·C floats into `target`: a queue write from the CPU, or a queued copy from a GPU view. */
  private writeActivation(target: TensorView, source: Float32Array | TensorView, what: string): void {
    const floats = this.B * this.T * this.config.nEmbd;
    if (source instanceof Float32Array) {
      if (source.length !== floats) {
        throw new RangeError(`stage ${this.stage.index} expects ${floats} ${what}, got ${source.length}`);
      }
      this.device.queue.writeBuffer(target.buffer, target.offset ?? 0, source);
      return;
    }
    const bytes = floats * 4;
    if (source.size !== undefined && source.size < bytes) {
      throw new RangeError(`stage ${this.stage.index} expects ${floats} ${what}, the view holds ${source.size / 4}`);
    }
    this.device.pushErrorScope('validation');
    const encoder = this.device.createCommandEncoder({ label: `GpuGpt.${what}` });
    encoder.copyBufferToBuffer(source.buffer, source.offset ?? 0, target.buffer, target.offset ?? 0, bytes);
    this.device.queue.submit([encoder.finish()]);
    this.deferError(this.device.popErrorScope(), `GpuGpt copying ${what}`);
  }

  /** A validation error of work nobody waits for surfaces at the next submit. */
  private deferError(scope: Promise<GPUError | null>, what: string): void {
    void scope.then((error) => {
      if (error) this.pendingError ??= new Error(`${what}: ${error.message}`);
    });
  }

  /**
   * Records one forward pass (and backward, with its gradient clear unless `accumulate`) into
   * `encoder`, in one compute pass; `extra` kernels (clipping, the optimizer) run after them in
   * the same pass.
   */
  encode(encoder: GPUCommandEncoder, backward: boolean, extra: BoundKernel[] = [], options: PassOptions = {}): void {
    if (this.destroyed) throw new Error('GpuGpt was destroyed');
    const forward = options.forward ?? true;
    if (backward && !options.accumulate) encoder.clearBuffer(this.grads, 0, this.layout.paddedSize * 4);
    const label = forward ? (backward ? 'GpuGpt.step' : 'GpuGpt.forward') : 'GpuGpt.backward';
    const pass = encoder.beginComputePass({ label });
    if (forward) for (const kernel of this.forwardKernels) kernel.dispatch(pass);
    if (backward) for (const kernel of this.backwardKernels) kernel.dispatch(pass);
    for (const kernel of extra) kernel.dispatch(pass);
    pass.end();
  }

  /**
   * Submits `encode`'s work as one command buffer. With `readLoss`, waits for it and returns the
   * batch's mean loss (the only readback); otherwise returns NaN at once.
   */
  async submit(
    backward: boolean,
    extra: BoundKernel[] = [],
    readLoss = true,
    options: PassOptions = {},
  ): Promise<number> {
    if (readLoss && !this.stage.head) throw new Error(`stage ${this.stage.index} has no head: it computes no loss`);
    // A validation error in an unread step surfaces at the next submit; a read step waits for its own.
    const earlier = this.pendingError;
    this.pendingError = null;
    if (earlier) throw earlier;
    this.device.pushErrorScope('validation');
    const encoder = this.device.createCommandEncoder({ label: 'GpuGpt' });
    this.encode(encoder, backward, extra, options);
    if (readLoss) encoder.copyBufferToBuffer(this.loss, 0, this.lossStaging, 0, 4);
    this.device.queue.submit([encoder.finish()]);
    const scope = this.device.popErrorScope();
    if (!readLoss) {
      this.deferError(scope, 'GpuGpt step');
      return Number.NaN;
    }
    const error = await scope;
    if (error) throw new Error(`GpuGpt step: ${error.message}`);
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

  /** Logits [B·T, V] of the last forward pass (debugging, sampling, ONNX comparisons); the head's stage only. */
  async readLogits(): Promise<Float32Array> {
    const view = this.acts.view('logits');
    return readFloat32(this.device, view.buffer, this.B * this.T * this.config.vocabSize, view.offset ?? 0);
  }

  destroy(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    for (const kernel of [...this.forwardKernels, ...this.backwardKernels]) kernel.destroy();
    for (const buffer of this.owned) buffer.destroy();
    this.acts.destroy();
    this.dacts.destroy();
  }
}
