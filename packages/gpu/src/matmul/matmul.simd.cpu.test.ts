import { describe, expect, it } from 'vitest';
import { compareArrays } from '../compare.ts';
import { randomFloats } from '../random.ts';
import { WasmArena } from '../simd/arena.cpu.ts';
import '../simd/relaxed.node.ts';
import { relaxedSimd } from '../simd/wasm.cpu.ts';
import { matmulBackwardNaive, matmulForwardNaive } from './matmul.cpu.ts';
import { SimdMatmul } from './matmul.simd.cpu.ts';

// Around the 4×8 register tile: rows mod 4 = 0…3, columns mod 8 = 0 or 4 (in place) and
// columns that are no multiple of 4 (copied and padded), plus the model's nano shapes.
const shapes: [number, number, number][] = [
  [1, 1, 1],
  [3, 5, 2],
  [4, 4, 4],
  [7, 3, 5],
  [9, 16, 13],
  [6, 12, 20],
  [33, 36, 44],
  [64, 100, 257],
  [128, 64, 192],
  [64, 256, 64],
];
// f32 rounds once per store in the naive loops (f64 sums) and per multiply-add here.
const tolerance = { atol: 1e-5, rtol: 1e-5 };

/** A copy of `values` in the engine's memory (used in place) or in an ordinary array (copied). */
function operand(arena: WasmArena, values: Float32Array, inPlace: boolean): Float32Array {
  if (!inPlace) return values.slice();
  const view = arena.allocate(values.length);
  view.set(values);
  return view;
}

describe('SimdMatmul (WebAssembly SIMD)', () => {
  it('is available in this Node, relaxed SIMD included (Node 20 once the flag is set, 22+ by default)', () => {
    expect(SimdMatmul.available).toBe(true);
    expect(relaxedSimd()).toBe(true);
  });

  for (const [inPlace, relaxed] of [false, true].flatMap((p) => [false, true].map((r) => [p, r] as const))) {
    const where = `${inPlace ? 'operands in its memory' : 'operands copied'}, ${relaxed ? 'relaxed multiply-adds' : 'multiply then add'}`;
    const create = (arena: WasmArena) => {
      const engine = SimdMatmul.create(arena, { relaxed }) as SimdMatmul;
      expect(engine.relaxed).toBe(relaxed);
      return engine;
    };

    it(`forward equals the naive triple loop (${where})`, () => {
      for (const [index, [N, C, OC]] of shapes.entries()) {
        const inp = randomFloats(N * C, 10 + index);
        const weight = randomFloats(OC * C, 20 + index);
        for (const bias of [null, randomFloats(OC, 30 + index)]) {
          const arena = WasmArena.create({
            floats: 2 * N * (C + OC) + 64,
            scratchFloats: SimdMatmul.scratchFloats(N, C, OC),
          }) as WasmArena;
          const engine = create(arena);
          const want = new Float32Array(N * OC);
          matmulForwardNaive(want, inp, weight, bias, N, C, OC);
          const got = operand(arena, randomFloats(N * OC, 40 + index), inPlace); // overwritten, not added to
          engine.forward(got, operand(arena, inp, inPlace), weight, bias, N, C, OC);
          const result = compareArrays(got, want, tolerance);
          expect(result.ok, `N=${N} C=${C} OC=${OC} bias=${bias !== null}: ${result.message}`).toBe(true);
        }
      }
    });

    it(`backward equals the naive loops and adds into the gradients (${where})`, () => {
      for (const [index, [N, C, OC]] of shapes.entries()) {
        const inp = randomFloats(N * C, 50 + index);
        const weight = randomFloats(OC * C, 60 + index);
        const dout = randomFloats(N * OC, 70 + index);
        for (const withBias of [false, true]) {
          const arena = WasmArena.create({
            floats: 2 * (N * C + OC * C + N * OC + OC) + 64,
            scratchFloats: SimdMatmul.scratchFloats(N, C, OC),
          }) as WasmArena;
          const engine = create(arena);
          // Gradients start non-zero: both versions must add to them.
          const start = [randomFloats(N * C, 80 + index), randomFloats(OC * C, 90 + index), randomFloats(OC, 99)];
          const [wantDinp, wantDw, wantDb] = start.map((values) => values.slice()) as [
            Float32Array,
            Float32Array,
            Float32Array,
          ];
          const [gotDinp, gotDw, gotDb] = start.map((values) => operand(arena, values, inPlace)) as [
            Float32Array,
            Float32Array,
            Float32Array,
          ];
          matmulBackwardNaive(wantDinp, wantDw, withBias ? wantDb : null, dout, inp, weight, N, C, OC);
          engine.backward(
            gotDinp,
            gotDw,
            withBias ? gotDb : null,
            operand(arena, dout, inPlace),
            operand(arena, inp, inPlace),
            operand(arena, weight, inPlace),
            N,
            C,
            OC,
          );
          for (const [name, g, w] of [
            ['dinp', gotDinp, wantDinp],
            ['dweight', gotDw, wantDw],
            ['dbias', gotDb, wantDb],
          ] as const) {
            const result = compareArrays(g, w, tolerance);
            expect(result.ok, `${name} N=${N} C=${C} OC=${OC} bias=${withBias}: ${result.message}`).toBe(true);
          }
          if (!withBias) expect(Array.from(gotDb)).toEqual(Array.from(start[2] as Float32Array));
        }
      }
    });
  }

  it('grows its scratch for copied operands, and refuses to once it has handed out views', () => {
    const engine = SimdMatmul.create(WasmArena.create() as WasmArena) as SimdMatmul;
    const [N, C, OC] = [300, 64, 256]; // ≈0.5 MB of scratch: more than the first page
    const out = new Float32Array(N * OC);
    engine.forward(out, randomFloats(N * C, 1), randomFloats(OC * C, 2), null, N, C, OC);
    const want = new Float32Array(N * OC);
    matmulForwardNaive(want, randomFloats(N * C, 1), randomFloats(OC * C, 2), null, N, C, OC);
    expect(compareArrays(out, want, tolerance).ok).toBe(true);

    const arena = WasmArena.create({ floats: 16 }) as WasmArena;
    arena.allocate(16);
    const small = SimdMatmul.create(arena) as SimdMatmul;
    expect(() => small.forward(out, randomFloats(N * C, 1), randomFloats(OC * C, 2), null, N, C, OC)).toThrow(
      /reserve them at create/,
    );
  });
});
