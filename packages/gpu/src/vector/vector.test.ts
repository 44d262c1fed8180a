import { describe, expect, it } from 'vitest';
import { compareArrays } from '../compare.ts';
import { runKernels, workgroupGrid } from '../kernel.ts';
import { randomFloats } from '../random.ts';
import { useGpu } from '../test-gpu.ts';
import { f64 } from './gradcheck.ts';
import { TestArena } from './test-arena.ts';
import { vectorCopy, vectorDifference, vectorFill, vectorLerp, vectorScale } from './vector.cpu.ts';
import { VectorKernels } from './vector.ts';

const gpu = useGpu();

// Around the workgroup (256) and well past it; none but 256 a multiple of the tile.
const SIZES = [1, 7, 255, 256, 257, 1000, 65_537];

describe('VectorKernels', () => {
  for (const workgroupSize of [64, 256]) {
    it(`matches the float64 CPU reference over a grid of sizes (workgroup ${workgroupSize})`, async () => {
      const { device } = gpu();
      const kernels = await VectorKernels.create(device, { workgroupSize });
      for (const [index, n] of SIZES.entries()) {
        const a = randomFloats(n, 10 + index, -3, 3);
        const b = randomFloats(n, 20 + index, -3, 3);
        const x = randomFloats(n, 30 + index, -3, 3);
        const arena = TestArena.create(device, 'vector', { a, b, x, out: n, dst: randomFloats(n, 40 + index), f: n });
        const v = (name: string) => arena.view(name);
        await runKernels(device, [
          kernels.difference(v('out'), v('a'), v('b'), n),
          kernels.copy(v('dst'), v('b'), n),
          kernels.scale(v('x'), -0.375, n),
          kernels.fill(v('f'), 2.5, n),
          // Runs after difference read `a` (dispatches in one pass are ordered).
          kernels.lerp(v('a'), v('b'), 0.9, n),
        ]);
        const want = {
          out: new Float64Array(n),
          dst: new Float64Array(n),
          x: f64(x),
          f: new Float64Array(n),
          a: f64(a),
        };
        vectorDifference(want.out, f64(a), f64(b), n);
        vectorCopy(want.dst, f64(b), n);
        vectorScale(want.x, -0.375, n);
        vectorFill(want.f, 2.5, n);
        vectorLerp(want.a, f64(b), 0.9, n);
        for (const [name, expected] of Object.entries(want)) {
          const result = compareArrays(await arena.read(name), expected, { atol: 1e-6, rtol: 1e-6 });
          expect(result.ok, `${name}, n=${n}: ${result.message}`).toBe(true);
        }
        expect(await arena.guardsIntact(), `n=${n}: a kernel wrote outside its view`).toBe(true);
        arena.destroy();
      }
    });
  }

  it('covers n past 65535 workgroups with a 2D grid', async () => {
    const { device } = gpu();
    const kernels = await VectorKernels.create(device);
    const n = 65_535 * 256 + 1001; // 16.8M floats: one workgroup row is not enough
    expect(workgroupGrid(device, Math.ceil(n / 256))[1]).toBe(2);
    const arena = TestArena.create(device, 'vector.large', { x: n });
    await runKernels(device, [kernels.fill(arena.view('x'), 3, n), kernels.scale(arena.view('x'), 0.5, n)]);
    const x = await arena.read('x');
    let wrong = 0;
    for (let i = 0; i < n; i++) if (x[i] !== 1.5) wrong++;
    expect(wrong).toBe(0);
    expect(await arena.guardsIntact()).toBe(true);
    arena.destroy();
  });

  it('binds nothing for n = 0 and rejects views too small for n', async () => {
    const { device } = gpu();
    const kernels = await VectorKernels.create(device);
    const arena = TestArena.create(device, 'vector.small', { x: 10, y: 10 });
    await runKernels(device, [kernels.copy(arena.view('x'), arena.view('y'), 0)]);
    expect(() => kernels.copy(arena.view('x'), arena.view('y'), 11)).toThrow(/needs 11/);
    expect(() => kernels.scale(arena.view('x'), 2, 1.5)).toThrow(/not a size/);
    arena.destroy();
  });
});

describe('workgroupGrid', () => {
  it('stays within the per-dimension limit', () => {
    const device = { limits: { maxComputeWorkgroupsPerDimension: 65_535 } } as GPUDevice;
    expect(workgroupGrid(device, 1)).toEqual([1, 1]);
    expect(workgroupGrid(device, 65_535)).toEqual([65_535, 1]);
    expect(workgroupGrid(device, 65_536)).toEqual([65_535, 2]);
    expect(workgroupGrid(device, 200_000)).toEqual([65_535, 4]);
  });
});

describe('vector CPU reference', () => {
  it('lerps to the endpoints and converts between f32 and f64 in copy', () => {
    const a = Float32Array.of(1, 2, 3);
    vectorLerp(a, Float32Array.of(5, 6, 7), 1, 3);
    expect([...a]).toEqual([1, 2, 3]);
    vectorLerp(a, Float32Array.of(5, 6, 7), 0, 3);
    expect([...a]).toEqual([5, 6, 7]);
    const dst = new Float64Array(4);
    vectorCopy(dst, Float32Array.of(0.1, 0.2, 0.3, 0.4), 3);
    expect(dst[3]).toBe(0);
    expect(dst[0]).toBe(Math.fround(0.1));
  });
});
