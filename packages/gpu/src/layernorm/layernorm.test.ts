import { describe, expect, it } from 'vitest';
import { compareArrays } from '../compare.ts';
import { runKernels } from '../kernel.ts';
import { randomFloats } from '../random.ts';
import { useGpu } from '../test-gpu.ts';
import { dot, f64, numericGradient } from '../vector/gradcheck.ts';
import { TestArena } from '../vector/test-arena.ts';
import { layernormBackward, layernormForward } from './layernorm.cpu.ts';
import { LayernormKernels } from './layernorm.ts';

const gpu = useGpu();

// [N rows, C channels]: C around and past the row workgroup (64 / 256 lanes) and GPT-2's 768;
// N past one row block (128) and one partial workgroup's columns (64); a tall one near 16K rows.
const SHAPES: [number, number][] = [
  [1, 1],
  [1, 3],
  [2, 64],
  [3, 255],
  [7, 256],
  [5, 257],
  [300, 100],
  [64, 768],
  [33, 1024],
  [1000, 48],
];

/** Activations with a per-row offset (so the mean matters), parameters near 1 and 0. */
function layernormInputs(N: number, C: number, seed: number) {
  const inp = randomFloats(N * C, seed, -2, 2);
  for (let row = 0; row < N; row++) {
    for (let i = 0; i < C; i++) inp[row * C + i] = (inp[row * C + i] as number) + ((row % 7) - 3);
  }
  return {
    inp,
    weight: randomFloats(C, seed + 1, 0.5, 1.5),
    bias: randomFloats(C, seed + 2, -0.5, 0.5),
    dout: randomFloats(N * C, seed + 3, -1, 1),
    // Gradients start non-zero: the backward must add into them.
    dinp: randomFloats(N * C, seed + 4, -1, 1),
    dweight: randomFloats(C, seed + 5, -1, 1),
    dbias: randomFloats(C, seed + 6, -1, 1),
  };
}

function bindAll(kernels: LayernormKernels, arena: TestArena, N: number, C: number) {
  const v = (name: string) => arena.view(name);
  return [
    kernels.forward(v('out'), v('mean'), v('rstd'), v('inp'), v('weight'), v('bias'), N, C),
    kernels.backward(v('dinp'), v('dweight'), v('dbias'), v('dout'), v('inp'), v('weight'), v('mean'), v('rstd'), N, C),
  ];
}

