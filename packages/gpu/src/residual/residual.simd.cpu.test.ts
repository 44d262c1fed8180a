import { describe, expect, it } from 'vitest';
import { compareArrays } from '../compare.ts';
import { randomFloats } from '../random.ts';
import { WasmArena } from '../simd/arena.cpu.ts';
import { residualBackward, residualForward } from './residual.cpu.ts';
import { SimdResidual } from './residual.simd.cpu.ts';

// Tails of 0…3 past a multiple of 4, and a nano activation (B·T·C = 65,536).
const SIZES = [1, 3, 4, 7, 257, 65_536];

describe('SimdResidual (WebAssembly SIMD)', () => {
  for (const inPlace of [false, true]) {
    it(`matches the float64 reference (${inPlace ? 'in its memory' : 'copied'})`, () => {
      for (const [index, n] of SIZES.entries()) {
        const arena = WasmArena.create({ floats: 6 * n + 64, scratchFloats: 6 * n + 64 }) as WasmArena;
        const residual = SimdResidual.create(arena) as SimdResidual;
        const take = (values: Float32Array) => {
          if (!inPlace) return values.slice();
          const view = arena.allocate(values.length);
          view.set(values);
          return view;
        };
        const data = {
          a: randomFloats(n, 10 + index),
          b: randomFloats(n, 20 + index),
          dout: randomFloats(n, 30 + index),
          da: randomFloats(n, 40 + index), // non-zero: the backward adds
          db: randomFloats(n, 50 + index),
        };
        const got = { out: take(randomFloats(n, 1)), da: take(data.da), db: take(data.db) };
        residual.forward(got.out, take(data.a), take(data.b), n);
        residual.backward(got.da, got.db, take(data.dout), n);
        const want = { out: new Float64Array(n), da: Float64Array.from(data.da), db: Float64Array.from(data.db) };
        residualForward(want.out, Float64Array.from(data.a), Float64Array.from(data.b), n);
        residualBackward(want.da, want.db, Float64Array.from(data.dout), n);
        for (const name of ['out', 'da', 'db'] as const) {
          const result = compareArrays(got[name], want[name], { atol: 1e-6, rtol: 1e-6 }); // residual.test.ts's
          expect(result.ok, `${name}, n=${n}: ${result.message}`).toBe(true);
        }
      }
    });
  }
});
