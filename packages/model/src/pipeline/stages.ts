/**
 * Pipeline stages: a model split by layers over S workers (DiLoCoX's pipeline-parallel replica).
 *
 * Stage s holds a run of consecutive transformer blocks. The first stage also holds the
 * embeddings (wte, wpe), and the last holds ln_f and the LM head. The head is tied to wte, so in
 * a pipeline of two or more stages the last stage keeps a copy of wte (Megatron's rule). After
 * each backward pass the two wte gradients are summed and both stages apply the same AdamW
 * update, so the copies stay bitwise equal.
 *
 * The stages partition the global logical vector into contiguous ranges (wte belongs to the first
 * stage). A stage's own vector is its tensors in global order: the last stage's wte copy comes
 * first, then its owned range. So every per-tensor rule (decay, names, shapes) carries over
 * unchanged, and the CPU and WebGPU engines see a ParamLayout of their own.
 */

import type { GptConfig } from '../config.ts';
import { blockRange, buildLayout, GPU_ALIGN_FLOATS, type ParamLayout, type TensorSpec } from '../layout.ts';

export interface StageSpec {
  /** s in 0 … count−1. */
  index: number;
  count: number;
  /** Transformer blocks [firstBlock, endBlock). */
  firstBlock: number;
  endBlock: number;
  /** The first stage: embeds the tokens, owns wte and wpe. */
  embeds: boolean;
  /** The last stage: ln_f, the tied head and the loss. */
  head: boolean;
}

/** A stage's parameters as a layout of their own (offsets rebased), and where they sit globally. */
export interface StageLayout extends ParamLayout {
  stage: StageSpec;
  /** The whole model's layout. */
  global: ParamLayout;
  /** The global range [start, end) this stage owns (the stages partition the global vector). */
  owned: [number, number];
  /** Where the owned range starts in the stage's vector: after the wte copy, else 0. */
  ownedOffset: number;
  /** The last stage's copy of the tied wte (pipelines of two or more stages), else null. */
  tiedCopy: TensorSpec | null;
}

/**
 * Splits nLayer blocks over `count` stages, consecutively. When count does not divide nLayer, the
 * last nLayer mod count stages get one block more, as sequential fragments do: the first stage
 * already carries the embeddings, and with P = S each fragment is a stage.
 */
export function splitStages(nLayer: number, count: number): StageSpec[] {
  if (!Number.isInteger(count) || count < 1 || count > nLayer) {
    throw new RangeError(`Pipeline stages must be an integer from 1 to n_layer = ${nLayer}, got ${count}`);
  }
  const small = Math.floor(nLayer / count);
  const smallStages = count - (nLayer % count);
  const stages: StageSpec[] = [];
  let next = 0;
  for (let s = 0; s < count; s++) {
    const blocks = s < smallStages ? small : small + 1;
    stages.push({
      index: s,
      count,
      firstBlock: next,
      endBlock: next + blocks,
      embeds: s === 0,
      head: s === count - 1,
    });
    next += blocks;
  }
  return stages;
}

const alignUp = (n: number, to: number) => Math.ceil(n / to) * to;

/** The stage's tensors, rebased; `config` stays the whole model's. */
export function buildStageLayout(config: GptConfig, stage: StageSpec): StageLayout {
  const global = buildLayout(config);
  const { firstBlock, endBlock, embeds, head } = stage;
  if (firstBlock < 0 || endBlock > config.nLayer || firstBlock >= endBlock) {
    throw new RangeError(`Stage ${stage.index} holds blocks [${firstBlock}, ${endBlock}) of ${config.nLayer}`);
  }
  const keep = (t: TensorSpec) => {
    if (t.block !== null) return t.block >= firstBlock && t.block < endBlock;
    if (t.name === 'transformer.wte.weight') return embeds || head;
    if (t.name === 'transformer.wpe.weight') return embeds;
    return head; // ln_f
  };
  let offset = 0;
  let paddedOffset = 0;
  const tensors = global.tensors.filter(keep).map((t) => {
    const spec = { ...t, offset, paddedOffset };
    offset += t.size;
    paddedOffset = alignUp(paddedOffset + t.size, GPU_ALIGN_FLOATS);
    return spec;
  });
  const start = embeds ? 0 : blockRange(global, firstBlock)[0];
  const end = head ? global.size : blockRange(global, endBlock - 1)[1];
  const tiedCopy = head && !embeds ? (tensors[0] as TensorSpec) : null;
  const ownedOffset = tiedCopy ? tiedCopy.size : 0;
  if (ownedOffset + end - start !== offset) throw new Error(`stage ${stage.index}: owned range does not match`);
  return {
    config,
    tensors,
    byName: new Map(tensors.map((t) => [t.name, t])),
    size: offset,
    paddedSize: paddedOffset,
    stage,
    global,
    owned: [start, end],
    ownedOffset,
    tiedCopy,
  };
}

/** The stage's vector, taken from a global one (the tied copy included). */
export function gatherStage(layout: StageLayout, global: Float32Array): Float32Array {
  if (global.length !== layout.global.size) {
    throw new RangeError(`global vector has ${global.length} values, the model needs ${layout.global.size}`);
  }
  const local = new Float32Array(layout.size);
  const [start, end] = layout.owned;
  local.set(global.subarray(start, end), layout.ownedOffset);
  if (layout.tiedCopy) local.set(global.subarray(0, layout.tiedCopy.size), 0);
  return local;
}

/** Writes the stage's owned range into a global vector (the tied copy is the first stage's to write). */
export function scatterStage(layout: StageLayout, local: Float32Array, global: Float32Array): void {
  if (local.length !== layout.size) {
    throw new RangeError(`stage vector has ${local.length} values, stage ${layout.stage.index} needs ${layout.size}`);
  }
  global.set(local.subarray(layout.ownedOffset), layout.owned[0]);
}

/** The stage's own values: the range the stage owns, without the tied copy (norms count it once). */
export function ownedValues<A extends Float32Array | Float64Array>(layout: StageLayout, local: A): A {
  return local.subarray(layout.ownedOffset) as A;
}

/** The tied wte's values in the stage's vector (first stage: its own; last: the copy), or null. */
export function tiedValues<A extends Float32Array | Float64Array>(layout: StageLayout, local: A): A | null {
  if (!layout.stage.embeds && !layout.stage.head) return null;
  if (layout.stage.count === 1) return null;
  const wte = layout.byName.get('transformer.wte.weight') as TensorSpec;
  return local.subarray(wte.offset, wte.offset + wte.size) as A;
}
