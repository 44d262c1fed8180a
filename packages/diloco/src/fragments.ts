/**
 * Fragments: the P parts of the model that Streaming DiLoCo synchronises one at a time.
 *
 * A fragment is a set of transformer blocks plus the non-block tensors that travel with them:
 * wte and wpe with the fragment holding block 0, ln_f with the one holding the last block. In
 * the logical flat layout (packages/model layout.ts: wte, wpe, h.0 … h.{L−1}, ln_f, each block's
 * tensors consecutive) a fragment is a sorted list of disjoint ranges [start, end); touching
 * ranges are merged, so a `sequential` fragment is always one range and a `strided` one has a
 * range per block (plus the embeddings or ln_f merged onto the ends).
 *
 * The wire, codecs, aggregation, outer step and hash all work on a fragment's contiguous form:
 * its ranges' values concatenated in ascending offset order (`gatherFragment`), of `size` values.
 *
 * Only the layout's type is imported from @shoal/model, so this package pulls none of the
 * engine into a Web Worker bundle.
 */
import type { ParamLayout } from '@shoal/model';

export type FragmentMode = 'sequential' | 'strided';

export interface Fragment {
  /** p in 0 … P−1. */
  index: number;
  /** Transformer block indices, ascending. */
  blocks: number[];
  /** Disjoint logical ranges [start, end), ascending; touching ranges merged. */
  ranges: [number, number][];
  /** Values in the fragment: Σ (end − start). */
  size: number;
  /** Its tensors in the contiguous form, ascending (the low-rank codec factors the 2-D ones). */
  tensors: FragmentTensor[];
}

/** A tensor of a fragment: where it sits in the contiguous form, and its shape as rows×cols. */
export interface FragmentTensor {
  name: string;
  /** Offset in the fragment's contiguous form. */
  offset: number;
  size: number;
  /** Row-major rows×cols ([out, in] for a linear weight); a 1-D tensor is size×1. */
  rows: number;
  cols: number;
}

/**
 * Which blocks fragment p holds.
 * - `sequential`: consecutive runs. When P does not divide L, L mod P fragments get one block
 *   more, and they are the last ones, since fragment 0 already carries the embeddings.
 * - `strided`: block b goes to fragment b mod P (interleaved), so the first L mod P fragments
 *   get the extra block.
 */
export function fragmentBlocks(nLayer: number, fragmentCount: number, mode: FragmentMode): number[][] {
  if (!Number.isInteger(fragmentCount) || fragmentCount < 1 || fragmentCount > nLayer) {
    throw new RangeError(`Fragment count P must be an integer from 1 to n_layer = ${nLayer}, got ${fragmentCount}`);
  }
  const blocks: number[][] = Array.from({ length: fragmentCount }, () => []);
  if (mode === 'strided') {
    for (let b = 0; b < nLayer; b++) blocks[b % fragmentCount]?.push(b);
    return blocks;
  }
  if (mode !== 'sequential') throw new RangeError(`Fragment mode must be 'sequential' or 'strided', got '${mode}'`);
  const small = Math.floor(nLayer / fragmentCount);
  const smallFragments = fragmentCount - (nLayer % fragmentCount);
  let next = 0;
  for (let p = 0; p < fragmentCount; p++) {
    const count = p < smallFragments ? small : small + 1;
    for (let i = 0; i < count; i++) blocks[p]?.push(next++);
  }
  return blocks;
}

/** Splits the layout into P fragments; every logical parameter lands in exactly one. */
export function buildFragments(layout: ParamLayout, fragmentCount: number, mode: FragmentMode): Fragment[] {
  const nLayer = layout.config.nLayer;
  const blocksOf = fragmentBlocks(nLayer, fragmentCount, mode);
  const owner = new Map<number, number>(); // block → fragment
  blocksOf.forEach((blocks, p) => {
    for (const b of blocks) owner.set(b, p);
  });
  const ownerOfTensor = (block: number | null, name: string): number => {
    if (block !== null) return owner.get(block) as number;
    if (name === 'transformer.ln_f.weight' || name === 'transformer.ln_f.bias') return owner.get(nLayer - 1) as number;
    return owner.get(0) as number; // wte, wpe
  };

  const ranges: [number, number][][] = blocksOf.map(() => []);
  for (const t of layout.tensors) {
    const own = ranges[ownerOfTensor(t.block, t.name)] as [number, number][];
    const last = own[own.length - 1];
    if (last && last[1] === t.offset) last[1] = t.offset + t.size;
    else own.push([t.offset, t.offset + t.size]);
  }
  return blocksOf.map((blocks, index) => {
    const own = ranges[index] as [number, number][];
    const size = own.reduce((sum, [start, end]) => sum + end - start, 0);
    return { index, blocks, ranges: own, size, tensors: tensorsOf(layout, own) };
  });
}

/** The layout's tensors inside `ranges`, at their offsets in the contiguous form. */
function tensorsOf(layout: ParamLayout, ranges: [number, number][]): FragmentTensor[] {
  const tensors: FragmentTensor[] = [];
  let at = 0;
  for (const [start, end] of ranges) {
    for (const t of layout.tensors) {
      if (t.offset < start || t.offset >= end) continue;
      const [rows = t.size, cols = 1] = t.shape.length === 2 ? t.shape : [t.size, 1];
      tensors.push({ name: t.name, offset: at + t.offset - start, size: t.size, rows, cols });
    }
    at += end - start;
  }
  return tensors;
}

/** Copies fragment values out of a logical flat vector into their contiguous form. */
export function gatherFragment(flat: Float32Array, fragment: Fragment, out?: Float32Array): Float32Array {
  const contiguous = out ?? new Float32Array(fragment.size);
  if (contiguous.length !== fragment.size) {
    throw new RangeError(`Fragment ${fragment.index} has ${fragment.size} values, output holds ${contiguous.length}`);
  }
  let at = 0;
  for (const [start, end] of fragment.ranges) {
    if (end > flat.length)
      throw new RangeError(`Fragment ${fragment.index} reaches ${end}, flat vector has ${flat.length}`);
    contiguous.set(flat.subarray(start, end), at);
    at += end - start;
  }
  return contiguous;
}

/** Writes a fragment's contiguous form back into its places in a logical flat vector. */
export function scatterFragment(contiguous: Float32Array, fragment: Fragment, flat: Float32Array): void {
  if (contiguous.length !== fragment.size) {
    throw new RangeError(`Fragment ${fragment.index} has ${fragment.size} values, got ${contiguous.length}`);
  }
  let at = 0;
  for (const [start, end] of fragment.ranges) {
    if (end > flat.length)
      throw new RangeError(`Fragment ${fragment.index} reaches ${end}, flat vector has ${flat.length}`);
    flat.set(contiguous.subarray(at, at + end - start), start);
    at += end - start;
  }
}
