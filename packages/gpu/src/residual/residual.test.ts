import { describe, expect, it } from 'vitest';
import { compareArrays } from '../compare.ts';
import { runKernels } from '../kernel.ts';
import { randomFloats } from '../random.ts';
import { useGpu } from '../test-gpu.ts';
import { dot, f64, numericGradient } from '../vector/gradcheck.ts';
import { TestArena } from '../vector/test-arena.ts';
import { residualAccumulate, residualBackward, residualForward } from './residual.cpu.ts';
import { ResidualKernels } from './residual.ts';

const gpu = useGpu();

// n = B·T·C; around the workgroup (256) and past it, most not multiples of it.
const SIZES = [1, 7, 255, 256, 257, 4099, 65_537];

describe('ResidualKernels', () => {
  for (const workgroupSize of [64, 256]) {
    it(`forward and backward match the float64 CPU reference (workgroup ${workgroupSize})`, async () => {
      const { device } = gpu();
      const kernels = await ResidualKernels.create(device, { workgroupSize });
      for (const [index, n] of SIZES.entries()) {
        const data = {
          a: randomFloats(n, 10 + index, -2, 2),
          b: randomFloats(n, 20 + index, -2, 2),
          dout: randomFloats(n, 30 + index, -2, 2),
          // Gradients start non-zero: the backward must add into them.
          da: randomFloats(n, 40 + index, -2, 2),
          db: randomFloats(n, 50 + index, -2, 2),
        };
        const arena = TestArena.create(device, 'residual', { ...data, out: n });
        const v = (name: string) => arena.view(name);
        await runKernels(device, [
          kernels.forward(v('out'), v('a'), v('b'), n),
          kernels.backward(v('da'), v('db'), v('dout'), n),
        ]);
        const want = { out: new Float64Array(n), da: f64(data.da), db: f64(data.db) };
        residualForward(want.out, f64(data.a), f64(data.b), n);
        residualBackward(want.da, want.db, f64(data.dout), n);
        for (const [name, expected] of Object.entries(want)) {
          const result = compareArrays(await arena.read(name), expected, { atol: 1e-6, rtol: 1e-6 });
          expect(result.ok, `${name}, n=${n}: ${result.message}`).toBe(true);
        }
        expect(await arena.guardsIntact(), `n=${n}: a kernel wrote outside its view`).toBe(true);
        arena.destroy();
      }
    });
  }

  it('accumulates src into dst', async () => {
    const { device } = gpu();
    const kernels = await ResidualKernels.create(device);
    const n = 1000;
    const dst = randomFloats(n, 1);
    const src = randomFloats(n, 2);
    const arena = TestArena.create(device, 'residual.accumulate', { dst, src });
    // Twice: dst += 2·src.
    const add = kernels.accumulate(arena.view('dst'), arena.view('src'), n);
    await runKernels(device, [add, add]);
    const want = f64(dst);
    residualAccumulate(want, f64(src), n);
    residualAccumulate(want, f64(src), n);
    const result = compareArrays(await arena.read('dst'), want, { atol: 1e-6, rtol: 1e-6 });
    expect(result.ok, result.message).toBe(true);
    arena.destroy();
  });
});

describe('residual CPU reference', () => {
  it('backward matches finite differences of forward (float64)', () => {
    const n = 9;
    const a = f64(randomFloats(n, 1));
    const b = f64(randomFloats(n, 2));
    const g = f64(randomFloats(n, 3));
    const out = new Float64Array(n);
    const loss = () => {
      residualForward(out, a, b, n);
      return dot(out, g);
    };
    const da = new Float64Array(n);
    const db = new Float64Array(n);
    residualBackward(da, db, g, n);
    for (const [name, analytic, x] of [['da', da, a] as const, ['db', db, b] as const]) {
      const result = compareArrays(analytic, numericGradient(loss, x), { atol: 1e-8, rtol: 1e-7 });
      expect(result.ok, `${name}: ${result.message}`).toBe(true);
    }
  });
});
