import { describe, it } from 'vitest';
import { checkNanoConvergence } from '../train/test-convergence.ts';
import { CpuTrainer } from './trainer.ts';

describe('nano on Moby Dick (CPU backend)', () => {
  it('reaches a validation loss below 2.6 nats within 400 steps of 1,024 tokens', { timeout: 600_000 }, async () => {
    await checkNanoConvergence(async (config, settings, params) => new CpuTrainer(config, settings, params));
  });
});
