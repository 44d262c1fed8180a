import { describe, expect, test } from 'vitest';
import { PRESETS, trainingStepFlops } from '../../packages/model/src/config.ts';
import { devicePlan, PART_NAMES } from './plan.ts';

describe('devicePlan', () => {
  const gpu = devicePlan(false);
  const isL12C768 = (s: { config: { nLayer: number; nEmbd: number } }) =>
    s.config.nLayer === 12 && s.config.nEmbd === 768;

  test('the GPU plan fits in 4 minutes with 10 s to unpack', () => {
    const total = PART_NAMES.reduce((sum, part) => sum + gpu.budgets[part], 0);
    expect(total + 10).toBeLessThanOrEqual(240);
  });

  test('precision: 400 steps of small at its bench batch, within 1%, and matmul 4096³', () => {
    expect(gpu.precision).toMatchObject({ steps: 400, tolerance: 0.01, matmulSize: 4096 });
    expect(gpu.precision.train).toMatchObject({ name: 'small', B: 16, T: 256 });
    expect(gpu.precision.lastSteps).toBeLessThanOrEqual(gpu.precision.steps);
  });

  test('every preset, GPT-2 small’s shape and L24 C1024 at 8×1024 get a training step', () => {
    const names = gpu.steps.map((s) => s.name);
    for (const preset of Object.keys(PRESETS)) expect(names).toContain(preset);
    expect(gpu.steps.find((s) => isL12C768(s) && s.B === 8 && s.T === 1024)).toBeDefined();
    expect(gpu.steps.find((s) => s.name === 'L24 C1024')).toMatchObject({ B: 8, T: 1024, config: { nLayer: 24 } });
    // Fewer timed steps the larger the model.
    const byName = Object.fromEntries(gpu.steps.map((s) => [s.name, s.steps]));
    expect(byName['L24 C1024']).toBeLessThan(byName.nano as number);
  });

  test('gradients at L12 C768 T256 with a small batch; kernels at L12 C768 B8 T1024 and matmul 4096³', () => {
    expect(gpu.grads.find((s) => isL12C768(s) && s.T === 256 && s.B <= 4)).toBeDefined();
    expect(gpu.kernels.find((s) => isL12C768(s) && s.B === 8 && s.T === 1024)).toBeDefined();
    expect(gpu.squareMatmul).toContain(4096);
  });

  test('--local keeps to shapes a software adapter runs in seconds', () => {
    const local = devicePlan(true);
    expect(local.local).toBe(true);
    for (const s of [...local.grads, ...local.steps, ...local.kernels, local.precision.train]) {
      expect(trainingStepFlops(s.config, s.B, s.T), s.name).toBeLessThan(1e9);
    }
  });
});
