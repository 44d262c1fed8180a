import { mulberry32 } from '@shoal/gpu/random';
import { useGpu } from '@shoal/gpu/test-gpu';
import { buildLayout, type GpuTrainer, initParameters } from '@shoal/model';
import { describe, expect, it } from 'vitest';
import { RUN_OPTION_DEFAULTS, runConfigOf } from '../run-options.ts';
import { trainerFor } from './volunteer-service.ts';

// A room's precision reaches its WebGPU volunteers' engines: an f16 room's volunteer multiplies
// f16 operands (here, on a software adapter without subgroup matrices, the tiled kernel rounding
// them, and it says why), and trains as the f32 engine does within f16's rounding.
const gpu = useGpu();

describe('trainerFor and the room precision', () => {
  it('builds the f16 path for an f16 room and the f32 path otherwise, on the same trajectory', {
    timeout: 300_000,
  }, async () => {
    const values = { ...RUN_OPTION_DEFAULTS, batch: 4, seq: 32 };
    const f32Config = runConfigOf(values);
    const f16Config = runConfigOf({ ...values, precision: 'f16' });
    expect(f32Config.precision).toBeUndefined();
    expect(f16Config.precision).toBe('f16');
    const params = initParameters(buildLayout(f32Config.model), 7);
    const next = mulberry32(11);
    const tokens = () => Int32Array.from({ length: 4 * 32 }, () => Math.floor(next() * 256));
    const batches = Array.from({ length: 5 }, () => ({ inputs: tokens(), targets: tokens() }));
    const losses: Record<string, number[]> = {};
    for (const [name, config] of [
      ['f32', f32Config],
      ['f16', f16Config],
    ] as const) {
      const trainer = (await trainerFor(gpu().device, config, params.slice())) as GpuTrainer;
      const matmul = trainer.model.kernels.matmulConfig;
      expect(matmul.precision).toBe(name);
      if (name === 'f16') expect(matmul.note).toMatch(/no tensor cores/);
      losses[name] = [];
      for (const batch of batches) losses[name].push(await trainer.step(batch, 1e-3));
      trainer.destroy();
    }
    const [f32, f16] = [losses.f32 as number[], losses.f16 as number[]];
    for (const [i, loss] of f16.entries()) {
      expect(Math.abs(loss - (f32[i] as number)) / (f32[i] as number), `step ${i}`).toBeLessThan(1e-2);
    }
    // Not the same numbers: the operands were rounded.
    expect(f16.some((loss, i) => loss !== f32[i])).toBe(true);
  });
});
