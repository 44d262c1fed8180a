/**
 * The GPT-2 forward and backward pass on the CPU, composed from the kernels' CPU references
 * (llm.c's train_gpt2.c, layer by layer). Generic over the float type: Float64Array gives the
 * reference the WebGPU engine and finite differences are checked against, on the JS references;
 * Float32Array is the CPU training backend, on the WebAssembly SIMD kernels with its activations
 * in their memory (kernels.ts). Nothing is allocated per step.
 */
import type { FloatArray } from '@shoal/gpu';
import type { GptConfig } from '../config.ts';
import { buildLayout, type ParamLayout } from '../layout.ts';
import { buildStageLayout, type StageSpec } from '../pipeline/stages.ts';
import { checkTokens } from '../tokens.ts';
import { type Activations, activationFloats, allocateActivations } from './activations.ts';
import {
  type CpuBackend,
  type CpuBackendOptions,
  type CpuKernels,
  createCpuBackend,
  type FloatArrayConstructor,
} from './kernels.ts';

/** Named views of one block's parameters (or gradients). */
interface BlockTensors<A extends FloatArray> {
  ln1w: A;
  ln1b: A;
  qkvw: A;
  qkvb: A;
  attprojw: A;
  attprojb: A;
  ln2w: A;
  ln2b: A;
  fcw: A;
  fcb: A;
  fcprojw: A;
  fcprojb: A;
}

interface ModelTensors<A extends FloatArray> {
  wte: A;
  wpe: A;
  blocks: BlockTensors<A>[];
  lnfw: A;
  lnfb: A;
}

const BLOCK_KEYS: [keyof BlockTensors<FloatArray>, string][] = [
  ['ln1w', 'ln_1.weight'],
  ['ln1b', 'ln_1.bias'],
  ['qkvw', 'attn.c_attn.weight'],
  ['qkvb', 'attn.c_attn.bias'],
  ['attprojw', 'attn.c_proj.weight'],
  ['attprojb', 'attn.c_proj.bias'],
  ['ln2w', 'ln_2.weight'],
  ['ln2b', 'ln_2.bias'],
  ['fcw', 'mlp.c_fc.weight'],
  ['fcb', 'mlp.c_fc.bias'],
  ['fcprojw', 'mlp.c_proj.weight'],
  ['fcprojb', 'mlp.c_proj.bias'],
];

/** Views of the tensors the layout holds; a pipeline stage's missing ones are empty views, never read. */
function pointTensors<A extends FloatArray>(layout: ParamLayout, stage: StageSpec, flat: A): ModelTensors<A> {
  const view = (name: string) => {
    const t = layout.byName.get(name);
    return (t ? flat.subarray(t.offset, t.offset + t.size) : flat.subarray(0, 0)) as A;
  };
  return {
    wte: view('transformer.wte.weight'),
    wpe: view('transformer.wpe.weight'),
    blocks: Array.from({ length: stage.endBlock - stage.firstBlock }, (_, i) => {
      const block = {} as BlockTensors<A>;
      for (const [key, suffix] of BLOCK_KEYS) block[key] = view(`transformer.h.${stage.firstBlock + i}.${suffix}`);
      return block;
    }),
    lnfw: view('transformer.ln_f.weight'),
    lnfb: view('transformer.ln_f.bias'),
  };
}

/** The whole model as a one-stage pipeline. */
function wholeModel(config: GptConfig): StageSpec {
  return { index: 0, count: 1, firstBlock: 0, endBlock: config.nLayer, embeds: true, head: true };
}

/** The gradient buffers that backward kernels add into, zeroed before each backward pass. */
const ACCUMULATED = ['fcproj', 'fchGelu', 'fch', 'ln2', 'attproj', 'atty', 'qkv', 'ln1'] as const;

export interface CpuGptOptions<A extends FloatArray> extends CpuBackendOptions {
  /** Replaces the kernels (the benchmark wraps them in timers). */
  wrapKernels?: (kernels: CpuKernels<A>) => CpuKernels<A>;
  /**
   * One pipeline stage of the model (pipeline/stages.ts) instead of the whole of it: the layout
   * is then the stage's, a stage that does not embed takes the previous stage's output as its
   * input, and one without the head returns its output for the next.
   */
  stage?: StageSpec;
  /** Floats to reserve in the kernels' memory beyond the activations, for `allocate` (CpuTrainer keeps its vectors there). */
  extraFloats?: number;
}