describe('LayernormKernels', () => {
  // GPU default (32 lanes per row × 8 rows), software default (a row per lane), an odd layout;
  // then the adapter's default over a tall shape (16K rows: 129 row blocks of parameter partials).
  const layouts: [number, number, [number, number][]][] = [
    [32, 8, SHAPES],
    [1, 64, SHAPES],
    [3, 5, SHAPES],
    [0, 0, [[16_385, 16]]],
  ];
  for (const [lanesPerRow, rowsPerGroup, shapes] of layouts) {
    const layout = lanesPerRow ? `${lanesPerRow} lanes × ${rowsPerGroup} rows` : 'default layout, tall';
    it(`forward and backward match the float64 CPU reference (${layout})`, async () => {
      const { device } = gpu();
      const options = lanesPerRow ? { lanesPerRow, rowsPerGroup } : {};
      const kernels = await LayernormKernels.create(device, options);
      for (const [index, [N, C]] of shapes.entries()) {
        const data = layernormInputs(N, C, 100 * index);
        const arena = TestArena.create(device, 'layernorm', { ...data, out: N * C, mean: N, rstd: N });
        const bound = bindAll(kernels, arena, N, C);
        await runKernels(device, bound);
        for (const kernel of bound) kernel.destroy();

        const want = {
          out: new Float64Array(N * C),
          mean: new Float64Array(N),
          rstd: new Float64Array(N),
          dinp: f64(data.dinp),
          dweight: f64(data.dweight),
          dbias: f64(data.dbias),
        };
        const [inp, weight] = [f64(data.inp), f64(data.weight)];
        layernormForward(want.out, want.mean, want.rstd, inp, weight, f64(data.bias), N, C);
        layernormBackward(want.dinp, want.dweight, want.dbias, f64(data.dout), inp, weight, want.mean, want.rstd, N, C);
        // f32 sums of C terms per row: over 32-lane partials the worst seen is ≈ 0.2 of this; with
        // 1 lane per row (C serial adds, the software layout) ≈ 0.4. The parameter gradients also
        // sum N rows of O(1) terms, so their absolute error grows like √N.
        const perRow = { atol: 5e-6, rtol: 5e-6 };
        const perChannel = { atol: 2e-6 * Math.sqrt(N), rtol: 3e-6 };
        const tolerances: Record<string, { atol: number; rtol: number }> = {
          out: perRow,
          mean: perRow,
          rstd: perRow,
          dinp: perRow,
          dweight: perChannel,
          dbias: perChannel,
        };
        for (const [name, expected] of Object.entries(want)) {
          const result = compareArrays(await arena.read(name), expected, tolerances[name]);
          expect(result.ok, `${name}, N=${N} C=${C}: ${result.message}`).toBe(true);
        }
        expect(await arena.guardsIntact(), `N=${N} C=${C}: a kernel wrote outside its view`).toBe(true);
        arena.destroy();
      }
    });
  }

  it('gives bit-identical gradients from run to run', async () => {
    const { device } = gpu();
    const kernels = await LayernormKernels.create(device);
    const [N, C] = [2000, 96];
    const data = layernormInputs(N, C, 7);
    const arena = TestArena.create(device, 'layernorm.determinism', { ...data, out: N * C, mean: N, rstd: N });
    const bound = bindAll(kernels, arena, N, C);
    const runs: Float32Array[][] = [];
    for (let run = 0; run < 2; run++) {
      for (const name of ['dinp', 'dweight', 'dbias'] as const) arena.write(name, data[name]);
      await runKernels(device, bound);
      runs.push(await Promise.all(['dinp', 'dweight', 'dbias'].map((name) => arena.read(name))));
    }
    for (let i = 0; i < 3; i++) {
      const [first, second] = [runs[0]?.[i] as Float32Array, runs[1]?.[i] as Float32Array];
      expect(Buffer.from(second.buffer).equals(Buffer.from(first.buffer))).toBe(true);
    }
    for (const kernel of bound) kernel.destroy();
    arena.destroy();
  });

  it('rejects a workgroup over 256 invocations', async () => {
    await expect(LayernormKernels.create(gpu().device, { lanesPerRow: 64, rowsPerGroup: 8 })).rejects.toThrow(/256/);
  });
});

describe('layernorm CPU reference', () => {
  it('backward matches finite differences of forward (float64)', () => {
    const [N, C] = [3, 7];
    const data = layernormInputs(N, C, 1);
    const [inp, weight, bias, g] = [f64(data.inp), f64(data.weight), f64(data.bias), f64(data.dout)];
    const [out, mean, rstd] = [new Float64Array(N * C), new Float64Array(N), new Float64Array(N)];
    const loss = () => {
      layernormForward(out, mean, rstd, inp, weight, bias, N, C);
      return dot(out, g);
    };
    loss();
    const [dinp, dweight, dbias] = [new Float64Array(N * C), new Float64Array(C), new Float64Array(C)];
    layernormBackward(dinp, dweight, dbias, g, inp, weight, mean, rstd, N, C);
    for (const [name, analytic, x] of [
      ['dinp', dinp, inp],
      ['dweight', dweight, weight],
      ['dbias', dbias, bias],
    ] as const) {
      const result = compareArrays(analytic, numericGradient(loss, x), { atol: 1e-8, rtol: 1e-6 });
      expect(result.ok, `${name}: ${result.message}`).toBe(true);
    }
  });

  it('writes mean and rstd with eps 1e-5 and the biased variance', () => {
    const [out, mean, rstd] = [new Float64Array(2), new Float64Array(1), new Float64Array(1)];
    layernormForward(out, mean, rstd, Float64Array.of(1, 3), Float64Array.of(1, 1), Float64Array.of(0, 0), 1, 2);
    expect(mean[0]).toBe(2);
    expect(rstd[0]).toBeCloseTo(1 / Math.sqrt(1 + 1e-5), 12);
  });
});
