import { describe, expect, it } from 'vitest';
import { compareArrays } from '../compare.ts';
import { mulberry32, randomFloats } from '../random.ts';
import { WasmArena } from '../simd/arena.cpu.ts';
import { crossEntropyBackward, crossEntropyForward } from './crossentropy.cpu.ts';
import { SimdCrossEntropy } from './crossentropy.simd.cpu.ts';

// [N, V]: one row; V = 16 (one unrolled iteration) up to the model's 256; logits up to ±40 so
// the max shift matters.
const shapes: [number, number][] = [
  [1, 16],
  [3, 32],
  [17, 48],
  [64, 256],
];

describe('SimdCrossEntropy (WebAssembly SIMD)', () => {
  for (const inPlace of [false, true]) {
    it(`matches the float64 reference within the GPU kernels' tolerance (${inPlace ? 'in its memory' : 'copied'})`, () => {
      for (const [index, [N, V]] of shapes.entries()) {
        const arena = WasmArena.create({ floats: 2 * N * V + 64, scratchFloats: SimdCrossEntropy.scratchFloats(N, V) });
        const crossEntropy = SimdCrossEntropy.create(arena as WasmArena) as SimdCrossEntropy;
        const values = randomFloats(N * V, 10 + index, -40, 40);
        const next = mulberry32(20 + index);
        const targets = Int32Array.from({ length: N }, () => Math.floor(next() * V));
        const logits = inPlace ? (arena as WasmArena).allocate(N * V) : new Float32Array(N * V);
        logits.set(values);
        const losses = new Float32Array(N);
        const wantLosses = new Float64Array(N);
        const wantMean = crossEntropyForward(wantLosses, Float64Array.from(values), targets, N, V);
        const mean = crossEntropy.forward(losses, logits, targets, N, V);
        expect(Math.abs(mean - wantMean)).toBeLessThan(1e-5 + 1e-5 * wantMean);
        const lossCheck = compareArrays(losses, wantLosses, { atol: 1e-5, rtol: 1e-5 });
        expect(lossCheck.ok, `losses N=${N} V=${V}: ${lossCheck.message}`).toBe(true);

        // In place, as the model runs it: dlogits overwrite the logits.
        const wantGrads = Float64Array.from(values);
        crossEntropyBackward(wantGrads, wantGrads, targets, N, V);
        crossEntropy.backward(logits, logits, targets, N, V);
        const gradCheck = compareArrays(logits, wantGrads, { atol: 1e-6 / N, rtol: 1e-4 });
        expect(gradCheck.ok, `dlogits N=${N} V=${V}: ${gradCheck.message}`).toBe(true);
      }
    });
  }

  it('takes rows of a multiple of 16 only', () => {
    expect(SimdCrossEntropy.supports(256)).toBe(true);
    expect(SimdCrossEntropy.supports(11)).toBe(false);
    expect(SimdCrossEntropy.supports(36)).toBe(false);
  });
});
