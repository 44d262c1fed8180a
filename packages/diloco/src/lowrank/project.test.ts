import { describe, expect, it } from 'vitest';
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
