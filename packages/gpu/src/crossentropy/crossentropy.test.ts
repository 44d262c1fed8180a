import { describe, expect, it } from 'vitest';
import { createEmptyStorageBuffer, createStorageBuffer, readFloat32 } from '../buffers.ts';
import { compareArrays } from '../compare.ts';
import { runKernels } from '../kernel.ts';
import { mulberry32, randomFloats } from '../random.ts';
import { useGpu } from '../test-gpu.ts';
import { crossEntropyBackward, crossEntropyForward } from './crossentropy.cpu.ts';
import { CrossEntropyKernels } from './crossentropy.ts';

const gpu = useGpu();

function randomProblem(N: number, V: number, seed: number) {
  // Spread logits (±4) and one row shifted by +500, which overflows exp without the row max.
  const logits = randomFloats(N * V, seed, -4, 4);
  for (let i = 0; i < V; i++) logits[i] = (logits[i] as number) + 500;
  const next = mulberry32(seed + 1);
  const targets = Int32Array.from({ length: N }, () => Math.floor(next() * V));
  return { logits, targets };
}

function reference(logits: Float32Array, targets: Int32Array, N: number, V: number) {
  const losses = new Float64Array(N);
  const mean = crossEntropyForward(losses, Float64Array.from(logits), targets, N, V);
  const dlogits = new Float64Array(N * V);
  crossEntropyBackward(dlogits, Float64Array.from(logits), targets, N, V);
  return { losses, mean, dlogits };
}

function expectOk(comparison: ReturnType<typeof compareArrays>, label: string) {
  expect(comparison.ok, `${label}: ${comparison.message}`).toBe(true);
}

describe('CrossEntropyKernels', () => {
  // Rows × vocabulary, with V below, at and above the workgroup and not multiples of it.
  const shapes: [number, number][] = [
    [1, 2],
    [3, 3],
    [7, 255],
    [16, 256],
    [5, 257],
    [33, 1000],
    [130, 256],
    [2, 5003],
  ];

  // Lanes per row × rows per workgroup: the default, one row per workgroup, and a narrow row.
  for (const [lanes, rows] of [
    [16, 16],
    [256, 1],
    [4, 5],
  ] as const) {
    it(`matches the float64 reference over a grid of shapes (${lanes} lanes × ${rows} rows)`, async () => {
      const { device } = gpu();
      const kernels = await CrossEntropyKernels.create(device, lanes, rows);
      for (const [index, [N, V]] of shapes.entries()) {
        const { logits, targets } = randomProblem(N, V, 100 + index);
        const want = reference(logits, targets, N, V);
        const logitsBuffer = createStorageBuffer(device, 'test.logits', logits);
        const targetsBuffer = createStorageBuffer(device, 'test.targets', targets);
        const losses = createEmptyStorageBuffer(device, 'test.losses', N * 4);
        const mean = createEmptyStorageBuffer(device, 'test.mean', 4);
        // dlogits starts non-zero: the kernel must overwrite, not accumulate.
        const dlogits = createStorageBuffer(device, 'test.dlogits', randomFloats(N * V, 7));
        const forward = kernels.forward(
          {
            logits: { buffer: logitsBuffer },
            targets: { buffer: targetsBuffer },
            losses: { buffer: losses },
            meanLoss: { buffer: mean },
          },
          N,
          V,
        );
        const backward = kernels.backward(
          { logits: { buffer: logitsBuffer }, targets: { buffer: targetsBuffer }, dlogits: { buffer: dlogits } },
          N,
          V,
        );
        const inPlace = kernels.backward(
          { logits: { buffer: logitsBuffer }, targets: { buffer: targetsBuffer } },
          N,
          V,
        );
        await runKernels(device, [forward, backward, inPlace], 'test.crossentropy');
        const label = `N=${N} V=${V}`;
        // Losses are O(log V): f32 log/exp rounding is a few 1e-7 relative to the max logit.
        expectOk(
          compareArrays(await readFloat32(device, losses, N), want.losses, { atol: 1e-5, rtol: 1e-5 }),
          `${label} losses`,
        );
        const [gotMean] = await readFloat32(device, mean, 1);
        expect(Math.abs((gotMean as number) - want.mean), `${label} mean`).toBeLessThanOrEqual(1e-5 * (1 + want.mean));
        // Gradients are ≤ 1/N: compare with atol relative to that scale.
        const gradTolerance = { atol: 1e-6 / N, rtol: 1e-4 };
        expectOk(
          compareArrays(await readFloat32(device, dlogits, N * V), want.dlogits, gradTolerance),
          `${label} dlogits`,
        );
        expectOk(
          compareArrays(await readFloat32(device, logitsBuffer, N * V), want.dlogits, gradTolerance),
          `${label} in place`,
        );
        for (const kernel of [forward, backward, inPlace]) kernel.destroy();
        for (const buffer of [logitsBuffer, targetsBuffer, losses, mean, dlogits]) buffer.destroy();
      }
    });
  }

  it('spills workgroups past the per-dimension limit into a second grid dimension', async () => {
    const { device } = gpu();
    // 8 rows per workgroup and at most 7 workgroups per dimension: 1001 rows take 126 = 7 × 18 groups.
    const kernels = await CrossEntropyKernels.create(device, 4, 8, 7);
    const [N, V] = [1_001, 3];
    const { logits, targets } = randomProblem(N, V, 3);
    const want = reference(logits, targets, N, V);
    const logitsBuffer = createStorageBuffer(device, 'test.logits', logits);
    const targetsBuffer = createStorageBuffer(device, 'test.targets', targets);
    const losses = createEmptyStorageBuffer(device, 'test.losses', N * 4);
    const mean = createEmptyStorageBuffer(device, 'test.mean', 4);
    const views = { logits: { buffer: logitsBuffer }, targets: { buffer: targetsBuffer } };
    const forward = kernels.forward({ ...views, losses: { buffer: losses }, meanLoss: { buffer: mean } }, N, V);
    const backward = kernels.backward(views, N, V);
    await runKernels(device, [forward]);
    const [first] = await readFloat32(device, mean, 1);
    // The mean is the same bits from run to run.
    await runKernels(device, [forward, backward]);
    expect((await readFloat32(device, mean, 1))[0]).toBe(first);
    expect(Math.abs((first as number) - want.mean)).toBeLessThan(1e-5);
    expectOk(compareArrays(await readFloat32(device, losses, N), want.losses, { atol: 1e-5, rtol: 1e-5 }), 'losses');
    expectOk(
      compareArrays(await readFloat32(device, logitsBuffer, N * V), want.dlogits, { atol: 1e-11, rtol: 1e-4 }),
      'dlogits',
    );
    for (const buffer of [logitsBuffer, targetsBuffer, losses, mean]) buffer.destroy();
  });

  it('rejects dlogits in the logits buffer at another offset, and V < 2', async () => {
    const { device } = gpu();
    const kernels = await CrossEntropyKernels.create(device);
    const buffer = createEmptyStorageBuffer(device, 'test.both', 4096);
    const targets = createEmptyStorageBuffer(device, 'test.targets', 16);
    expect(() =>
      kernels.backward(
        { logits: { buffer, offset: 0, size: 1024 }, targets: { buffer: targets }, dlogits: { buffer, offset: 1024 } },
        4,
        64,
      ),
    ).toThrow(/another buffer/);
    expect(() =>
      kernels.forward({ logits: { buffer }, targets: { buffer: targets }, losses: { buffer } }, 4, 1),
    ).toThrow(/V ≥ 2/);
    buffer.destroy();
    targets.destroy();
  });
});

