/**
 * The buffers a GpuGpt binds its kernels to, for one batch shape, and how parameter tensors are
 * addressed in them. Memory (see docs/design.md, "GPU memory"): parameters and gradients are
 * two flat buffers in the padded layout (layout.ts); activations and activation gradients live in
 * two arenas, each tensor its own aligned view (Dawn forbids overlapping writable views in one
 * dispatch). Forward keeps what backward reads, per layer; the activation gradients are per
 * model, not per layer, as in llm.c (backward.ts says how they are reused).
 *
 * A pipeline stage (pipeline/stages.ts) binds the same way with its own layout: activations for
 * its blocks only (named by their global block index), and ln_f, the logits and the losses only
 * on the stage with the head.
 */
import type { TensorView } from '@shoal/gpu';
import type { GptConfig } from '../config.ts';
import type { ParamLayout } from '../layout.ts';
import type { StageSpec } from '../pipeline/stages.ts';
import { TensorArena } from './arena.ts';
import type { GptKernels } from './kernels.ts';

/** What the forward and backward binders read. */
export interface GptBuffers {
  readonly config: GptConfig;
  /** The whole model's layout, or a stage's (buildStageLayout). */
  readonly layout: ParamLayout;
  /** The blocks bound, and whether the pass embeds and ends in the head (the whole model: all). */
  readonly stage: StageSpec;
  readonly B: number;
  readonly T: number;
  readonly kernels: GptKernels;
  /** Parameters and their gradients, padded layout (layout.ts's paddedOffset). */
  readonly params: GPUBuffer;
  readonly grads: GPUBuffer;
  /** [0]: the batch's mean loss. */
  readonly loss: GPUBuffer;
  /** [B·T] int32 each. */
  readonly inputs: GPUBuffer;
  readonly targets: GPUBuffer;
  readonly acts: TensorArena;
  readonly dacts: TensorArena;
}

/** The whole model as a one-stage pipeline: every block, the embeddings and the head. */
export function wholeModelStage(config: GptConfig): StageSpec {
  return { index: 0, count: 1, firstBlock: 0, endBlock: config.nLayer, embeds: true, head: true };
}

/** A view of one parameter (or gradient) tensor in the padded flat buffer; `floats` takes a prefix. */
export function paramView(layout: ParamLayout, buffer: GPUBuffer, name: string, floats?: number): TensorView {
  const spec = layout.byName.get(name);
  if (!spec) throw new Error(`layout has no ${name}`);
  return { buffer, offset: spec.paddedOffset * 4, size: (floats ?? spec.size) * 4 };
}

/** A view of block `l`'s tensor `transformer.h.{l}.{suffix}` (l is the global block index). */
export function blockView(layout: ParamLayout, buffer: GPUBuffer, l: number, suffix: string): TensorView {
  return paramView(layout, buffer, `transformer.h.${l}.${suffix}`);
}

/** The tensors of the activation arena and of the activation-gradient arena, `[name, floats]`. */
export function activationTensors(
  config: GptConfig,
  B: number,
  T: number,
  stage: StageSpec = wholeModelStage(config),
): { acts: [string, number][]; dacts: [string, number][] } {
  const { nEmbd: C, nHead: NH, vocabSize: V } = config;
  const BT = B * T;
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
  const blocks = Array.from({ length: stage.endBlock - stage.firstBlock }, (_, i) => stage.firstBlock + i);
  const head: [string, number][] = stage.head
    ? [
        ['lnf', BT * C],
        ['lnfMean', BT],
        ['lnfRstd', BT],
        ['logits', BT * V], // dlogits in place after backward's cross-entropy
        ['losses', BT],
      ]
    : [];
  const acts: [string, number][] = [
    // The embedding's output, or a later stage's input (the previous stage's output).
    ['encoded', BT * C],
    ['attproj', BT * C], // scratch: read once by the residual add of the same layer
    ['fcproj', BT * C],
    ...blocks.flatMap((l) => perLayer.map(([name, n]) => [`${l}.${name}`, n] as [string, number])),
    ...head,
  ];
  const dacts: [string, number][] = [
    // ∂L/∂residual; after backward, on a stage that does not embed, the input gradient.
    ['dresidual', BT * C],
    ...(stage.head ? ([['dlnf', BT * C]] as [string, number][]) : []),
    ['dfchGelu', BT * 4 * C],
    ['dfch', BT * 4 * C],
    ['dln2', BT * C],
    ['datty', BT * C],
    ['dqkv', BT * 3 * C],
    ['dln1', BT * C],
  ];
  return { acts, dacts };
}

/** The activation arena (what forward writes and backward reads) and the activation-gradient arena. */
export function createActivationArenas(
  device: GPUDevice,
  config: GptConfig,
  B: number,
  T: number,
  stage: StageSpec = wholeModelStage(config),
): { acts: TensorArena; dacts: TensorArena } {
  const tensors = activationTensors(config, B, T, stage);
  return {
    acts: TensorArena.create(device, 'GpuGpt.acts', tensors.acts),
    dacts: TensorArena.create(device, 'GpuGpt.dacts', tensors.dacts),
  };
}
