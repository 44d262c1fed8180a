import { describe, expect, it } from 'vitest';
import { randomFloats } from '../random.ts';
import { useGpu } from '../test-gpu.ts';
import { SumKernel, sumReference, sumTolerance } from './sum.ts';

const gpu = useGpu();

describe('SumKernel', () => {
  // Sizes around workgroup and multi-pass boundaries, most not multiples of the tile.
  const sizes = [1, 2, 63, 64, 65, 255, 256, 257, 1023, 1024, 1025, 4097, 65_535, 262_145, 1_048_583];

  for (const workgroupSize of [64, 256]) {
    it(`matches the float64 CPU sum over a grid of sizes (workgroup ${workgroupSize})`, async () => {
      const kernel = await SumKernel.create(gpu().device, workgroupSize);
      for (const [index, n] of sizes.entries()) {
        const values = randomFloats(n, 100 + index);
        const got = await kernel.sum(values);
        const want = sumReference(values);
        expect(Math.abs(got - want), `n=${n}: got ${got}, want ${want}`).toBeLessThanOrEqual(sumTolerance(values));
      }
    });
  }

  it('is exact on integers and deterministic from run to run', async () => {
    const kernel = await SumKernel.create(gpu().device);
    const ones = new Float32Array(1_000_001).fill(1);
    expect(await kernel.sum(ones)).toBe(1_000_001);
    const values = randomFloats(300_007, 7);
    const first = await kernel.sum(values);
    expect(await kernel.sum(values)).toBe(first);
  });

  it('plans passes that respect the dispatch limit', async () => {
    const kernel = await SumKernel.create(gpu().device, 64);
    const maxGroups = gpu().device.limits.maxComputeWorkgroupsPerDimension;
    for (const n of [1, 256, 10_000_000, 300_000_000]) {
      const passes = kernel.plan(n);
      expect(passes.at(-1)?.groups).toBe(1);
      for (const pass of passes) {
        expect(pass.groups).toBeLessThanOrEqual(maxGroups);
        expect(pass.groups * pass.itemsPerGroup).toBeGreaterThanOrEqual(pass.n);
        expect(pass.itemsPerGroup % 64).toBe(0);
      }
    }
  });

  it('rejects a workgroup size that is not a power of two', async () => {
    await expect(SumKernel.create(gpu().device, 96)).rejects.toThrow(/power of two/);
  });
});
