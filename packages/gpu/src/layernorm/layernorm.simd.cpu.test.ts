import { describe, expect, it } from 'vitest';
import { compareArrays } from '../compare.ts';
import { randomFloats } from '../random.ts';
import { WasmArena } from '../simd/arena.cpu.ts';
import { layernormBackward, layernormForward } from './layernorm.cpu.ts';
import { SimdLayernorm } from './layernorm.simd.cpu.ts';

// [N, C], C a multiple of 4: one vector, the model's 64 and 128, GPT-2's 768; a tall one.
const SHAPES: [number, number][] = [
  [1, 4],
  [3, 12],
  [7, 64],
  [33, 128],
  [64, 768],
  [1000, 48],
];

describe('SimdLayernorm (WebAssembly SIMD)', () => {
  for (const inPlace of [false, true]) {
    it(`matches the float64 reference within the GPU kernels' tolerance (${inPlace ? 'in its memory' : 'copied'})`, () => {
      for (const [index, [N, C]] of SHAPES.entries()) {
        const seed = 100 * index;
        // Activations with a per-row offset (so the mean matters), parameters near 1 and 0, as layernorm.test.ts.
        const inp = randomFloats(N * C, seed, -2, 2);
        for (let row = 0; row < N; row++)
          for (let i = 0; i < C; i++) inp[row * C + i] = (inp[row * C + i] as number) + ((row % 7) - 3);
        const data = {
          inp,
          weight: randomFloats(C, seed + 1, 0.5, 1.5),
          bias: randomFloats(C, seed + 2, -0.5, 0.5),
          dout: randomFloats(N * C, seed + 3, -1, 1),
          dinp: randomFloats(N * C, seed + 4, -1, 1), // non-zero: the backward adds
          dweight: randomFloats(C, seed + 5, -1, 1),
          dbias: randomFloats(C, seed + 6, -1, 1),
        };
        const arena = WasmArena.create({
          floats: 4 * N * C + 4 * C + 2 * N + 64,
          scratchFloats: SimdLayernorm.scratchFloats(N, C),
        }) as WasmArena;
        const layernorm = SimdLayernorm.create(arena) as SimdLayernorm;
        const take = (values: Float32Array) => {
          if (!inPlace) return values.slice();
          const view = arena.allocate(values.length);
          view.set(values);
          return view;
        };
        const got = {
          out: take(randomFloats(N * C, 1)),
          mean: take(randomFloats(N, 2)),
          rstd: take(randomFloats(N, 3)),
          dinp: take(data.dinp),
          dweight: data.dweight.slice(), // parameters' gradients: never in the arena in the model
          dbias: data.dbias.slice(),
        };
        const [inpIn, doutIn] = [take(data.inp), take(data.dout)];
        layernorm.forward(got.out, got.mean, got.rstd, inpIn, data.weight, data.bias, N, C);
        layernorm.backward(got.dinp, got.dweight, got.dbias, doutIn, inpIn, data.weight, got.mean, got.rstd, N, C);

        const f64 = (x: Float32Array) => Float64Array.from(x);
        const want = {
          out: new Float64Array(N * C),
          mean: new Float64Array(N),
          rstd: new Float64Array(N),
          dinp: f64(data.dinp),
          dweight: f64(data.dweight),
          dbias: f64(data.dbias),
        };
        const [inp64, weight64] = [f64(data.inp), f64(data.weight)];
        layernormForward(want.out, want.mean, want.rstd, inp64, weight64, f64(data.bias), N, C);
        layernormBackward(
          want.dinp,
          want.dweight,
          want.dbias,
          f64(data.dout),
          inp64,
          weight64,
          want.mean,
          want.rstd,
          N,
          C,
        );
        // layernorm.test.ts's tolerances: f32 row sums; parameter gradients sum N rows (error ∝ √N).
        const perRow = { atol: 5e-6, rtol: 5e-6 };
        const perChannel = { atol: 2e-6 * Math.sqrt(N), rtol: 3e-6 };
        for (const [name, expected] of Object.entries(want)) {
          const tolerance = name === 'dweight' || name === 'dbias' ? perChannel : perRow;
          const result = compareArrays(got[name as keyof typeof got], expected, tolerance);
          expect(result.ok, `${name}, N=${N} C=${C}: ${result.message}`).toBe(true);
        }
      }
    });
  }

  it('takes rows of a multiple of 4 channels only', () => {
    expect(SimdLayernorm.supports(64)).toBe(true);
    expect(SimdLayernorm.supports(6)).toBe(false);
  });
});