export interface BackwardOptions<A extends FloatArray> {
  /** A stage without the head: the gradient of the loss with respect to its output, (B,T,C). */
  dOutput?: A;
  /** Add into `grads` instead of overwriting them (gradient accumulation over micro-batches). */
  accumulate?: boolean;
}

/**
 * One model shape and batch shape, with activations and their gradients allocated once.
 * `forward` then `backward` per step; parameters and gradients are flat logical vectors.
 */
export class CpuGpt<A extends FloatArray> {
  readonly layout: ParamLayout;
  /** 'wasm-simd' when the float32 kernels run in WebAssembly SIMD (where available), else 'js'. */
  readonly backendName: CpuBackend<A>['name'];
  /** Threads the kernels run on, and why fewer than asked when so (CpuBackendOptions.threads). */
  readonly threads: { count: number; note?: string };
  /** Resolves once the kernel threads have started (steps before then run on one thread, with the same results). */
  readonly ready: Promise<void>;
  private readonly destroyBackend: () => void;
  /** `n` zeroed floats in the kernels' memory (from CpuGptOptions.extraFloats), which kernels use in place. */
  readonly allocate: (n: number) => A;
  /** The SIMD gradient norm and AdamW on that memory (null on the JS kernels). */
  readonly optimizer: CpuBackend<A>['optimizer'];
  /** The blocks this model runs, and whether it embeds and ends in the head (the whole model: all). */
  readonly stage: StageSpec;
  private readonly kernels: CpuKernels<A>;
  private readonly acts: Activations<A>;
  private readonly grads: Activations<A>;
  private inputs: Int32Array | null = null;
  private targets: Int32Array | null = null;
  /** A forward pass ran whose backward has not: a stage without the head needs no targets. */
  private forwarded = false;
  /** Named views of the last parameter and gradient vectors seen, kept while the same arrays come back. */
  private paramViews: { flat: A; tensors: ModelTensors<A> } | null = null;
  private gradViews: { flat: A; tensors: ModelTensors<A> } | null = null;

  constructor(
    readonly config: GptConfig,
    readonly B: number,
    readonly T: number,
    readonly ArrayType: FloatArrayConstructor<A>,
    options: CpuGptOptions<A> = {},
  ) {
    if (T > config.blockSize) throw new RangeError(`sequence length ${T} exceeds block_size ${config.blockSize}`);
    this.stage = options.stage ?? wholeModel(config);
    this.layout = options.stage ? buildStageLayout(config, options.stage) : buildLayout(config);
    const { nEmbd: C, nHead: NH, vocabSize: V } = config;
    const BT = B * T;
    const shape = { layers: this.stage.endBlock - this.stage.firstBlock, head: this.stage.head };
    const floats = activationFloats(config, B, T, shape);
    const matmuls: [number, number, number][] = [
      [BT, C, 3 * C],
      [BT, C, C],
      [BT, C, 4 * C],
      [BT, 4 * C, C],
      [BT, C, V],
    ];
    // Two blocks (activations and their gradients), each rounded up to 4 floats by the arena.
    const extra = options.extraFloats ?? 0;
    const backend = createCpuBackend(
      ArrayType,
      2 * (floats + 4) + extra,
      { matmuls, T, C, NH, N: BT, V, optimizer: extra },
      options,
    );
    this.backendName = backend.name;
    this.threads = { count: backend.threads, ...(backend.threadsNote ? { note: backend.threadsNote } : {}) };
    this.ready = backend.ready;
    this.destroyBackend = () => backend.destroy();
    this.allocate = backend.allocate;
    this.optimizer = backend.optimizer;
    this.kernels = options.wrapKernels ? options.wrapKernels(backend.kernels) : backend.kernels;
    this.acts = allocateActivations(config, B, T, backend.allocate, shape);
    this.grads = allocateActivations(config, B, T, backend.allocate, shape);
  }

  /** Bytes of its activations and their gradients (the kernels' scratch not included). */
  get activationBytes(): number {
    return (this.acts.size + this.grads.size) * this.acts.encoded.BYTES_PER_ELEMENT;
  }

