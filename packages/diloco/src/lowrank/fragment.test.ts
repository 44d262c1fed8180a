import { describe, expect, it } from 'vitest';
import { createCodec } from '../codecs/index.ts';
import type { FragmentTensor } from '../fragments.ts';
import {
  FragmentProjection,
  LowRankFeedback,
  lowRankPayloadSize,
  lowRankPlan,
  lowRankSeed,
  momentumBasis,
} from './fragment.ts';
import { randomMatrix, withSpectrum } from './test-matrices.ts';

/** A fragment of a 1-D tensor, a 48×16 and a 16×40 matrix, and a 4×4 (too small to factor). */
function tensors(): FragmentTensor[] {
  const shapes: [string, number, number][] = [
    ['bias', 16, 1],
    ['a', 48, 16],
    ['b', 16, 40],
    ['c', 4, 4],
  ];
  let offset = 0;
  return shapes.map(([name, rows, cols]) => {
    const t = { name, offset, size: rows * cols, rows, cols };
    offset += t.size;
    return t;
  });
}
const SIZE = tensors().reduce((n, t) => n + t.size, 0);

function gram(basis: Float32Array, rows: number, rank: number): number[][] {
  return Array.from({ length: rank }, (_, a) =>
    Array.from({ length: rank }, (_, b) => {
      let sum = 0;
      for (let i = 0; i < rows; i++) sum += (basis[a * rows + i] as number) * (basis[b * rows + i] as number);
      return sum;
    }),
  );
}

function expectIdentity(matrix: number[][]): void {
  for (const [a, row] of matrix.entries())
    for (const [b, v] of row.entries()) expect(v).toBeCloseTo(a === b ? 1 : 0, 5);
}

function addInto(into: Float32Array, values: Float32Array, scale = 1): void {
  for (let i = 0; i < values.length; i++) into[i] = (into[i] as number) + scale * (values[i] as number);
}

describe('lowRankPlan', () => {
  it('factors the 2-D tensors that gain, keeps the rest dense, and packs them in order', () => {
    for (const side of ['right', 'left'] as const) {
      const plan = lowRankPlan(tensors(), { rank: 4, side });
      expect(plan.map((e) => e.rank)).toEqual([0, 4, 4, 0]);
      expect(plan.map((e) => e.payloadSize)).toEqual(
        side === 'right' ? [16, 48 * 4, 16 * 4, 16] : [16, 16 * 4, 40 * 4, 16],
      );
      let at = 0;
      for (const e of plan) {
        expect(e.payloadOffset).toBe(at);
        at += e.payloadSize;
      }
      expect(lowRankPayloadSize(tensors(), { rank: 4, side })).toBe(at);
    }
  });
  it('caps the rank at the smaller dimension and goes dense where a factor would not halve it', () => {
    const plan = lowRankPlan(tensors(), { rank: 16, side: 'right' });
    // 48×16 sends 48·16 on the right: no gain; 16×40 sends 16·16
    expect(plan.map((e) => e.rank)).toEqual([0, 0, 16, 0]);
    expect(() => lowRankPlan(tensors(), { rank: 0, side: 'right' })).toThrow(RangeError);
    expect(() => lowRankPlan(tensors(), { rank: 65, side: 'left' })).toThrow(RangeError);
  });
});

describe('momentumBasis', () => {
  it('is orthonormal, deterministic, and spans the momentum of a low-rank M', () => {
    for (const side of ['right', 'left'] as const) {
      const m = withSpectrum(48, 16, [5, 3, 1], 7);
      const basis = momentumBasis(m, 48, 16, 4, side, 11);
      expect(momentumBasis(m, 48, 16, 4, side, 11)).toEqual(basis);
      const rows = side === 'right' ? 16 : 48;
      expectIdentity(gram(basis, rows, 4));
      // M projected on the basis and back is M (rank 3 ≤ 4): the range finder found its space
      const projection = new FragmentProjection(
        [{ name: 'm', offset: 0, size: 48 * 16, rows: 48, cols: 16 }],
        m,
        { rank: 4, side },
        11,
      );
      const back = projection.decode(projection.encode(m));
      for (let i = 0; i < m.length; i++) expect(back[i]).toBeCloseTo(m[i] as number, 4);
      // the strongest column first: the rank-1 error is near the truncated SVD's (columns are
      // ordered by energy, not rotated onto singular vectors)
      const errors = projection.rungErrors(m, projection.encode(m));
      const best = Math.sqrt((9 + 1) / (25 + 9 + 1));
      expect(errors[0]).toBeGreaterThanOrEqual(best - 1e-6);
      expect(errors[0]).toBeLessThan(1.25 * best);
      expect(errors[2]).toBeLessThan(1e-3);
    }
  });
  it('is the seeded random basis while the momentum is zero', () => {
    const a = momentumBasis(new Float32Array(48 * 16), 48, 16, 2, 'right', 3);
    const b = momentumBasis(new Float32Array(48 * 16), 48, 16, 2, 'right', 4);
    expect(a).not.toEqual(b);
    expectIdentity(gram(a, 16, 2));
  });
});

