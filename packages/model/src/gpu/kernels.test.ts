import {
  isSoftwareDevice,
  type MatmulConfig,
  memoryTileCache,
  mulberry32,
  setDefaultTileCache,
  type TileCache,
} from '@shoal/gpu';
import { useGpu } from '@shoal/gpu/test-gpu';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { GptConfig } from '../config.ts';
import { CpuTrainer } from '../cpu/trainer.ts';
import { initParameters } from '../init.ts';
import { buildLayout } from '../layout.ts';
import type { Batch } from '../train/trainer.ts';
import { defaultTrainConfig } from '../train-config.ts';
import { createGptKernels, describeMatmul, gptLayerShape } from './kernels.ts';
import { GpuTrainer } from './trainer.ts';

// How createGptKernels picks its matmul family: tiled on a software adapter, the tile search on
// request (here on lavapipe with one candidate and a tiny budget), and a model that trains the
// same with the searched family. Tiny shapes: software WebGPU compiles slowly.
const gpu = useGpu();

const config: GptConfig = { nLayer: 1, nHead: 2, nEmbd: 32, blockSize: 16, vocabSize: 64 };
const train = defaultTrainConfig({ batchSize: 2, seqLen: 9, maxLr: 3e-3, seed: 1 });
const layer = gptLayerShape(config, train.batchSize, train.seqLen); // 18 × 32 → 128
const headSize = config.nEmbd / config.nHead;
const register: MatmulConfig = { kernel: 'register', workgroupX: 8, workgroupY: 8, tileK: 8 };

function mapCache(): TileCache & { entries: Map<string, MatmulConfig> } {
  const entries = new Map<string, MatmulConfig>();
  return { entries, get: (key) => entries.get(key), set: (key, value) => void entries.set(key, value) };
}

function batches(count: number, seed: number): Batch[] {
  const next = mulberry32(seed);
  const tokens = () =>
    Int32Array.from({ length: train.batchSize * train.seqLen }, () => Math.floor(next() * config.vocabSize));
  return Array.from({ length: count }, () => ({ inputs: tokens(), targets: tokens() }));
}

afterEach(() => {
  vi.unstubAllEnvs();
});

describe('createGptKernels matmul choice', () => {
  it('keeps the fixed tiled kernel on a software adapter, even given a layer shape', { timeout: 120_000 }, async () => {
    const { device } = gpu();
    expect(isSoftwareDevice(device), 'this test expects a software adapter (lavapipe, SwiftShader)').toBe(true);
    vi.stubEnv('SHOAL_MATMUL', '');
    const cache = mapCache();
    const kernels = await createGptKernels(device, headSize, { layer, tileCache: cache });
    expect(kernels.matmulConfig).toEqual({
      config: { kernel: 'tiled', workgroupX: 16, workgroupY: 16, tileK: 16 },
      source: 'fixed',
      precision: 'f32',
    });
    expect(kernels.matmul.tiles).toMatchObject({ kernel: 'tiled' });
    expect(describeMatmul(kernels.matmulConfig)).toBe('matmul tiled 16x16 k16 (fixed)');
    expect(cache.entries.size).toBe(0);
  });

  it('rejects a bad SHOAL_MATMUL and a search without a shape before compiling', async () => {
    const { device } = gpu();
    vi.stubEnv('SHOAL_MATMUL', 'fastest');
    await expect(createGptKernels(device, headSize, { layer })).rejects.toThrow(
      /SHOAL_MATMUL=fastest: use tiled or search/,
    );
    vi.stubEnv('SHOAL_MATMUL', '');
    await expect(createGptKernels(device, headSize, { matmul: 'search' })).rejects.toThrow(/needs a layer shape/);
  });

  it('searches with SHOAL_MATMUL=search, and the model trains with the searched family as on the CPU', {
    timeout: 300_000,
  }, async () => {
    const { device } = gpu();
    vi.stubEnv('SHOAL_MATMUL', 'search');
    const cache = mapCache();
    const kernels = await createGptKernels(device, headSize, {
      layer,
      tileCache: cache,
      search: { candidates: [register], budgetMs: 1, sampleMs: 1 },
    });
    expect(kernels.matmulConfig).toEqual({ config: register, source: 'search', precision: 'f32' });
    expect(kernels.matmul.tiles).toMatchObject({ kernel: 'register' });
    expect([...cache.entries.values()]).toEqual([register]);
    expect(describeMatmul(kernels.matmulConfig)).toBe('matmul register 8x8 k8 (searched)');

    // Three steps against the CPU trainer (trainer.test.ts checks the tiled family the same way).
    const params = initParameters(buildLayout(config), 4);
    const cpu = new CpuTrainer(config, train, params.slice());
    const trainer = await GpuTrainer.create(device, config, train, params, kernels);
    try {
      expect(trainer.model.kernels.matmulConfig.source).toBe('search');
      for (const [i, batch] of batches(3, 9).entries()) {
        const want = await cpu.step(batch, train.maxLr);
        const got = await trainer.step(batch, train.maxLr);
        expect(Math.abs(got - want) / want, `step ${i}: loss ${got} vs ${want}`).toBeLessThan(1e-4);
      }
      const [gotParams, wantParams] = [await trainer.getParams(), await cpu.getParams()];
      let maxDiff = 0;
      for (let i = 0; i < gotParams.length; i++) {
        maxDiff = Math.max(maxDiff, Math.abs((gotParams[i] as number) - (wantParams[i] as number)));
      }
      expect(maxDiff).toBeLessThan(1e-4);
    } finally {
      trainer.destroy();
    }
  });

  it('searches through the default tile cache when given none, then answers from it', {
    timeout: 300_000,
  }, async () => {
    const { device } = gpu();
    const cache = mapCache();
    setDefaultTileCache(cache); // as the CLI does with fileTileCache()
    try {
      const search = { candidates: [register], budgetMs: 1, sampleMs: 1 };
      const first = await createGptKernels(device, headSize, { layer, matmul: 'search', search });
      expect(first.matmulConfig.source).toBe('search');
      expect(cache.entries.size).toBe(1);
      const again = await createGptKernels(device, headSize, { layer, matmul: 'search', search });
      expect(again.matmulConfig).toEqual({ config: register, source: 'cache', precision: 'f32' });
      expect(describeMatmul(again.matmulConfig)).toBe('matmul register 8x8 k8 (cached search)');
    } finally {
      setDefaultTileCache(memoryTileCache);
    }
  });
});