describe('crossEntropyBackward (CPU)', () => {
  it('is the gradient of the mean loss (float64 finite differences)', () => {
    const [N, V] = [3, 7];
    const { logits, targets } = randomProblem(N, V, 21);
    const x = Float64Array.from(logits);
    const losses = new Float64Array(N);
    const dlogits = new Float64Array(N * V).fill(9); // overwritten, not accumulated
    crossEntropyBackward(dlogits, x, targets, N, V);
    const h = 1e-5;
    for (let i = 0; i < N * V; i++) {
      const saved = x[i] as number;
      x[i] = saved + h;
      const plus = crossEntropyForward(losses, x, targets, N, V);
      x[i] = saved - h;
      const minus = crossEntropyForward(losses, x, targets, N, V);
      x[i] = saved;
      expect(Math.abs((plus - minus) / (2 * h) - (dlogits[i] as number)), `index ${i}`).toBeLessThan(1e-8);
    }
  });

  it('gives the same result in place and with a scale', () => {
    const [N, V] = [4, 5];
    const { logits, targets } = randomProblem(N, V, 5);
    const separate = new Float64Array(N * V);
    crossEntropyBackward(separate, Float64Array.from(logits), targets, N, V, 0.5);
    const inPlace = Float64Array.from(logits);
    crossEntropyBackward(inPlace, inPlace, targets, N, V, 0.5);
    expect(Array.from(inPlace)).toEqual(Array.from(separate));
    // Each row of (softmax − onehot) sums to 0.
    for (let r = 0; r < N; r++)
      expect(Math.abs(separate.subarray(r * V, r * V + V).reduce((a, b) => a + b))).toBeLessThan(1e-15);
  });
});
