import { describe, expect, it } from 'vitest';
import { firstDifference } from '../test-values.ts';
import { seededOrthonormal } from './orthonormal.ts';
import { type LowRankSide, LowRankState, project, reconstruct } from './project.ts';
import {
  expectClose,
  frobenius,
  orthonormalityError,
  RANKS,
  randomMatrix,
  SIZES,
  withSpectrum,
} from './test-matrices.ts';

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

describe('LowRankState', () => {
  for (const n of SIZES) {
    for (const k of SIZES) {
      for (const r of RANKS) {
        it(`${n}×${k}: an exactly rank-${r} Δ is recovered after one right and one left round`, () => {
          const sigma = Array.from({ length: r }, (_, c) => 1 / (c + 1));
          const delta = withSpectrum(n, k, sigma, n + 2 * k + r);
          const state = new LowRankState({ n, k, rank: r, seed: 9, errorFeedback: false });
          expect(state.side).toBe('right');
          state.adopt(state.factorFor(delta));
          expect(state.side).toBe('left');
          expect(orthonormalityError(state.basis, n, r)).toBeLessThan(1e-5);
          const { reconstruction, nextBasis } = state.adopt(state.factorFor(delta));
          expect(state.side).toBe('right');
          expect(orthonormalityError(nextBasis, k, r)).toBeLessThan(1e-5);
          expectClose(reconstruction, delta, 1e-4);
        });
      }
    }
  }

  it('replicas that adopt the same averaged factor hold bitwise the same basis', () => {
    const [n, k, r] = [33, 64, 4];
    const workers = [0, 1, 2].map(() => new LowRankState({ n, k, rank: r, seed: 5 }));
    for (let round = 0; round < 4; round++) {
      const averaged = mean(workers.map((w, m) => w.factorFor(randomMatrix(n * k, 10 * round + m))));
      const results = workers.map((w) => w.adopt(averaged));
      for (const result of results.slice(1)) {
        expect(firstDifference(result.reconstruction, results[0]?.reconstruction ?? [])).toBe(-1);
        expect(firstDifference(result.nextBasis, results[0]?.nextBasis ?? [])).toBe(-1);
      }
    }
  });

  for (const [n, k, r] of [
    [33, 64, 1],
    [64, 33, 4],
  ] as const) {
    it(`${n}×${k}, rank ${r}: with error feedback the reconstructions sum to the Δs' sum, the residual stays bounded`, () => {
      const workers = [0, 1, 2].map(() => new LowRankState({ n, k, rank: r, seed: 3 }));
      // Full-rank Δs: a shared decaying spectrum plus each worker's noise, new every round.
      const sigma = Array.from({ length: Math.min(n, k) }, (_, c) => 0.8 ** c);
      const shared = withSpectrum(n, k, sigma, 1);
      const sumDelta = new Float64Array(n * k);
      const sumSent = new Float64Array(n * k);
      const scale = frobenius(shared);
      const worstGap = [0, 0]; // over the first and the second half of the rounds
      const rounds = 200;
      for (let round = 0; round < rounds; round++) {
        const deltas = workers.map((_, m) => {
          const noise = randomMatrix(n * k, 1000 * round + m);
          return shared.map((x, i) => x + 0.3 * (noise[i] as number) * (scale / Math.sqrt(n * k)));
        });
        const averaged = mean(workers.map((w, m) => w.factorFor(deltas[m] as Float32Array)));
        const results = workers.map((w) => w.adopt(averaged));
        const meanDelta = mean(deltas);
        for (let i = 0; i < n * k; i++) {
          sumDelta[i] = (sumDelta[i] as number) + (meanDelta[i] as number);
          sumSent[i] = (sumSent[i] as number) + (results[0]?.reconstruction[i] as number);
        }
        const gap = frobenius(sumDelta.map((x, i) => x - (sumSent[i] as number)));
        // What was not sent is exactly the workers' mean residual (f32 rounding aside).
        const meanResidual = mean(workers.map((w) => w.residual));
        expect(Math.abs(gap - frobenius(meanResidual))).toBeLessThan(1e-3 * scale);
        const half = round < rounds / 2 ? 0 : 1;
        worstGap[half] = Math.max(worstGap[half] as number, gap);
      }
      // Bounded: it plateaus (about 14‖Δ‖ at rank 1, 3‖Δ‖ at rank 4 here), while Σ Δ grows like rounds·‖Δ‖.
      expect(worstGap[1]).toBeLessThan(1.5 * (worstGap[0] as number));
      expect(worstGap[1]).toBeLessThan(20 * scale);
      const relative = frobenius(sumDelta.map((x, i) => x - (sumSent[i] as number))) / frobenius(sumDelta);
      expect(relative).toBeLessThan(0.1);
    });
  }

  it('discard keeps the residual and the basis of the round before; setRank keeps the basis orthonormal', () => {
    const [n, k] = [8, 33];
    const state = new LowRankState({ n, k, rank: 1, seed: 2 });
    state.adopt(state.factorFor(randomMatrix(n * k, 1)));
    const residual = state.residual;
    const basis = state.basis;
    state.factorFor(randomMatrix(n * k, 2));
    state.discard();
    expect(firstDifference(state.residual, residual)).toBe(-1);
    expect(firstDifference(state.basis, basis)).toBe(-1);
    state.setRank(4);
    expect(state.rank).toBe(4);
    expect(orthonormalityError(state.basis, n, 4)).toBeLessThan(1e-5);
    expect(firstDifference(state.basis.subarray(0, n), basis)).toBe(-1); // the old column stays first
    state.setRank(2);
    expect(orthonormalityError(state.basis, n, 2)).toBeLessThan(1e-5);
    expect(() => state.setRank(9)).toThrow(RangeError);
    expect(() => new LowRankState({ n, k, rank: 0, seed: 0 })).toThrow(RangeError);
  });
});
