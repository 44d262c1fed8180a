/**
 * The GPT-2 forward and backward pass on WebGPU, composed from the WGSL kernel families: the
 * same layer-by-layer plan as the CPU model (cpu/gpt.ts), bound once for one batch shape and
 * replayed every step with no allocation.
 *
 * Memory (see ARCHITECTURE.md, "GPU memory"): parameters and gradients are two flat buffers in
 * the padded layout (layout.ts); activations and activation gradients live in two arenas, each
 * tensor its own aligned view (Dawn forbids overlapping writable views in one dispatch).
 * Forward keeps what backward reads, per layer; the activation gradients are per model, not per
 * layer, as in llm.c:
 * - one `dresidual` [B·T, C] carries ∂L/∂residual down the stack: a residual add passes its
 *   gradient to both inputs unchanged, so the branch matmuls read it directly and each
 *   LayerNorm backward adds its input gradient into it (no residual-backward kernels at all);
 * - the branch gradients (dfchGelu, dln2, datty, dln1, dlnf) are overwritten by the matmul that
 *   produces them (accumulate: false); dfch and dqkv, which GELU and attention add into, are
 *   zeroed by a fill just before each layer uses them.
 * The parameter gradients are cleared with one clearBuffer per step.
 */
import {
  AttentionKernels,
  type BoundKernel,
  buildValidated,
  CrossEntropyKernels,
  createStorageBuffer,
  EmbeddingKernels,
  GeluKernels,
  LayernormKernels,
  MatmulKernels,
  ResidualKernels,
  readFloat32,
  STORAGE,
  type TensorView,
  VectorKernels,
} from '@shoal/gpu';
import type { GptConfig } from '../config.ts';
import { buildLayout, type ParamLayout, padForGpu, unpadFromGpu } from '../layout.ts';
import { TensorArena } from './arena.ts';

const MAP_READ = 0x1;
const COPY_DST = 0x8;

/** The kernel families a model binds, compiled once per device and head size; shareable between models. */
export interface GptKernels {
  readonly headSize: number;
  matmul: MatmulKernels;
  layernorm: LayernormKernels;
  attention: AttentionKernels;
  gelu: GeluKernels;
  residual: ResidualKernels;
  embedding: EmbeddingKernels;
  crossEntropy: CrossEntropyKernels;
  vector: VectorKernels;
}

export async function createGptKernels(device: GPUDevice, headSize: number): Promise<GptKernels> {
  const [matmul, layernorm, attention, gelu, residual, embedding, crossEntropy, vector] = await Promise.all([
    MatmulKernels.create(device),
    LayernormKernels.create(device),
    AttentionKernels.create(device, headSize),
    GeluKernels.create(device),
    ResidualKernels.create(device),
    EmbeddingKernels.create(device),
    CrossEntropyKernels.create(device),
    VectorKernels.create(device),
  ]);
  return { headSize, matmul, layernorm, attention, gelu, residual, embedding, crossEntropy, vector };
}

