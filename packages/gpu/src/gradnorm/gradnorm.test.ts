import { describe, expect, it } from 'vitest';
import { ADAMW_DEFAULTS, adamwUpdate } from '../adamw/adamw.cpu.ts';
import { AdamWKernels } from '../adamw/adamw.ts';
import { createEmptyStorageBuffer, createStorageBuffer, readFloat32 } from '../buffers.ts';
import { compareArrays } from '../compare.ts';
import { runKernels } from '../kernel.ts';
import { randomFloats } from '../random.ts';
import { useGpu } from '../test-gpu.ts';
import { chunkRange } from './chunks.ts';
import { clipScale, gradNorm } from './gradnorm.cpu.ts';
import { CLIP_SCALE_INDEX, GRAD_NORM_INDEX, GradNormKernels, type GradSegment } from './gradnorm.ts';

const gpu = useGpu();

/** f32 sum of n squares in a tree: a few ulps per level, relative to the norm. */
const normTolerance = (n: number) => 2 ** -23 * (Math.ceil(Math.log2(Math.max(2, n))) + 16);

async function gpuNorm(kernels: GradNormKernels, segments: GradSegment[], maxNorm: number, maxBindingBytes?: number) {
  const { device } = gpu();
  const result = createEmptyStorageBuffer(device, 'test.result', 8);
  const kernel = kernels.norm(segments, { buffer: result }, maxNorm, maxBindingBytes ? { maxBindingBytes } : {});
  await runKernels(device, [kernel], 'test.gradnorm');
  const values = await readFloat32(device, result, 2);
  kernel.destroy();
  result.destroy();
  return { norm: values[GRAD_NORM_INDEX] as number, scale: values[CLIP_SCALE_INDEX] as number };
}

