import { describe, expect, it } from 'vitest';
import { useGpu } from '../test-gpu.ts';
import { type MatmulConfig, shapeClass, type TileCache, tuneMatmul } from './tune.ts';

// The per-adapter tile search: forced configs, the cache, and never choosing a candidate whose
// results are wrong. Small shapes and few candidates: speed is measured in bench/matmul.ts.
const gpu = useGpu();

const shape = { N: 96, C: 64, OC: 132 };
const tiled: MatmulConfig = { kernel: 'tiled', workgroupX: 16, workgroupY: 16, tileK: 16 };
const register: MatmulConfig = { kernel: 'register', workgroupX: 8, workgroupY: 8, tileK: 8 };
const subgroup: MatmulConfig = { kernel: 'registerSubgroup', workgroupX: 8, workgroupY: 8, tileK: 8 };
const candidates = [tiled, register, subgroup];

function mapCache(): TileCache & { entries: Map<string, MatmulConfig> } {
  const entries = new Map<string, MatmulConfig>();
  return { entries, get: (key) => entries.get(key), set: (key, config) => void entries.set(key, config) };
}

describe('tuneMatmul', () => {
  it('uses a forced config without searching', async () => {
    const { device, adapter } = gpu();
    const cache = mapCache();
    const result = await tuneMatmul(device, adapter.info, { shape, force: register, cache });
    expect(result.source).toBe('forced');
    expect(result.kernels.tiles).toMatchObject({ kernel: 'register', tileM: 64, tileN: 64 });
    expect(cache.entries.size).toBe(0);
    result.kernels.destroy();
  });

  it('searches once per adapter and shape class, then answers from the cache', { timeout: 300_000 }, async () => {
    const { device, adapter } = gpu();
    const cache = mapCache();
    const first = await tuneMatmul(device, adapter.info, { shape, candidates, cache, budgetMs: 120_000 });
    expect(first.source).toBe('search');
    expect(first.results.map((r) => r.refused ?? 'timed')).toEqual(['timed', 'timed', 'timed']);
    const fastest = first.results.reduce((a, b) => ((a.seconds ?? 1e9) <= (b.seconds ?? 1e9) ? a : b));
    expect(first.config).toEqual(fastest.config);
    expect([...cache.entries.keys()]).toEqual([expect.stringContaining(`| ${shapeClass(shape)}`)]);
    first.kernels.destroy();
    // A shape of the same class reuses the choice.
    const again = await tuneMatmul(device, adapter.info, { shape: { N: 100, C: 60, OC: 128 }, candidates, cache });
    expect(again.source).toBe('cache');
    expect(again.config).toEqual(first.config);
    again.kernels.destroy();
  });

  // A cold compilation of a changed kernel on lavapipe (LLVM, before Mesa's shader cache holds
  // it) took up to two minutes on a busy 2-core machine: hence the long timeout.
  it('never chooses a candidate that fails its correctness check', { timeout: 600_000 }, async () => {
    const { device, adapter } = gpu();
    // Deliberately wrong register kernels (a product of the micro-tile dropped): only the tiled
    // kernel is correct, so it is chosen whatever the timings say.
    const brokenRegister = await tuneMatmul(device, adapter.info, {
      shape,
      candidates: [register, tiled],
      cache: mapCache(),
      budgetMs: 120_000,
      options: { transformSource: (code) => code.replace('acc[9] += a1.x * b1;', '') },
    });
    expect(brokenRegister.config).toEqual(tiled);
    expect(brokenRegister.results[0]?.refused).toMatch(/wrong results/);
    brokenRegister.kernels.destroy();
    // And the other way round: a wrong tiled kernel (the fallback) is refused too.
    const brokenTiled = await tuneMatmul(device, adapter.info, {
      shape,
      candidates: [tiled, register],
      cache: mapCache(),
      budgetMs: 120_000,
      options: { transformSource: (code) => code.replace('acc[7] += a1.w * b;', '') },
    });
    expect(brokenTiled.config).toEqual(register);
    expect(brokenTiled.results[0]?.refused).toMatch(/wrong results/);
    brokenTiled.kernels.destroy();
  });

  it('fails, naming each refusal, when no candidate is correct', { timeout: 300_000 }, async () => {
    const { device, adapter } = gpu();
    await expect(
      tuneMatmul(device, adapter.info, {
        shape,
        candidates: [register],
        cache: mapCache(),
        options: { transformSource: (code) => code.replace('acc[9] += a1.x * b1;', '') },
      }),
    ).rejects.toThrow(/no candidate passed.*\n.*register 8x8 k8: wrong results/);
  });

  it('classes shapes by the nearest power of two of each dimension', () => {
    expect(shapeClass({ N: 1024, C: 768, OC: 3072 })).toBe('1024x1024x4096');
    expect(shapeClass({ N: 1000, C: 700, OC: 2800 })).toBe('1024x512x2048');
    expect(shapeClass({ N: 1, C: 1, OC: 1 })).toBe('16x16x16');
  });
});