/** Checks a batch's tokens on the CPU: the kernels index embeddings with them unchecked. */
export function checkTokens(tokens: Int32Array, count: number, V: number, what: string): void {
  if (tokens.length !== count) throw new RangeError(`expected ${count} ${what}, got ${tokens.length}`);
  for (let i = 0; i < tokens.length; i++) {
    const token = tokens[i] as number;
    if (!(token >= 0 && token < V))
      throw new RangeError(`${what}: token ${token} at position ${i} is outside [0, ${V})`);
  }
}

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
    const { nLayer: L, nEmbd: C, nHead: NH, vocabSize: V, blockSize } = config;
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

    const perLayer: [string, number][] = [
      ['ln1', BT * C],
      ['ln1Mean', BT],
      ['ln1Rstd', BT],
      ['qkv', BT * 3 * C],
      ['atty', BT * C],
      ['lse', B * NH * T],
      ['residual2', BT * C],
      ['ln2', BT * C],
      ['ln2Mean', BT],
      ['ln2Rstd', BT],
      ['fch', BT * 4 * C],
      ['fchGelu', BT * 4 * C],
      ['residual3', BT * C],
    ];
    this.acts = TensorArena.create(device, 'GpuGpt.acts', [
      ['encoded', BT * C],
      ['attproj', BT * C], // scratch: read once by the residual add of the same layer
      ['fcproj', BT * C],
      ...Array.from({ length: L }, (_, l) =>
        perLayer.map(([name, n]) => [`${l}.${name}`, n] as [string, number]),
      ).flat(),
      ['lnf', BT * C],
      ['lnfMean', BT],
      ['lnfRstd', BT],
      ['logits', BT * V], // dlogits in place after backward's cross-entropy
      ['losses', BT],
    ]);
    this.dacts = TensorArena.create(device, 'GpuGpt.dacts', [
      ['dresidual', BT * C],
      ['dlnf', BT * C],
      ['dfchGelu', BT * 4 * C],
      ['dfch', BT * 4 * C],
      ['dln2', BT * C],
      ['datty', BT * C],
      ['dqkv', BT * 3 * C],
      ['dln1', BT * C],
    ]);
    this.forwardKernels = this.bindForward();
    this.backwardKernels = this.bindBackward();
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
    checkTokens(inputs, count, V, 'inputs');
    if (targets) checkTokens(targets, count, V, 'targets');
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

  /** A view of one parameter (or gradient) tensor in the padded flat buffer. */
  private param(buffer: GPUBuffer, name: string, floats?: number): TensorView {
    const spec = this.layout.byName.get(name);
    if (!spec) throw new Error(`layout has no ${name}`);
    return { buffer, offset: spec.paddedOffset * 4, size: (floats ?? spec.size) * 4 };
  }

  private block(buffer: GPUBuffer, l: number, suffix: string): TensorView {
    return this.param(buffer, `transformer.h.${l}.${suffix}`);
  }

  private bindForward(): BoundKernel[] {
    const { B, T, kernels: k, params: P } = this;
    const { nLayer: L, nEmbd: C, nHead: NH, vocabSize: V } = this.config;
    const BT = B * T;
    const a = (name: string) => this.acts.view(name);
    const out: BoundKernel[] = [];
    out.push(
      k.embedding.forward(
        a('encoded'),
        { buffer: this.inputs },
        this.param(P, 'transformer.wte.weight'),
        this.param(P, 'transformer.wpe.weight', T * C),
        B,
        T,
        C,
      ),
    );
    let residual = a('encoded');
    for (let l = 0; l < L; l++) {
      const w = (suffix: string) => this.block(P, l, suffix);
      const x = (name: string) => a(`${l}.${name}`);
      out.push(
        k.layernorm.forward(x('ln1'), x('ln1Mean'), x('ln1Rstd'), residual, w('ln_1.weight'), w('ln_1.bias'), BT, C),
        k.matmul.forward({
          out: x('qkv'),
          inp: x('ln1'),
          weight: w('attn.c_attn.weight'),
          bias: w('attn.c_attn.bias'),
          N: BT,
          C,
          OC: 3 * C,
        }),
        k.attention.forward({ qkv: x('qkv'), out: x('atty'), lse: x('lse') }, { B, T, C, NH }),
        k.matmul.forward({
          out: a('attproj'),
          inp: x('atty'),
          weight: w('attn.c_proj.weight'),
          bias: w('attn.c_proj.bias'),
          N: BT,
          C,
          OC: C,
        }),
        k.residual.forward(x('residual2'), residual, a('attproj'), BT * C),
        k.layernorm.forward(
          x('ln2'),
          x('ln2Mean'),
          x('ln2Rstd'),
          x('residual2'),
          w('ln_2.weight'),
          w('ln_2.bias'),
          BT,
          C,
        ),
        k.matmul.forward({
          out: x('fch'),
          inp: x('ln2'),
          weight: w('mlp.c_fc.weight'),
          bias: w('mlp.c_fc.bias'),
          N: BT,
          C,
          OC: 4 * C,
        }),
        k.gelu.forward(x('fchGelu'), x('fch'), BT * 4 * C),
        k.matmul.forward({
          out: a('fcproj'),
          inp: x('fchGelu'),
          weight: w('mlp.c_proj.weight'),
          bias: w('mlp.c_proj.bias'),
          N: BT,
          C: 4 * C,
          OC: C,
        }),
        k.residual.forward(x('residual3'), x('residual2'), a('fcproj'), BT * C),
      );
      residual = x('residual3');
    }
    out.push(
      k.layernorm.forward(
        a('lnf'),
        a('lnfMean'),
        a('lnfRstd'),
        residual,
        this.param(P, 'transformer.ln_f.weight'),
        this.param(P, 'transformer.ln_f.bias'),
        BT,
        C,
      ),
      // Tied head: logits = lnf · wteᵀ, no bias.
      k.matmul.forward({
        out: a('logits'),
        inp: a('lnf'),
        weight: this.param(P, 'transformer.wte.weight'),
        N: BT,
        C,
        OC: V,
      }),
      k.crossEntropy.forward(
        {
          logits: a('logits'),
          targets: { buffer: this.targets },
          losses: a('losses'),
          meanLoss: { buffer: this.loss, size: 4 },
        },
        BT,
        V,
      ),
    );
    return out;
  }

  private bindBackward(): BoundKernel[] {
    const { B, T, kernels: k, params: P, grads: G } = this;
    const { nLayer: L, nEmbd: C, nHead: NH, vocabSize: V } = this.config;
    const BT = B * T;
    const a = (name: string) => this.acts.view(name);
    const d = (name: string) => this.dacts.view(name);
    const wte = this.param(P, 'transformer.wte.weight');
    const dwte = this.param(G, 'transformer.wte.weight');
    const residualOut = (l: number) => (l < 0 ? a('encoded') : a(`${l}.residual3`));
    const dres = d('dresidual');
    const out: BoundKernel[] = [k.vector.fill(dres, 0, BT * C)];

    // dlogits = (softmax − onehot) / BT over the logits, then the tied head.
    out.push(
      k.crossEntropy.backward({ logits: a('logits'), targets: { buffer: this.targets } }, BT, V),
      k.matmul.backwardInput({ dinp: d('dlnf'), dout: a('logits'), weight: wte, N: BT, C, OC: V, accumulate: false }),
      k.matmul.backwardWeight({ dweight: dwte, dout: a('logits'), inp: a('lnf'), N: BT, C, OC: V }),
      k.layernorm.backward(
        dres,
        this.param(G, 'transformer.ln_f.weight'),
        this.param(G, 'transformer.ln_f.bias'),
        d('dlnf'),
        residualOut(L - 1),
        this.param(P, 'transformer.ln_f.weight'),
        a('lnfMean'),
        a('lnfRstd'),
        BT,
        C,
      ),
    );
    for (let l = L - 1; l >= 0; l--) {
      const w = (suffix: string) => this.block(P, l, suffix);
      const g = (suffix: string) => this.block(G, l, suffix);
      const x = (name: string) => a(`${l}.${name}`);
      out.push(
        // MLP: dres is ∂L/∂residual3 = ∂L/∂fcproj.
        k.matmul.backwardInput({
          dinp: d('dfchGelu'),
          dout: dres,
          weight: w('mlp.c_proj.weight'),
          N: BT,
          C: 4 * C,
          OC: C,
          accumulate: false,
        }),
        k.matmul.backwardWeight({
          dweight: g('mlp.c_proj.weight'),
          dbias: g('mlp.c_proj.bias'),
          dout: dres,
          inp: x('fchGelu'),
          N: BT,
          C: 4 * C,
          OC: C,
        }),
        k.vector.fill(d('dfch'), 0, BT * 4 * C),
        k.gelu.backward(d('dfch'), x('fch'), d('dfchGelu'), BT * 4 * C),
        k.matmul.backwardInput({
          dinp: d('dln2'),
          dout: d('dfch'),
          weight: w('mlp.c_fc.weight'),
          N: BT,
          C,
          OC: 4 * C,
          accumulate: false,
        }),
        k.matmul.backwardWeight({
          dweight: g('mlp.c_fc.weight'),
          dbias: g('mlp.c_fc.bias'),
          dout: d('dfch'),
          inp: x('ln2'),
          N: BT,
          C,
          OC: 4 * C,
        }),
        // dres becomes ∂L/∂residual2.
        k.layernorm.backward(
          dres,
          g('ln_2.weight'),
          g('ln_2.bias'),
          d('dln2'),
          x('residual2'),
          w('ln_2.weight'),
          x('ln2Mean'),
          x('ln2Rstd'),
          BT,
          C,
        ),
        // Attention: ∂L/∂attproj = ∂L/∂residual2.
        k.matmul.backwardInput({
          dinp: d('datty'),
          dout: dres,
          weight: w('attn.c_proj.weight'),
          N: BT,
          C,
          OC: C,
          accumulate: false,
        }),
        k.matmul.backwardWeight({
          dweight: g('attn.c_proj.weight'),
          dbias: g('attn.c_proj.bias'),
          dout: dres,
          inp: x('atty'),
          N: BT,
          C,
          OC: C,
        }),
        k.vector.fill(d('dqkv'), 0, BT * 3 * C),
        k.attention.backward(
          { qkv: x('qkv'), out: x('atty'), lse: x('lse'), dout: d('datty'), dqkv: d('dqkv') },
          { B, T, C, NH },
        ),
        k.matmul.backwardInput({
          dinp: d('dln1'),
          dout: d('dqkv'),
          weight: w('attn.c_attn.weight'),
          N: BT,
          C,
          OC: 3 * C,
          accumulate: false,
        }),
        k.matmul.backwardWeight({
          dweight: g('attn.c_attn.weight'),
          dbias: g('attn.c_attn.bias'),
          dout: d('dqkv'),
          inp: x('ln1'),
          N: BT,
          C,
          OC: 3 * C,
        }),
        // dres becomes ∂L/∂(this layer's input).
        k.layernorm.backward(
          dres,
          g('ln_1.weight'),
          g('ln_1.bias'),
          d('dln1'),
          residualOut(l - 1),
          w('ln_1.weight'),
          x('ln1Mean'),
          x('ln1Rstd'),
          BT,
          C,
        ),
      );
    }
    out.push(
      k.embedding.backward(
        dwte,
        this.param(G, 'transformer.wpe.weight', T * C),
        dres,
        { buffer: this.inputs },
        B,
        T,
        C,
        V,
      ),
    );
    return out;
  }
}