  /** Stops the kernel threads; the model still computes, on the calling thread. */
  destroy(): void {
    this.destroyBackend();
  }

  private views(which: 'paramViews' | 'gradViews', flat: A): ModelTensors<A> {
    const cached = this[which];
    if (cached && cached.flat === flat) return cached.tensors;
    const tensors = pointTensors(this.layout, this.stage, flat);
    this[which] = { flat, tensors };
    return tensors;
  }

  /**
   * Runs the model; with targets, returns the mean cross-entropy loss. A stage that does not
   * embed takes the previous stage's output (B,T,C) as `inputs`; a stage without the head
   * ignores `targets`, returns NaN and leaves its output in `output`.
   */
  forward(params: A, inputs: Int32Array | A, targets: Int32Array | null): number {
    const { B, T, acts, stage } = this;
    const { nHead: NH, nEmbd: C, vocabSize: V } = this.config;
    const L = stage.endBlock - stage.firstBlock;
    const BT = B * T;
    const expected = stage.embeds ? BT : BT * C;
    if (inputs.length !== expected || stage.embeds !== inputs instanceof Int32Array) {
      const what = stage.embeds ? `${BT} tokens` : `${BT * C} activations`;
      throw new RangeError(`stage ${stage.index} expects ${what} as input, got ${inputs.length}`);
    }
    if (stage.head && targets && targets.length !== BT) {
      throw new RangeError(`expected ${BT} targets, got ${targets.length}`);
    }
    if (stage.embeds) checkTokens(inputs as Int32Array, V);
    if (stage.head && targets) checkTokens(targets, V);
    this.inputs = stage.embeds ? (inputs as Int32Array) : null;
    this.targets = stage.head ? targets : null;
    this.forwarded = true;
    const p = this.views('paramViews', params);
    const k = this.kernels;

    if (stage.embeds) k.embeddingForward(acts.encoded, inputs as Int32Array, p.wte, p.wpe, B, T, C);
    else acts.encoded.set(inputs as A);
    let residual = acts.encoded;
    for (let l = 0; l < L; l++) {
      const a = acts.layers[l] as Activations<A>['layers'][number];
      const w = p.blocks[l] as BlockTensors<A>;
      k.layernormForward(a.ln1, a.ln1Mean, a.ln1Rstd, residual, w.ln1w, w.ln1b, BT, C);
      k.matmulForward(a.qkv, a.ln1, w.qkvw, w.qkvb, BT, C, 3 * C);
      k.attentionForward(a.atty, a.preatt, a.att, a.qkv, B, T, C, NH);
      k.matmulForward(a.attproj, a.atty, w.attprojw, w.attprojb, BT, C, C);
      k.residualForward(a.residual2, residual, a.attproj, BT * C);
      k.layernormForward(a.ln2, a.ln2Mean, a.ln2Rstd, a.residual2, w.ln2w, w.ln2b, BT, C);
      k.matmulForward(a.fch, a.ln2, w.fcw, w.fcb, BT, C, 4 * C);
      k.geluForward(a.fchGelu, a.fch, BT * 4 * C);
      k.matmulForward(a.fcproj, a.fchGelu, w.fcprojw, w.fcprojb, BT, 4 * C, C);
      k.residualForward(a.residual3, a.residual2, a.fcproj, BT * C);
      residual = a.residual3;
    }
    if (!stage.head) return Number.NaN;
    k.layernormForward(acts.lnf, acts.lnfMean, acts.lnfRstd, residual, p.lnfw, p.lnfb, BT, C);
    // Tied head: logits = lnf · wteᵀ, no bias.
    k.matmulForward(acts.logits, acts.lnf, p.wte, null, BT, C, V);
    if (!targets) return Number.NaN;
    return k.crossEntropyForward(acts.losses, acts.logits, targets, BT, V);
  }

  /** The logits of the last forward pass, (B,T,V). Valid until `backward` runs. */
  get logits(): A {
    return this.acts.logits;
  }

  /** A stage's output after `forward`, (B,T,C): the last block's residual stream. */
  get output(): A {
    const last = this.acts.layers.at(-1);
    return last ? last.residual3 : this.acts.encoded;
  }

  /** After `backward` in a stage that does not embed: the gradient with respect to its input. */
  get inputGrad(): A {
    return this.grads.encoded;
  }

