/**
 * Per-tensor comparison of a flat gradient against a reference, the measure the engine's targets
 * use: max |got − ref| / max |ref| over each tensor (relative to the tensor's scale, so a tensor
 * whose entries are mostly near zero is not judged by its tiniest entries); and a verdict with an
 * assertion message naming each failing tensor and its worst element. Works on any flat logical
 * vector (parameters too).
 */
import type { ParamLayout } from './layout.ts';

export interface TensorError {
  name: string;
  /** max |got − ref| / max |ref|; NaN when either side has a non-finite value. */
  relative: number;
  maxAbsDiff: number;
  maxAbsRef: number;
}

function gradientErrors(
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
function worstError(errors: TensorError[]): TensorError {
  let worst = errors[0];
  if (!worst) throw new RangeError('no tensors to compare');
  for (const e of errors) if (!(e.relative <= worst.relative)) worst = e;
  return worst;
}

type Flat = Float32Array | Float64Array;

export interface TensorMismatch extends TensorError {
  /** The element (within the tensor) with the largest |got − ref|, and its values. */
  index: number;
  got: number;
  want: number;
}

export interface GradientComparison {
  ok: boolean;
  /** One entry per tensor, in layout order. */
  tensors: TensorError[];
  /** The tensor with the largest relative error (NaN counts as largest). */
  worst: TensorMismatch;
  /** Tensors over the tolerance, or with NaN / infinite values. */
  failures: TensorMismatch[];
  /** A one-line summary when all pass; otherwise one line per failing tensor. */
  message: string;
}

function locate(layout: ParamLayout, error: TensorError, got: Flat, ref: Flat): TensorMismatch {
  const t = layout.byName.get(error.name);
  if (!t) throw new Error(`layout has no ${error.name}`);
  let index = 0;
  let largest = -1;
  for (let k = 0; k < t.size; k++) {
    const diff = Math.abs((got[t.offset + k] as number) - (ref[t.offset + k] as number));
    // A NaN difference is the one to show.
    if (Number.isNaN(diff) || diff > largest) {
      index = k;
      largest = Number.isNaN(diff) ? Number.POSITIVE_INFINITY : diff;
    }
  }
  return { ...error, index, got: got[t.offset + index] as number, want: ref[t.offset + index] as number };
}

const format = (e: TensorMismatch) =>
  `${e.name}: relative ${e.relative.toExponential(2)} (max|diff| ${e.maxAbsDiff.toExponential(2)} / ` +
  `max|ref| ${e.maxAbsRef.toExponential(2)}; at [${e.index}] got ${e.got} want ${e.want})`;

export function compareGradients(layout: ParamLayout, got: Flat, ref: Flat, tol: number): GradientComparison {
  const tensors = gradientErrors(layout, got, ref);
  const worst = locate(layout, worstError(tensors), got, ref);
  const failures = tensors.filter((e) => !(e.relative <= tol)).map((e) => locate(layout, e, got, ref));
  const message =
    failures.length === 0
      ? `all ${tensors.length} tensors within ${tol} relative; worst ${format(worst)}`
      : `${failures.length} of ${tensors.length} tensors over ${tol} relative:\n` +
        `${failures.map((e) => `  ${format(e)}`).join('\n')}`;
  return { ok: failures.length === 0, tensors, worst, failures, message };
}
