import { describe, expect, it } from 'vitest';
import { foldCount, type Limits, planGrid, planSplitK, resolveTiles, tensorBinding } from './plan.ts';

// SwiftShader's limits, the tightest we run on (256 invocations; 16 KiB is the portable storage).
const limits: Limits = {
  maxComputeInvocationsPerWorkgroup: 256,
  maxComputeWorkgroupSizeX: 256,
  maxComputeWorkgroupSizeY: 256,
  maxComputeWorkgroupStorageSize: 16_384,
  maxComputeWorkgroupsPerDimension: 65_535,
  maxStorageBufferBindingSize: 2 ** 30,
  minStorageBufferOffsetAlignment: 256,
};

describe('matmul planning', () => {
  it('defaults to 128 × 64 tiles of 256 invocations within 16 KiB', () => {
    const tiles = resolveTiles(limits, {});
    expect(tiles).toMatchObject({ tileM: 128, tileN: 64, tileK: 16 });
    expect(tiles.workgroupX * tiles.workgroupY).toBe(256);
    expect(tiles.workgroupStorageBytes).toBeLessThanOrEqual(16_384);
  });

  it('rejects tiles the device cannot run', () => {
    expect(() => resolveTiles(limits, { tileK: 6 })).toThrow(/multiple of 4/);
    expect(() => resolveTiles(limits, { workgroupX: 32, workgroupY: 16 })).toThrow(/256 invocations/);
    expect(() => resolveTiles(limits, { tileK: 32 })).toThrow(/workgroup memory/);
    expect(() => resolveTiles(limits, { workgroupX: 4 })).toThrow(/at least 8/);
  });

  it('dispatches a million rows, and folds row tiles into z past 65535', () => {
    const tiles = resolveTiles(limits, {});
    // N = B·T = 2^20 rows, OC = 768: 8192 × 12 tiles fit without folding.
    expect(planGrid(limits, Math.ceil(2 ** 20 / tiles.tileM), 12)).toEqual([12, 8192, 1]);
    for (const rowTiles of [65_535, 65_536, 200_001, 2 ** 24]) {
      const [x, y, z] = planGrid(limits, rowTiles, 3);
      expect(x).toBe(3);
      expect(y).toBeLessThanOrEqual(65_535);
      expect(z).toBeLessThanOrEqual(65_535);
      expect(y * z).toBeGreaterThanOrEqual(rowTiles);
      expect(y * (z - 1)).toBeLessThan(rowTiles); // no all-spare z layer
    }
    expect(foldCount(10, 3)).toEqual([3, 4]);
    expect(() => planGrid(limits, 1, 70_000)).toThrow(/column workgroups/);
  });

  it('splits K of the weight gradient when OC × C has few tiles', () => {
    const tiles = resolveTiles(limits, {});
    // GPT-2 small qkv (OC = 2304, C = 768): 18 × 12 tiles, K = 8192 → two splits of 4096.
    expect(planSplitK(tiles, limits, 2304, 768, 8192)).toEqual({ splits: 2, kPerSplit: 4096 });
    // Many tiles already: no split.
    expect(planSplitK(tiles, limits, 3072, 3072, 8192)).toEqual({ splits: 1, kPerSplit: 8192 });
    // A tiny layer over a million rows: one tile, 256 splits of 4096 rows.
    expect(planSplitK(tiles, limits, 64, 64, 2 ** 20)).toEqual({ splits: 256, kPerSplit: 4096 });
    // Short K: splitting would cost more than it gives.
    expect(planSplitK(tiles, limits, 64, 64, 255).splits).toBe(1);
    // Requested counts are kept when they can be, clamped to one K slice per split otherwise.
    expect(planSplitK(tiles, limits, 5, 64, 130, 3)).toEqual({ splits: 3, kPerSplit: 48 });
    expect(planSplitK(tiles, limits, 5, 64, 20, 8)).toEqual({ splits: 2, kPerSplit: 16 });
    // Partial results stay within 64 MiB.
    const big = planSplitK({ ...tiles, targetWorkgroups: 10_000 }, limits, 2048, 2048, 2 ** 20);
    expect(big.splits * (2048 * 2048 + 2048) * 4).toBeLessThanOrEqual(64 * 2 ** 20);
  });

  it('narrows views to their tensor and checks size and alignment', () => {
    const buffer = { size: 4096 } as GPUBuffer;
    expect(tensorBinding(limits, { buffer, offset: 512 }, 10, 'x')).toEqual({ buffer, offset: 512, size: 40 });
    expect(() => tensorBinding(limits, { buffer, offset: 100 }, 10, 'T.x')).toThrow(/T\.x: offset 100/);
    expect(() => tensorBinding(limits, { buffer, offset: 3840 }, 100, 'T.x')).toThrow(/view of 256 bytes/);
    expect(() => tensorBinding(limits, { buffer, size: 16 }, 5, 'T.x')).toThrow(/smaller than 5 f32/);
    expect(() => tensorBinding(limits, { buffer }, 0, 'T.x')).toThrow(/0 values/);
  });

  it('sizes the register kernels: 8 × 8 outputs per invocation, two staged slices', () => {
    const tiles = resolveTiles(limits, { kernel: 'register' });
    expect(tiles).toMatchObject({ kernel: 'register', tileM: 64, tileN: 64, tileK: 8, workgroupStorageBytes: 8704 });
    expect(resolveTiles(limits, { kernel: 'registerSubgroup', workgroupX: 16, workgroupY: 8 })).toMatchObject({
      tileM: 64,
      tileN: 128,
    });
    // 128 × 128 tiles need 16.5 KiB double-buffered: more than the portable 16 KiB.
    expect(() => resolveTiles(limits, { kernel: 'register', workgroupX: 16, workgroupY: 16 })).toThrow(
      /workgroup memory/,
    );
    expect(() => resolveTiles(limits, { kernel: 'registerSubgroup', workgroupX: 10 })).toThrow(/multiple of 4/);
    expect(() => resolveTiles(limits, { kernel: 'nope' as 'register' })).toThrow(/unknown kernel/);
  });
});
