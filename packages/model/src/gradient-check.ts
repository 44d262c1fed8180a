/**
 * Per-tensor comparison of a flat gradient against a reference, the measure the engine's targets
 * use: max |got − ref| / max |ref| over each tensor (relative to the tensor's scale, so a tensor
 * whose entries are mostly near zero is not judged by its tiniest entries).
 */
import type { ParamLayout } from './layout.ts';

export interface TensorError {
  name: string;
  /** max |got − ref| / max |ref|; NaN when either side has a non-finite value. */
  relative: number;
  maxAbsDiff: number;
  maxAbsRef: number;
}

export function gradientErrors(
  layout: ParamLayout,
  got: Float32Array | Float64Array,
  ref: Float32Array | Float64Array,
): TensorError[] {
  if (got.length !== layout.size || ref.length !== layout.size) {
    throw new RangeError(`gradients have ${got.length} and ${ref.length} values, the layout ${layout.size}`);
  }
  return layout.tensors.map((t) => {
    let maxAbsDiff = 0;
    let maxAbsRef = 0;
    let finite = true;
    for (let i = t.offset; i < t.offset + t.size; i++) {
      const a = got[i] as number;
      const b = ref[i] as number;
      if (!Number.isFinite(a) || !Number.isFinite(b)) finite = false;
      maxAbsDiff = Math.max(maxAbsDiff, Math.abs(a - b));
      maxAbsRef = Math.max(maxAbsRef, Math.abs(b));
    }
    const relative = !finite
      ? Number.NaN
      : maxAbsRef === 0
        ? maxAbsDiff === 0
          ? 0
          : Number.POSITIVE_INFINITY
        : maxAbsDiff / maxAbsRef;
    return { name: t.name, relative, maxAbsDiff, maxAbsRef };
  });
}

/** The worst tensor of a comparison. */
export function worstError(errors: TensorError[]): TensorError {
  let worst = errors[0];
  if (!worst) throw new RangeError('no tensors to compare');
  for (const e of errors) if (!(e.relative <= worst.relative)) worst = e;
  return worst;
}
