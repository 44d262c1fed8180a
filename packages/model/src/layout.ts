/**
 * All parameters in one flat vector with named views (llm.c's malloc_and_point_parameters).
 * Gradients, AdamW moments, DiLoCo state, checkpoints and the wire all use this one layout.
 *
 * Two offsets per tensor: `offset` in the logical, unpadded vector (wire, hashes, checkpoints),
 * and `paddedOffset` on the GPU, aligned to 64 floats (256 bytes) so every tensor can be bound as
 * a storage-buffer view (minStorageBufferOffsetAlignment).
 */
import type { GptConfig } from './config.ts';

export interface TensorSpec {
  /** nanoGPT name, e.g. `transformer.h.0.attn.c_attn.weight`. */
  name: string;
  /** nanoGPT shape, [out, in] for linear weights. */
  shape: number[];
  size: number;
  offset: number;
  paddedOffset: number;
  /** Decoupled weight decay applies (2-D tensors: embeddings and linear weights), as in nanoGPT. */
  decay: boolean;
  /** Transformer block index, or null for the embeddings and ln_f. */
  block: number | null;
}

export interface ParamLayout {
  config: GptConfig;
  tensors: TensorSpec[];
  byName: Map<string, TensorSpec>;
  /** Logical parameter count. */
  size: number;
  /** Floats on the GPU including alignment padding. */
  paddedSize: number;
}

export const GPU_ALIGN_FLOATS = 64;
const alignUp = (n: number, to: number) => Math.ceil(n / to) * to;

/** The per-block tensors in nanoGPT order, with their shapes for channels C. */
function blockTensorShapes(C: number): [string, number[]][] {
  return [
    ['ln_1.weight', [C]],
    ['ln_1.bias', [C]],
    ['attn.c_attn.weight', [3 * C, C]],
    ['attn.c_attn.bias', [3 * C]],
    ['attn.c_proj.weight', [C, C]],
    ['attn.c_proj.bias', [C]],
    ['ln_2.weight', [C]],
    ['ln_2.bias', [C]],
    ['mlp.c_fc.weight', [4 * C, C]],
    ['mlp.c_fc.bias', [4 * C]],
    ['mlp.c_proj.weight', [C, 4 * C]],
    ['mlp.c_proj.bias', [C]],
  ];
}

export function buildLayout(config: GptConfig): ParamLayout {
  const { nLayer, nEmbd: C, blockSize, vocabSize: V } = config;
  const entries: [string, number[], number | null][] = [
    ['transformer.wte.weight', [V, C], null],
    ['transformer.wpe.weight', [blockSize, C], null],
  ];
  for (let i = 0; i < nLayer; i++) {
    for (const [suffix, shape] of blockTensorShapes(C)) entries.push([`transformer.h.${i}.${suffix}`, shape, i]);
  }
  entries.push(['transformer.ln_f.weight', [C], null], ['transformer.ln_f.bias', [C], null]);

  let offset = 0;
  let paddedOffset = 0;
  const tensors: TensorSpec[] = entries.map(([name, shape, block]) => {
    const size = shape.reduce((a, b) => a * b, 1);
    const spec = { name, shape, size, offset, paddedOffset, decay: shape.length >= 2, block };
    offset += size;
    paddedOffset = alignUp(paddedOffset + size, GPU_ALIGN_FLOATS);
    return spec;
  });
  return { config, tensors, byName: new Map(tensors.map((t) => [t.name, t])), size: offset, paddedSize: paddedOffset };
}

export function tensor(layout: ParamLayout, name: string): TensorSpec {
  const spec = layout.byName.get(name);
  if (!spec) throw new Error(`No parameter named ${name}`);
  return spec;
}

/** The logical range [start, end) holding block i's tensors (they are consecutive). */
export function blockRange(layout: ParamLayout, block: number): [number, number] {
  const inBlock = layout.tensors.filter((t) => t.block === block);
  if (inBlock.length === 0) throw new RangeError(`No block ${block} in a ${layout.config.nLayer}-layer model`);
  const last = inBlock[inBlock.length - 1] as TensorSpec;
  return [(inBlock[0] as TensorSpec).offset, last.offset + last.size];
}

/** Named views of a logical flat vector (params, grads or moments). */
export function views<A extends Float32Array | Float64Array>(layout: ParamLayout, flat: A): Map<string, A> {
  if (flat.length !== layout.size)
    throw new RangeError(`Flat vector has ${flat.length} values, layout needs ${layout.size}`);
  return new Map(layout.tensors.map((t) => [t.name, flat.subarray(t.offset, t.offset + t.size) as A]));
}

/** Logical (unpadded) → GPU (padded) order. */
export function padForGpu(layout: ParamLayout, logical: Float32Array): Float32Array {
  const padded = new Float32Array(layout.paddedSize);
  for (const t of layout.tensors) padded.set(logical.subarray(t.offset, t.offset + t.size), t.paddedOffset);
  return padded;
}

/** GPU (padded) → logical (unpadded) order. */
export function unpadFromGpu(layout: ParamLayout, padded: Float32Array): Float32Array {
  const logical = new Float32Array(layout.size);
  for (const t of layout.tensors) logical.set(padded.subarray(t.paddedOffset, t.paddedOffset + t.size), t.offset);
  return logical;
}

/** One run of values of logical ranges: where it sits logically, padded, and in the concatenation. */
export interface RangePiece {
  logical: number;
  padded: number;
  /** Offset in the ranges' values concatenated. */
  at: number;
  length: number;
}

/**
 * The logical ranges [start, end) cut at tensor boundaries, each piece with its padded offset
 * and its place in the ranges' values concatenated (a fragment's contiguous form): what a GPU
 * engine copies to read or write just those values. Throws on a range outside the model.
 */
export function rangePieces(layout: ParamLayout, ranges: readonly (readonly [number, number])[]): RangePiece[] {
  const pieces: RangePiece[] = [];
  let at = 0;
  for (const [start, end] of ranges) {
    if (!(start >= 0 && start <= end && end <= layout.size)) {
      throw new RangeError(`range [${start}, ${end}) is outside the model's ${layout.size} values`);
    }
    for (const t of layout.tensors) {
      const from = Math.max(start, t.offset);
      const to = Math.min(end, t.offset + t.size);
      if (from >= to) continue;
      pieces.push({
        logical: from,
        padded: t.paddedOffset + from - t.offset,
        at: at + from - start,
        length: to - from,
      });
    }
    at += end - start;
  }
  return pieces;
}
