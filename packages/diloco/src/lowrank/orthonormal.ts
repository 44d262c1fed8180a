/**
 * Shared bases for the low-rank codec: orthonormal columns that every replica computes bitwise
 * equal from the same input (docs/lowrank.md).
 *
 * Matrices here (bases and factors) are column-major: column c of a rows×cols matrix is
 * m[c·rows … (c+1)·rows). Columns are what Gram–Schmidt walks, and a factor's columns differ in
 * magnitude by the singular values, so the wire's block scales follow columns.
 *
 * Determinism: one fixed order of operations, every sum accumulated in f64 (IEEE, and Math.sqrt
 * is correctly rounded, so the same on every engine), rounded to f32 once at the end. A column
 * that collapses (nothing left after removing the earlier ones) is replaced by a seeded random
 * column, re-orthogonalised, so the result is always a full orthonormal basis.
 */
import { mulberry32 } from '@shoal/gpu/random';

/** Below this fraction of its own norm, a column counts as already in the earlier columns' span. */
const COLLAPSE_RATIO = 1e-5;
const MAX_FALLBACK_ATTEMPTS = 8;

/** A 32-bit seed from a seed and two small integers (a murmur3-style mix). */
export function mixSeed(seed: number, a: number, b = 0): number {
  let h = Math.imul((seed ^ 0x9e3779b9) >>> 0, 0x85ebca6b);
  h ^= Math.imul(a + 1, 0xc2b2ae35);
  h = Math.imul(h ^ (h >>> 16), 0x27d4eb2f);
  h ^= Math.imul(b + 1, 0x165667b1);
  h = Math.imul(h ^ (h >>> 13), 0x85ebca6b);
  return (h ^ (h >>> 16)) >>> 0;
}

function checkShape(what: string, length: number, rows: number, cols: number): void {
  if (!Number.isSafeInteger(rows) || !Number.isSafeInteger(cols) || rows < 1 || cols < 1) {
    throw new RangeError(`${what}: rows and cols must be integers ≥ 1, got ${rows}×${cols}`);
  }
  if (cols > rows) throw new RangeError(`${what}: ${cols} orthonormal columns need ≥ ${cols} rows, got ${rows}`);
  if (length !== rows * cols)
    throw new RangeError(`${what}: ${rows}×${cols} needs ${rows * cols} values, got ${length}`);
}

/** Removes from v (rows values) its components along columns 0 … done−1 of q; twice, for accuracy. */
function removeEarlierColumns(q: Float64Array, rows: number, done: number, v: Float64Array): void {
  for (let pass = 0; pass < 2; pass++) {
    for (let c = 0; c < done; c++) {
      const base = c * rows;
      let dot = 0;
      for (let i = 0; i < rows; i++) dot += (q[base + i] as number) * (v[i] as number);
      for (let i = 0; i < rows; i++) v[i] = (v[i] as number) - dot * (q[base + i] as number);
    }
  }
}

function norm(v: Float64Array): number {
  let sum = 0;
  for (let i = 0; i < v.length; i++) sum += (v[i] as number) * (v[i] as number);
  return Math.sqrt(sum);
}

/**
 * The columns of m (rows×cols, column-major, cols ≤ rows) made orthonormal by modified
 * Gram–Schmidt, left to right; a collapsing column j is replaced by a random one seeded by
 * (seed, j). Returns a new array; m is not changed. Throws on a non-finite value.
 */
export function orthonormalize(m: Float32Array, rows: number, cols: number, seed: number): Float32Array {
  checkShape('orthonormalize', m.length, rows, cols);
  const q = new Float64Array(rows * cols);
  const v = new Float64Array(rows);
  for (let c = 0; c < cols; c++) {
    for (let i = 0; i < rows; i++) {
      const x = m[c * rows + i] as number;
      if (!Number.isFinite(x)) throw new RangeError(`orthonormalize: non-finite value ${x} at column ${c}, row ${i}`);
      v[i] = x;
    }
    let before = norm(v);
    removeEarlierColumns(q, rows, c, v);
    let after = norm(v);
    for (let attempt = 0; !(before > 0 && after > COLLAPSE_RATIO * before); attempt++) {
      if (attempt === MAX_FALLBACK_ATTEMPTS) throw new Error(`orthonormalize: column ${c} keeps collapsing`);
      const random = mulberry32(mixSeed(seed, c, attempt));
      for (let i = 0; i < rows; i++) v[i] = 2 * random() - 1;
      before = norm(v);
      removeEarlierColumns(q, rows, c, v);
      after = norm(v);
    }
    const inverse = 1 / after;
    for (let i = 0; i < rows; i++) q[c * rows + i] = (v[i] as number) * inverse;
  }
  return Float32Array.from(q);
}

/** A seeded random rows×cols matrix with orthonormal columns: the same on every replica. */
export function seededOrthonormal(rows: number, cols: number, seed: number): Float32Array {
  checkShape('seededOrthonormal', rows * cols, rows, cols);
  const random = mulberry32(seed);
  const m = new Float32Array(rows * cols);
  for (let i = 0; i < m.length; i++) m[i] = 2 * random() - 1;
  return orthonormalize(m, rows, cols, seed);
}
