/**
 * GPU-vs-reference comparison with a tolerance scaled by magnitude: |got − want| ≤ atol + rtol·|want|.
 * On failure the message lists the first few mismatches and the worst one, not a wall of numbers.
 */
export interface Mismatch {
  index: number;
  got: number;
  want: number;
  diff: number;
}

export interface Comparison {
  ok: boolean;
  /** How many values broke the tolerance (NaN and length mismatches count). */
  failures: number;
  worst: Mismatch | null;
  message: string;
}

export interface Tolerance {
  atol?: number;
  rtol?: number;
  /** How many mismatches the message lists. */
  show?: number;
}

const fmt = (m: Mismatch) => `[${m.index}] got ${m.got} want ${m.want} (diff ${m.diff.toExponential(2)})`;

export function compareArrays(got: ArrayLike<number>, want: ArrayLike<number>, tolerance: Tolerance = {}): Comparison {
  const { atol = 1e-5, rtol = 1e-4, show = 5 } = tolerance;
  if (got.length !== want.length) {
    return {
      ok: false,
      failures: Math.abs(got.length - want.length),
      worst: null,
      message: `length ${got.length}, expected ${want.length}`,
    };
  }
  const first: Mismatch[] = [];
  let worst: Mismatch | null = null;
  let worstExcess = 0;
  let failures = 0;
  for (let i = 0; i < got.length; i++) {
    const g = got[i] as number;
    const w = want[i] as number;
    const diff = Math.abs(g - w);
    const limit = atol + rtol * Math.abs(w);
    // `!(diff <= limit)` also catches NaN on either side.
    if (!(diff <= limit)) {
      failures++;
      const mismatch = { index: i, got: g, want: w, diff };
      if (first.length < show) first.push(mismatch);
      const excess = Number.isNaN(diff) ? Number.POSITIVE_INFINITY : diff / limit;
      if (worst === null || excess > worstExcess) {
        worst = mismatch;
        worstExcess = excess;
      }
    }
  }
  if (failures === 0)
    return { ok: true, failures, worst: null, message: `all ${got.length} values within ${atol} + |ref|·${rtol}` };
  const message =
    `${failures} of ${got.length} values differ beyond ${atol} + |ref|·${rtol}; ` +
    `first: ${first.map(fmt).join('; ')}; worst: ${worst ? fmt(worst) : 'n/a'}`;
  return { ok: false, failures, worst, message };
}
