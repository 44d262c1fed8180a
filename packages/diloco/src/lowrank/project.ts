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
 * Δᵀ·P (k×r) on the left side with basis P (n×r). Column-major. Four basis columns per pass over
 * Δ; each output is still one f64 sum in ascending order (bitwise the reference's).
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
  return side === 'right' ? projectRight(delta, n, k, basis, r) : projectLeft(delta, n, k, basis, r);
}

/** Δ·Q: out[c·n + i] = Σ_j Δ[i, j]·Q[j, c], j ascending. */
function projectRight(delta: Float32Array, n: number, k: number, basis: Float32Array, r: number): Float32Array {
  const out = new Float32Array(n * r);
  const r4 = r - (r % 4);
  for (let i = 0; i < n; i++) {
    const row = i * k;
    for (let c = 0; c < r4; c += 4) {
      const b0 = c * k;
      const b1 = b0 + k;
      const b2 = b1 + k;
      const b3 = b2 + k;
      let s0 = 0;
      let s1 = 0;
      let s2 = 0;
      let s3 = 0;
      for (let j = 0; j < k; j++) {
        const d = delta[row + j] as number;
        s0 += d * (basis[b0 + j] as number);
        s1 += d * (basis[b1 + j] as number);
        s2 += d * (basis[b2 + j] as number);
        s3 += d * (basis[b3 + j] as number);
      }
      out[c * n + i] = s0;
      out[(c + 1) * n + i] = s1;
      out[(c + 2) * n + i] = s2;
      out[(c + 3) * n + i] = s3;
    }
    for (let c = r4; c < r; c++) {
      const col = c * k;
      let sum = 0;
      for (let j = 0; j < k; j++) sum += (delta[row + j] as number) * (basis[col + j] as number);
      out[c * n + i] = sum;
    }
  }
  return out;
}

/** Δᵀ·P: out[c·k + j] = Σ_i Δ[i, j]·P[i, c], i ascending. */
function projectLeft(delta: Float32Array, n: number, k: number, basis: Float32Array, r: number): Float32Array {
  const out = new Float32Array(k * r);
  const acc = new Float64Array(4 * k);
  for (let c0 = 0; c0 < r; c0 += 4) {
    const w = Math.min(4, r - c0);
    acc.fill(0);
    for (let i = 0; i < n; i++) {
      const row = i * k;
      const p0 = basis[c0 * n + i] as number;
      const p1 = w > 1 ? (basis[(c0 + 1) * n + i] as number) : 0;
      const p2 = w > 2 ? (basis[(c0 + 2) * n + i] as number) : 0;
      const p3 = w > 3 ? (basis[(c0 + 3) * n + i] as number) : 0;
      for (let j = 0; j < k; j++) {
        const d = delta[row + j] as number;
        acc[j] = (acc[j] as number) + d * p0;
        acc[k + j] = (acc[k + j] as number) + d * p1;
        acc[2 * k + j] = (acc[2 * k + j] as number) + d * p2;
        acc[3 * k + j] = (acc[3 * k + j] as number) + d * p3;
      }
    }
    for (let q = 0; q < w; q++) out.set(acc.subarray(q * k, (q + 1) * k), (c0 + q) * k);
  }
  return out;
}

/**
 * Δ̂ (n×k, row-major) from a factor and the basis it was taken against: P̄·Qᵀ on the right side
 * (factor n×r, basis k×r), P̂·Q̄ᵀ on the left side (basis n×r, factor k×r). Each value is one f64
 * sum over c ascending, rounded to f32 once; four outputs at a time, the rank innermost.
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
  const left = side === 'right' ? factor : basis; // n×r, column-major
  const right = side === 'right' ? basis : factor; // k×r, column-major
  // transposed, so the rank is the contiguous (innermost) index
  const lt = new Float64Array(n * r);
  for (let c = 0; c < r; c++) for (let i = 0; i < n; i++) lt[i * r + c] = left[c * n + i] as number;
  const rt = new Float64Array(k * r);
  for (let c = 0; c < r; c++) for (let j = 0; j < k; j++) rt[j * r + c] = right[c * k + j] as number;
  const out = new Float32Array(n * k);
  const k4 = k - (k % 4);
  for (let i = 0; i < n; i++) {
    const li = i * r;
    const oi = i * k;
    for (let j = 0; j < k4; j += 4) {
      const r0 = j * r;
      const r1 = r0 + r;
      const r2 = r1 + r;
      const r3 = r2 + r;
      let s0 = 0;
      let s1 = 0;
      let s2 = 0;
      let s3 = 0;
      for (let c = 0; c < r; c++) {
        const a = lt[li + c] as number;
        s0 += a * (rt[r0 + c] as number);
        s1 += a * (rt[r1 + c] as number);
        s2 += a * (rt[r2 + c] as number);
        s3 += a * (rt[r3 + c] as number);
      }
      out[oi + j] = s0;
      out[oi + j + 1] = s1;
      out[oi + j + 2] = s2;
      out[oi + j + 3] = s3;
    }
    for (let j = k4; j < k; j++) {
      let sum = 0;
      for (let c = 0; c < r; c++) sum += (lt[li + c] as number) * (rt[j * r + c] as number);
      out[oi + j] = sum;
    }
  }
  return out;
}