describe('FragmentProjection', () => {
  const momentum = randomMatrix(SIZE, 5);
  it('averaging payloads averages what they decode to (owners aggregate factors as values)', () => {
    for (const side of ['right', 'left'] as const) {
      const projection = new FragmentProjection(tensors(), momentum, { rank: 2, side }, lowRankSeed(1, 3));
      const deltas = [1, 2, 3].map((s) => randomMatrix(SIZE, s));
      const mean = new Float32Array(projection.payloadSize);
      for (const d of deltas) addInto(mean, projection.encode(d), 1 / 3);
      const meanDelta = new Float32Array(SIZE);
      for (const d of deltas) addInto(meanDelta, d, 1 / 3);
      const direct = projection.decode(projection.encode(meanDelta));
      const averaged = projection.decode(mean);
      for (let i = 0; i < SIZE; i++) expect(averaged[i]).toBeCloseTo(direct[i] as number, 5);
    }
  });
  it('carries dense tensors exactly and decodes bitwise alike on every replica', () => {
    const a = new FragmentProjection(tensors(), momentum, { rank: 4, side: 'left' }, lowRankSeed(0, 1));
    const b = new FragmentProjection(tensors(), momentum.slice(), { rank: 4, side: 'left' }, lowRankSeed(0, 1));
    const delta = randomMatrix(SIZE, 9);
    const payload = a.encode(delta);
    expect(b.encode(delta)).toEqual(payload);
    const decoded = a.decode(payload);
    expect(b.decode(payload)).toEqual(decoded);
    for (const t of [tensors()[0], tensors()[3]] as FragmentTensor[]) {
      expect(decoded.subarray(t.offset, t.offset + t.size)).toEqual(delta.subarray(t.offset, t.offset + t.size));
    }
  });
  it('refuses a payload or momentum of the wrong size', () => {
    const projection = new FragmentProjection(tensors(), momentum, { rank: 1, side: 'right' }, 1);
    expect(() => projection.decode(new Float32Array(projection.payloadSize + 1))).toThrow(RangeError);
    expect(() => projection.encode(new Float32Array(SIZE - 1))).toThrow(RangeError);
    expect(() => new FragmentProjection(tensors(), new Float32Array(3), { rank: 1, side: 'right' }, 1)).toThrow(
      RangeError,
    );
  });
});

describe('LowRankFeedback', () => {
  const momentum = randomMatrix(SIZE, 5);
  it('keeps what was not sent: over rounds the sent sum tracks ΣΔ, and abort drops the staged residual', () => {
    const codec = createCodec('fp4', { blockSize: 64 });
    const roundTrip = (p: Float32Array) => codec.decode(codec.encode(p), p.length);
    const feedback = new LowRankFeedback(SIZE);
    const sum = new Float32Array(SIZE);
    const sent = new Float32Array(SIZE);
    let m = new Float32Array(SIZE);
    for (let round = 1; round <= 40; round++) {
      const side = round % 2 === 1 ? 'right' : 'left';
      const projection = new FragmentProjection(tensors(), m, { rank: 2, side }, lowRankSeed(0, round));
      const delta = randomMatrix(SIZE, 100 + round).map((v, i) => v * 0.1 + Math.sin(i) * 0.5);
      const { payload, errors } = feedback.encode(delta, projection, roundTrip);
      expect(errors).toHaveLength(2);
      expect(errors[1] as number).toBeLessThanOrEqual(errors[0] as number);
      const applied = projection.decode(roundTrip(payload));
      feedback.commit();
      addInto(sum, delta);
      addInto(sent, applied);
      m = m.map((v, i) => 0.9 * v + (applied[i] as number));
    }
    // ΣΔ − Σ sent is the residual
    const residual = feedback.residual;
    for (let i = 0; i < SIZE; i++)
      expect((sum[i] as number) - (sent[i] as number)).toBeCloseTo(residual[i] as number, 3);
    // bounded: the rank-2 exchange keeps up with a structured Δ
    let r2 = 0;
    let s2 = 0;
    for (let i = 0; i < SIZE; i++) {
      r2 += (residual[i] as number) ** 2;
      s2 += (sum[i] as number) ** 2;
    }
    expect(Math.sqrt(r2 / s2)).toBeLessThan(0.2);
    const before = feedback.residual;
    feedback.encode(randomMatrix(SIZE, 1), new FragmentProjection(tensors(), m, { rank: 2, side: 'right' }, 1));
    expect(feedback.pending).toBe(true);
    feedback.discard();
    expect(feedback.residual).toEqual(before);
  });
  it('scales a payload into the limit and keeps the rest in the residual', () => {
    const projection = new FragmentProjection(tensors(), momentum, { rank: 2, side: 'right' }, 2);
    const feedback = new LowRankFeedback(SIZE);
    const { payload } = feedback.encode(randomMatrix(SIZE, 3), projection, undefined, 0.01);
    expect(Math.max(...payload.map(Math.abs))).toBeLessThanOrEqual(0.01 + 1e-9);
  });
});

describe('LowRankFeedback without keeping', () => {
  it('sends the same payload and keeps no residual', () => {
    const momentum = randomMatrix(SIZE, 5);
    const projection = new FragmentProjection(tensors(), momentum, { rank: 2, side: 'left' }, 2);
    const delta = randomMatrix(SIZE, 3);
    const kept = new LowRankFeedback(SIZE);
    const none = new LowRankFeedback(SIZE, false);
    expect(none.encode(delta, projection).payload).toEqual(kept.encode(delta, projection).payload);
    expect(none.pending).toBe(false);
    none.commit();
    expect(none.residual).toEqual(new Float32Array(SIZE));
    expect(none.flush(delta)).toEqual(delta);
  });
});
