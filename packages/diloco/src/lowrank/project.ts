/**
 * The low-rank products of one 2-D tensor Δ (n×k, row-major, as the parameters are stored)
 * against a shared basis (docs/lowrank.md):
 *
 *   right side: basis Q (k×r); a worker sends Δ·Q (n×r); Δ̂ = P̄·Qᵀ from the averaged P̄.
 *   left side:  basis P (n×r); a worker sends Δᵀ·P (k×r); Δ̂ = P·Q̄ᵀ from the averaged Q̄.
 *
 * Factors and bases are column-major (orthonormal.ts). Sums are accumulated in f64 in a fixed
 * order and rounded to f32 once, so reconstruction is the same on every replica.
 */

/** Which factor of Δ ≈ P·Qᵀ the workers send: 'right' sends P = Δ·Q, 'left' sends Q = Δᵀ·P. */
export type LowRankSide = 'right' | 'left';

/** Rows of the basis a side projects onto (the factor sent has the other dimension's rows). */
function basisRows(side: LowRankSide, n: number, k: number): number {
  return side === 'right' ? k : n;
}

function rankOf(what: string, length: number, rows: number): number {
  const r = length / rows;
  if (!Number.isInteger(r) || r < 1) throw new RangeError(`${what}: ${length} values are not ${rows}×r for an r ≥ 1`);
  return r;
}

function checkDelta(what: string, delta: Float32Array, n: number, k: number): void {
  if (!Number.isSafeInteger(n) || !Number.isSafeInteger(k) || n < 1 || k < 1 || delta.length !== n * k) {
    throw new RangeError(`${what}: Δ must be n×k = ${n}×${k} values, got ${delta.length}`);
  }
}

/**
 * The factor a worker sends for Δ (n×k): Δ·Q (n×r) on the right side with basis Q (k×r), or
 * Δᵀ·P (k×r) on the left side with basis P (n×r). Column-major.
 */
export function project(
  delta: Float32Array,
  n: number,
  k: number,
  basis: Float32Array,
  side: LowRankSide,
): Float32Array {
  checkDelta('project', delta, n, k);
  const r = rankOf('project basis', basis.length, basisRows(side, n, k));
  if (side === 'right') {
    const out = new Float32Array(n * r);
    for (let i = 0; i < n; i++) {
      const row = i * k;
      for (let c = 0; c < r; c++) {
        const col = c * k;
        let sum = 0;
        for (let j = 0; j < k; j++) sum += (delta[row + j] as number) * (basis[col + j] as number);
        out[c * n + i] = sum;
      }
    }
    return out;
  }
  const out = new Float32Array(k * r);
  const acc = new Float64Array(k);
  for (let c = 0; c < r; c++) {
    acc.fill(0);
    for (let i = 0; i < n; i++) {
      const p = basis[c * n + i] as number;
      const row = i * k;
      for (let j = 0; j < k; j++) acc[j] = (acc[j] as number) + (delta[row + j] as number) * p;
    }
    out.set(acc, c * k);
  }
  return out;
}

/**
 * Δ̂ (n×k, row-major) from a factor and the basis it was taken against: P̄·Qᵀ on the right side
 * (factor n×r, basis k×r), P̂·Q̄ᵀ on the left side (basis n×r, factor k×r).
 */
export function reconstruct(
  factor: Float32Array,
  basis: Float32Array,
  side: LowRankSide,
  n: number,
  k: number,
): Float32Array {
  const r = rankOf('reconstruct basis', basis.length, basisRows(side, n, k));
  if (factor.length !== (side === 'right' ? n : k) * r) {
    throw new RangeError(
      `reconstruct: a ${side} factor of rank ${r} has ${(side === 'right' ? n : k) * r} values, got ${factor.length}`,
    );
  }
  const left = side === 'right' ? factor : basis; // n×r
  const right = side === 'right' ? basis : factor; // k×r
  const acc = new Float64Array(n * k);
  for (let c = 0; c < r; c++) {
    for (let i = 0; i < n; i++) {
      const a = left[c * n + i] as number;
      const row = i * k;
      for (let j = 0; j < k; j++) acc[row + j] = (acc[row + j] as number) + a * (right[c * k + j] as number);
    }
  }
  return Float32Array.from(acc);
}
