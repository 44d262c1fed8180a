import { describe, expect, it } from 'vitest';
import { compareArrays } from '../compare.ts';
import { randomFloats } from '../random.ts';
import { matmulBackward, matmulBackwardNaive, matmulForward, matmulForwardNaive } from './matmul.cpu.ts';

// Shapes around the 4-row and 4-column unrolling of the fast loops (remainders 0…3).
const shapes: [number, number, number][] = [
  [1, 1, 1],
  [3, 5, 2],
  [4, 4, 4],
  [7, 3, 5],
  [9, 16, 13],
  [64, 100, 257],
];

describe('matmul CPU reference', () => {
  for (const Float of [Float64Array, Float32Array]) {
    // f64 agrees to rounding; f32 rounds once per store, in a different order in the fast loops.
    const tolerance = Float === Float64Array ? { atol: 1e-12, rtol: 1e-12 } : { atol: 1e-5, rtol: 1e-5 };

    it(`fast forward equals the naive triple loop (${Float.name})`, () => {
      for (const [index, [N, C, OC]] of shapes.entries()) {
        const inp = Float.from(randomFloats(N * C, 10 + index));
        const weight = Float.from(randomFloats(OC * C, 20 + index));
        for (const bias of [null, Float.from(randomFloats(OC, 30 + index))]) {
          const want = new Float(N * OC);
          const got = Float.from(randomFloats(N * OC, 40 + index)); // overwritten, not added to
          matmulForwardNaive(want, inp, weight, bias, N, C, OC);
          matmulForward(got, inp, weight, bias, N, C, OC);
          const result = compareArrays(got, want, tolerance);
          expect(result.ok, `N=${N} C=${C} OC=${OC} bias=${bias !== null}: ${result.message}`).toBe(true);
        }
      }
    });

    it(`fast backward equals the naive loops and adds into the gradients (${Float.name})`, () => {
      for (const [index, [N, C, OC]] of shapes.entries()) {
        const inp = Float.from(randomFloats(N * C, 50 + index));
        const weight = Float.from(randomFloats(OC * C, 60 + index));
        const dout = Float.from(randomFloats(N * OC, 70 + index));
        for (const withBias of [false, true]) {
          // Gradients start non-zero: both versions must add to them.
          const start = [randomFloats(N * C, 80 + index), randomFloats(OC * C, 90 + index), randomFloats(OC, 99)];
          const want = start.map((values) => Float.from(values));
          const got = start.map((values) => Float.from(values));
          const [wantDinp, wantDw, wantDb] = want as [typeof inp, typeof inp, typeof inp];
          const [gotDinp, gotDw, gotDb] = got as [typeof inp, typeof inp, typeof inp];
          matmulBackwardNaive(wantDinp, wantDw, withBias ? wantDb : null, dout, inp, weight, N, C, OC);
          matmulBackward(gotDinp, gotDw, withBias ? gotDb : null, dout, inp, weight, N, C, OC);
          for (const [name, g, w] of [
            ['dinp', gotDinp, wantDinp],
            ['dweight', gotDw, wantDw],
            ['dbias', gotDb, wantDb],
          ] as const) {
            const result = compareArrays(g, w, tolerance);
            expect(result.ok, `${name} N=${N} C=${C} OC=${OC} bias=${withBias}: ${result.message}`).toBe(true);
          }
          if (!withBias) expect(Array.from(gotDb)).toEqual(Array.from(Float.from(start[2] as Float32Array)));
        }
      }
    });
  }

  it('matches a hand-computed example', () => {
    // inp [2,3], W [2,3] ([out, in]), bias [2].
    const inp = new Float64Array([1, 2, 3, 4, 5, 6]);
    const weight = new Float64Array([1, 0, -1, 0.5, 0.5, 0.5]);
    const out = new Float64Array(4);
    matmulForward(out, inp, weight, new Float64Array([10, 20]), 2, 3, 2);
    expect(Array.from(out)).toEqual([8, 23, 8, 27.5]);
    const dinp = new Float64Array(6);
    const dweight = new Float64Array(6);
    const dbias = new Float64Array([1, 1]);
    matmulBackward(dinp, dweight, dbias, new Float64Array([1, 2, 3, 4]), inp, weight, 2, 3, 2);
    expect(Array.from(dinp)).toEqual([2, 1, 0, 5, 2, -1]);
    expect(Array.from(dweight)).toEqual([13, 17, 21, 18, 24, 30]);
    expect(Array.from(dbias)).toEqual([5, 7]);
  });
});