describe('GradNormKernels', () => {
  it('matches the float64 norm and clip scale over a grid of sizes', async () => {
    const { device } = gpu();
    const kernels = await GradNormKernels.create(device);
    for (const [index, n] of [1, 2, 255, 256, 257, 4095, 4097, 65_537, 1_000_003].entries()) {
      const grads = randomFloats(n, 40 + index);
      const buffer = createStorageBuffer(device, 'test.grads', grads);
      const want = gradNorm(grads);
      // A threshold below the norm clips; one above leaves the scale at 1.
      for (const maxNorm of [want / 3, want * 2, 0]) {
        const got = await gpuNorm(kernels, [{ buffer, n }], maxNorm);
        expect(Math.abs(got.norm - want), `n=${n}: norm ${got.norm}, want ${want}`).toBeLessThanOrEqual(
          want * normTolerance(n),
        );
        expect(got.scale, `n=${n}, maxNorm=${maxNorm}`).toBeCloseTo(clipScale(want, maxNorm), 5);
      }
      buffer.destroy();
    }
  });

  it('sums several segments in two buffers, at unaligned offsets and split into views', async () => {
    const { device } = gpu();
    const kernels = await GradNormKernels.create(device, 64);
    const a = randomFloats(30_000, 1);
    const b = randomFloats(5_000, 2, -3, 3);
    const bufferA = createStorageBuffer(device, 'test.a', a);
    const bufferB = createStorageBuffer(device, 'test.b', b);
    const segments = [
      { buffer: bufferA, offset: 3, n: 20_000 },
      { buffer: bufferB, offset: 1_001, n: 3_999 },
      { buffer: bufferA, offset: 20_003, n: 9_997 },
    ];
    const parts = [a.subarray(3, 20_003), b.subarray(1_001, 5_000), a.subarray(20_003, 30_000)];
    const want = Math.sqrt(parts.reduce((sum, part) => sum + gradNorm(part) ** 2, 0));
    const whole = await gpuNorm(kernels, segments, 1);
    const split = await gpuNorm(kernels, segments, 1, 8192); // ≤ 1984 floats per view
    for (const got of [whole, split]) {
      expect(Math.abs(got.norm - want)).toBeLessThanOrEqual(want * normTolerance(34_000));
      expect(got.scale).toBeCloseTo(1 / (want + 1e-6), 6);
    }
    // An empty gradient has norm 0 and is not clipped.
    expect(await gpuNorm(kernels, [{ buffer: bufferA, n: 0 }], 1)).toEqual({ norm: 0, scale: 1 });
    bufferA.destroy();
    bufferB.destroy();
  });

  it('is deterministic from run to run', async () => {
    const { device } = gpu();
    const kernels = await GradNormKernels.create(device);
    const grads = randomFloats(500_001, 9);
    const buffer = createStorageBuffer(device, 'test.grads', grads);
    const first = await gpuNorm(kernels, [{ buffer, n: grads.length }], 1);
    for (let run = 0; run < 3; run++) expect(await gpuNorm(kernels, [{ buffer, n: grads.length }], 1)).toEqual(first);
    buffer.destroy();
  });

  it('plans within the dispatch limit up to 300M values', async () => {
    const kernels = await GradNormKernels.create(gpu().device);
    const maxGroups = gpu().device.limits.maxComputeWorkgroupsPerDimension;
    for (const n of [1, 4096, 4097, 60_000_000, 300_000_000]) {
      const { groups, itemsPerGroup } = kernels.plan(n);
      expect(groups).toBeLessThanOrEqual(maxGroups);
      expect(groups * itemsPerGroup).toBeGreaterThanOrEqual(n);
      expect((groups - 1) * itemsPerGroup).toBeLessThan(n);
      expect(itemsPerGroup % 256).toBe(0);
    }
  });

  it('feeds the clip scale to AdamW on the GPU, without a readback', async () => {
    const { device } = gpu();
    const n = 3_000;
    const params = randomFloats(n, 11);
    const grads = randomFloats(n, 12, -2, 2);
    const buffers = {
      params: createStorageBuffer(device, 'test.params', params),
      grads: createStorageBuffer(device, 'test.grads', grads),
      m: createEmptyStorageBuffer(device, 'test.m', n * 4),
      v: createEmptyStorageBuffer(device, 'test.v', n * 4),
    };
    const result = createEmptyStorageBuffer(device, 'test.result', 8);
    const norm = (await GradNormKernels.create(device)).norm([{ buffer: buffers.grads, n }], { buffer: result }, 1);
    const adamw = await AdamWKernels.create(device);
    const step = adamw.createStepBuffer();
    adamw.writeStep(step, { lr: 0.05, t: 1 });
    const update = adamw.update(
      { ...buffers, gradScale: { view: { buffer: result }, index: CLIP_SCALE_INDEX } },
      [{ offset: 0, n, weightDecay: 0.1 }],
      step,
    );
    await runKernels(device, [norm, update], 'test.clipAndStep');
    const want = Float64Array.from(params);
    const scale = clipScale(gradNorm(grads), 1);
    const { beta1, beta2, eps } = ADAMW_DEFAULTS;
    adamwUpdate(
      want,
      Float64Array.from(grads),
      new Float64Array(n),
      new Float64Array(n),
      n,
      0.05,
      beta1,
      beta2,
      eps,
      0.1,
      1,
      scale,
    );
    const got = await readFloat32(device, buffers.params, n);
    const comparison = compareArrays(got, want, { atol: 3e-7, rtol: 1e-6 });
    expect(comparison.ok, comparison.message).toBe(true);
    // The moments prove the scale was applied: m = (1 − β1)·scale·g at step 1.
    const m = await readFloat32(device, buffers.m, n);
    expect(m[0]).toBeCloseTo((1 - beta1) * scale * (grads[0] as number), 7);
    norm.destroy();
    update.destroy();
    for (const buffer of [...Object.values(buffers), result, step]) buffer.destroy();
  });
});

describe('chunkRange', () => {
  const limits = { minStorageBufferOffsetAlignment: 256, maxStorageBufferBindingSize: 4096 };
  const buffer = { size: 40_000, label: 'fake' } as GPUBuffer;

  it('covers a range with aligned views in order', () => {
    const chunks = chunkRange(limits, buffer, 37, 5_000);
    let next = 37;
    for (const chunk of chunks) {
      const offset = chunk.view.offset ?? 0;
      expect(offset % 256).toBe(0);
      expect(chunk.view.size).toBeLessThanOrEqual(4096);
      expect(offset / 4 + chunk.start).toBe(next);
      expect(chunk.rangeOffset).toBe(next - 37);
      next += chunk.n;
    }
    expect(next).toBe(5_037);
  });

  it('rejects a range past the end of the buffer', () => {
    expect(() => chunkRange(limits, buffer, 9_000, 1_001)).toThrow(/runs past/);
  });
});

describe('gradNorm (CPU)', () => {
  it('is the float64 L2 norm of the first n values', () => {
    expect(gradNorm(new Float64Array([3, 4, 12]), 2)).toBe(5);
    expect(gradNorm(new Float32Array([3, 4, 12]))).toBe(13);
    expect(clipScale(13, 1)).toBe(1 / (13 + 1e-6));
    expect(clipScale(0.5, 1)).toBe(1);
    expect(clipScale(100, 0)).toBe(1);
  });
});
