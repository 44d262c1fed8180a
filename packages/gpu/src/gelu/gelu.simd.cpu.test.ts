import { describe, expect, it } from 'vitest';
import { compareArrays } from '../compare.ts';
import { randomFloats } from '../random.ts';
import { WasmArena } from '../simd/arena.cpu.ts';
import { geluBackward, geluForward } from './gelu.cpu.ts';
import { SimdGelu } from './gelu.simd.cpu.ts';

// Tails of 0…3 past a multiple of 4, and the sizes of gelu.test.ts.
const SIZES = [1, 3, 4, 7, 255, 256, 257, 4099, 65_537];
// Saturation (|x| large, where e^−2a over- or underflows) and near 0, as in gelu.test.ts.
const EXTREMES = [200, -200, 50, -50, 20, -20, 15, -15, 9.5, -9.5, 5, -5, 3, -3, 1e-4, -1e-4, 0, -1e-30];

describe('SimdGelu (WebAssembly SIMD)', () => {
  for (const inPlace of [false, true]) {
    it(`matches the float64 reference within the GPU kernels' tolerance (${inPlace ? 'in its memory' : 'copied'})`, () => {
      for (const [index, n] of SIZES.entries()) {
        const arena = WasmArena.create({ floats: 6 * n + 64 }) as WasmArena;
        const gelu = SimdGelu.create(arena) as SimdGelu;
        const take = (values: Float32Array) => {
          if (!inPlace) return values.slice();
          const view = arena.allocate(values.length);
          view.set(values);
          return view;
        };
        const x = randomFloats(n, 10 + index, -6, 6);
        x.set(EXTREMES.slice(0, n));
        const dout = randomFloats(n, 20 + index, -2, 2);
        const dinp = randomFloats(n, 30 + index, -2, 2); // non-zero: the backward adds into it
        const got = { out: take(randomFloats(n, 40 + index)), dinp: take(dinp) };
        gelu.forward(got.out, take(x), n);
        gelu.backward(got.dinp, take(x), take(dout), n);
        const want = { out: new Float64Array(n), dinp: Float64Array.from(dinp) };
        geluForward(want.out, Float64Array.from(x), n);
        geluBackward(want.dinp, Float64Array.from(x), Float64Array.from(dout), n);
        for (const name of ['out', 'dinp'] as const) {
          const result = compareArrays(got[name], want[name], { atol: 1e-6, rtol: 1e-5 });
          expect(result.ok, `${name}, n=${n}: ${result.message}`).toBe(true);
        }
      }
    });
  }
});
