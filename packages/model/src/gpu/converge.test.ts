import { useGpu } from '@shoal/gpu/test-gpu';
import { describe, it } from 'vitest';
import { checkNanoConvergence } from '../train/test-convergence.ts';
import { GpuTrainer } from './trainer.ts';

const gpu = useGpu();

describe('nano on Moby Dick (WebGPU backend, the software adapter in CI)', () => {
  it('reaches a validation loss below 2.6 nats within 400 steps of 1,024 tokens', { timeout: 900_000 }, async () => {
    const { device } = gpu();
    await checkNanoConvergence((config, settings, params) => GpuTrainer.create(device, config, settings, params));
  });
});