  /**
   * Gradient of the mean loss of the last forward pass, written (not added) into `grads` unless
   * `accumulate`. A stage without the head starts from `dOutput`, the next stage's input gradient.
   */
  backward(params: A, grads: A, options: BackwardOptions<A> = {}): void {
    const { B, T, acts, stage } = this;
    const { nHead: NH, nEmbd: C, vocabSize: V } = this.config;
    const L = stage.endBlock - stage.firstBlock;
    const BT = B * T;
    if (!this.forwarded || (stage.head && !this.targets)) {
      throw new Error('backward needs a forward pass with targets first');
    }
    if (!stage.head && options.dOutput?.length !== BT * C) {
      throw new RangeError(`stage ${stage.index} needs the gradient of its ${BT * C} outputs`);
    }
    const d = this.grads;
    if (!options.accumulate) grads.fill(0);
    for (const layer of d.layers) {
      layer.residual2.fill(0);
      layer.residual3.fill(0);
    }
    d.encoded.fill(0);
    const p = this.views('paramViews', params);
    const g = this.views('gradViews', grads);
    const k = this.kernels;

    const dLastResidual = L > 0 ? (d.layers[L - 1] as Activations<A>['layers'][number]).residual3 : d.encoded;
    if (stage.head && this.targets) {
      // dlogits = (softmax − onehot) / BT, in place of the logits.
      k.crossEntropyBackward(acts.logits, acts.logits, this.targets, BT, V);
      d.lnf.fill(0);
      k.matmulBackward(d.lnf, g.wte, null, acts.logits, acts.lnf, p.wte, BT, C, V);
      const lastResidual = this.output;
      k.layernormBackward(
        dLastResidual,
        g.lnfw,
        g.lnfb,
        d.lnf,
        lastResidual,
        p.lnfw,
        acts.lnfMean,
        acts.lnfRstd,
        BT,
        C,
      );
    } else {
      dLastResidual.set(options.dOutput as A);
    }

    for (let l = L - 1; l >= 0; l--) {
      const a = acts.layers[l] as Activations<A>['layers'][number];
      const da = d.layers[l] as Activations<A>['layers'][number];
      const w = p.blocks[l] as BlockTensors<A>;
      const dw = g.blocks[l] as BlockTensors<A>;
      const residual = l === 0 ? acts.encoded : (acts.layers[l - 1] as Activations<A>['layers'][number]).residual3;
      const dresidual = l === 0 ? d.encoded : (d.layers[l - 1] as Activations<A>['layers'][number]).residual3;
      // dpreatt and datt need no zeroing: attentionBackward overwrites the entries it uses.
      for (const key of ACCUMULATED) da[key].fill(0);

      k.residualBackward(da.residual2, da.fcproj, da.residual3, BT * C);
      k.matmulBackward(da.fchGelu, dw.fcprojw, dw.fcprojb, da.fcproj, a.fchGelu, w.fcprojw, BT, 4 * C, C);
      k.geluBackward(da.fch, a.fch, da.fchGelu, BT * 4 * C);
      k.matmulBackward(da.ln2, dw.fcw, dw.fcb, da.fch, a.ln2, w.fcw, BT, C, 4 * C);
      k.layernormBackward(da.residual2, dw.ln2w, dw.ln2b, da.ln2, a.residual2, w.ln2w, a.ln2Mean, a.ln2Rstd, BT, C);
      k.residualBackward(dresidual, da.attproj, da.residual2, BT * C);
      k.matmulBackward(da.atty, dw.attprojw, dw.attprojb, da.attproj, a.atty, w.attprojw, BT, C, C);
      k.attentionBackward(da.qkv, da.preatt, da.att, da.atty, a.qkv, a.att, B, T, C, NH);
      k.matmulBackward(da.ln1, dw.qkvw, dw.qkvb, da.qkv, a.ln1, w.qkvw, BT, C, 3 * C);
      k.layernormBackward(dresidual, dw.ln1w, dw.ln1b, da.ln1, residual, w.ln1w, a.ln1Mean, a.ln1Rstd, BT, C);
    }
    if (stage.embeds && this.inputs) k.embeddingBackward(g.wte, g.wpe, d.encoded, this.inputs, B, T, C);
    this.targets = null; // the logits now hold dlogits: another backward needs another forward
    this.forwarded = false;
  }
}
