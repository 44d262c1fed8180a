import { describe, expect, it } from 'vitest';
import { firstDifference } from '../test-values.ts';
import { seededOrthonormal } from './orthonormal.ts';
import { type LowRankSide, project, reconstruct } from './project.ts';
import { expectClose, RANKS, randomMatrix, SIZES } from './test-matrices.ts';

const SIDES: LowRankSide[] = ['right', 'left'];

function mean(arrays: Float32Array[]): Float32Array {
  const out = new Float32Array(arrays[0]?.length ?? 0);
  for (let i = 0; i < out.length; i++) {
    let sum = 0;
    for (const a of arrays) sum += a[i] as number;
    out[i] = sum / arrays.length;
  }
  return out;
}

describe('project and reconstruct', () => {
  it('match the naive products Δ·Q, Δᵀ·P and A·Bᵀ', () => {
    const [n, k, r] = [5, 3, 2];
    const delta = randomMatrix(n * k, 1);
    const q = randomMatrix(k * r, 2);
    const p = randomMatrix(n * r, 3);
    const right = project(delta, n, k, q, 'right');
    const left = project(delta, n, k, p, 'left');
    for (let c = 0; c < r; c++) {
      for (let i = 0; i < n; i++) {
        let sum = 0;
        for (let j = 0; j < k; j++) sum += (delta[i * k + j] as number) * (q[c * k + j] as number);
        expect(right[c * n + i]).toBeCloseTo(sum, 6);
      }
      for (let j = 0; j < k; j++) {
        let sum = 0;
        for (let i = 0; i < n; i++) sum += (delta[i * k + j] as number) * (p[c * n + i] as number);
        expect(left[c * k + j]).toBeCloseTo(sum, 6);
      }
    }
    const back = reconstruct(right, q, 'right', n, k);
    for (let i = 0; i < n; i++) {
      for (let j = 0; j < k; j++) {
        let sum = 0;
        for (let c = 0; c < r; c++) sum += (right[c * n + i] as number) * (q[c * k + j] as number);
        expect(back[i * k + j]).toBeCloseTo(sum, 6);
      }
    }
  });

  for (const n of SIZES) {
    for (const k of SIZES) {
      for (const r of RANKS) {
        for (const side of SIDES) {
          it(`${n}×${k}, rank ${r}, ${side}: the mean of the workers' factors reconstructs to the projection of the mean Δ`, () => {
            const basis = seededOrthonormal(side === 'right' ? k : n, r, n * k + r);
            const deltas = [1, 2, 3].map((w) => randomMatrix(n * k, 100 * w + n + k));
            const averaged = mean(deltas.map((d) => project(d, n, k, basis, side)));
            const ofMean = project(mean(deltas), n, k, basis, side);
            expectClose(reconstruct(averaged, basis, side, n, k), reconstruct(ofMean, basis, side, n, k), 1e-5);
          });
        }
      }
    }
  }

  it('rejects shapes that do not fit', () => {
    const basis = seededOrthonormal(4, 2, 1);
    expect(() => project(new Float32Array(12), 3, 4, basis.subarray(0, 7), 'right')).toThrow(RangeError);
    expect(() => project(new Float32Array(11), 3, 4, basis, 'right')).toThrow(RangeError);
    expect(() => reconstruct(new Float32Array(5), basis, 'right', 3, 4)).toThrow(RangeError);
  });
});

/** The products one term at a time, each output one f64 sum in ascending order: what every replica must get. */
function referenceProject(delta: Float32Array, n: number, k: number, basis: Float32Array, side: LowRankSide) {
  const r = basis.length / (side === 'right' ? k : n);
  const out = new Float32Array((side === 'right' ? n : k) * r);
  for (let c = 0; c < r; c++) {
    if (side === 'right') {
      for (let i = 0; i < n; i++) {
        let sum = 0;
        for (let j = 0; j < k; j++) sum += (delta[i * k + j] as number) * (basis[c * k + j] as number);
        out[c * n + i] = sum;
      }
    } else {
      for (let j = 0; j < k; j++) {
        let sum = 0;
        for (let i = 0; i < n; i++) sum += (delta[i * k + j] as number) * (basis[c * n + i] as number);
        out[c * k + j] = sum;
      }
    }
  }
  return out;
}

function referenceReconstruct(left: Float32Array, right: Float32Array, n: number, k: number) {
  const r = left.length / n;
  const out = new Float32Array(n * k);
  for (let i = 0; i < n; i++) {
    for (let j = 0; j < k; j++) {
      let sum = 0;
      for (let c = 0; c < r; c++) sum += (left[c * n + i] as number) * (right[c * k + j] as number);
      out[i * k + j] = sum;
    }
  }
  return out;
}

describe('the blocked products', () => {
  it('are bitwise the one-term-at-a-time sums, for ranks and widths off the block of 4', () => {
    for (const [n, k] of [
      [7, 5],
      [33, 64],
      [64, 9],
    ] as const) {
      for (const r of [1, 3, 4, 6]) {
        if (r > Math.min(n, k)) continue;
        const delta = randomMatrix(n * k, n + k + r);
        const q = seededOrthonormal(k, r, 2);
        const p = seededOrthonormal(n, r, 3);
        const right = project(delta, n, k, q, 'right');
        const left = project(delta, n, k, p, 'left');
        expect(firstDifference(right, referenceProject(delta, n, k, q, 'right'))).toBe(-1);
        expect(firstDifference(left, referenceProject(delta, n, k, p, 'left'))).toBe(-1);
        expect(firstDifference(reconstruct(right, q, 'right', n, k), referenceReconstruct(right, q, n, k))).toBe(-1);
        expect(firstDifference(reconstruct(left, p, 'left', n, k), referenceReconstruct(p, left, n, k))).toBe(-1);
      }
    }
  });
});
