import { describe, expect, it } from 'vitest';
import { compareArrays } from '../compare.ts';
import { runKernels } from '../kernel.ts';
import { randomFloats } from '../random.ts';
import { useGpu } from '../test-gpu.ts';
import { dot, f64, numericGradient } from '../vector/gradcheck.ts';
import { TestArena } from '../vector/test-arena.ts';
import { geluBackward, geluForward } from './gelu.cpu.ts';
import { GeluKernels } from './gelu.ts';

const gpu = useGpu();

// n = B·T·4C; around the workgroup (256) and past it, most not multiples of it.
const SIZES = [1, 7, 255, 256, 257, 4099, 65_537];
// Where tanh saturates (|a| > 9 for |x| > ~4.5) or would overflow a naive exp (|x| ≥ ~9), and near 0.
const EXTREMES = [50, -50, 20, -20, 15, -15, 9.5, -9.5, 5, -5, 3, -3, 1e-4, -1e-4, 0, -1e-30];

/** Inputs in [−6, 6) with the extremes written over the first entries. */
function inputs(n: number, seed: number): Float32Array {
  const x = randomFloats(n, seed, -6, 6);
  x.set(EXTREMES.slice(0, n));
  return x;
}

describe('GeluKernels', () => {
  for (const workgroupSize of [64, 256]) {
    it(`forward and backward match the float64 CPU reference (workgroup ${workgroupSize})`, async () => {
      const { device } = gpu();
      const kernels = await GeluKernels.create(device, { workgroupSize });
      for (const [index, n] of SIZES.entries()) {
        const data = {
          inp: inputs(n, 10 + index),
          dout: randomFloats(n, 20 + index, -2, 2),
          dinp: randomFloats(n, 30 + index, -2, 2), // non-zero: the backward must add into it
        };
        const arena = TestArena.create(device, 'gelu', { ...data, out: n });
        const v = (name: string) => arena.view(name);
        await runKernels(device, [
          kernels.forward(v('out'), v('inp'), n),
          kernels.backward(v('dinp'), v('inp'), v('dout'), n),
        ]);
        const want = { out: new Float64Array(n), dinp: f64(data.dinp) };
        geluForward(want.out, f64(data.inp), n);
        geluBackward(want.dinp, f64(data.inp), f64(data.dout), n);
        for (const [name, expected] of Object.entries(want)) {
          const result = compareArrays(await arena.read(name), expected, { atol: 1e-6, rtol: 1e-5 });
          expect(result.ok, `${name}, n=${n}: ${result.message}`).toBe(true);
        }
        expect(await arena.guardsIntact(), `n=${n}: a kernel wrote outside its view`).toBe(true);
        arena.destroy();
      }
    });
  }

  it('is finite and saturates correctly at |x| = 50', async () => {
    const { device } = gpu();
    const kernels = await GeluKernels.create(device);
    const n = EXTREMES.length;
    const arena = TestArena.create(device, 'gelu.extremes', {
      inp: Float32Array.from(EXTREMES),
      dout: new Float32Array(n).fill(1),
      out: n,
      dinp: n,
    });
    const v = (name: string) => arena.view(name);
    await runKernels(device, [
      kernels.forward(v('out'), v('inp'), n),
      kernels.backward(v('dinp'), v('inp'), v('dout'), n),
    ]);
    const out = await arena.read('out');
    const grad = await arena.read('dinp');
    expect([...out, ...grad].every(Number.isFinite)).toBe(true);
    expect([out[0], out[1], grad[0], grad[1]]).toEqual([50, expect.closeTo(0, 20), 1, expect.closeTo(0, 20)]);
    arena.destroy();
  });
});

describe('GELU CPU reference', () => {
  it('backward matches finite differences of forward (float64)', () => {
    const x = f64([...EXTREMES, ...randomFloats(20, 1, -6, 6)]);
    const n = x.length;
    const g = f64(randomFloats(n, 2));
    const out = new Float64Array(n);
    const loss = () => {
      geluForward(out, x, n);
      return dot(out, g);
    };
    const dinp = new Float64Array(n);
    geluBackward(dinp, x, g, n);
    const result = compareArrays(dinp, numericGradient(loss, x), { atol: 1e-8, rtol: 1e-6 });
    expect(result.ok, result.message).toBe(true);
  });

  it('adds into dinp', () => {
    const x = Float64Array.of(-1, 0.5, 2);
    const g = Float64Array.of(1, 1, 1);
    const once = new Float64Array(3);
    geluBackward(once, x, g, 3);
    const twice = Float64Array.of(1, 2, 3);
    geluBackward(twice, x, g, 3);
    expect([...twice]).toEqual([1 + (once[0] as number), 2 + (once[1] as number), 3 + (once[2] as number)]);
  });
});
