import { describe, expect, it } from 'vitest';
import { learningRate } from './schedule.ts';

// nanoGPT's get_lr, transcribed, as the independent reference.
function nanoGptGetLr(it: number, lr: number, minLr: number, warmup: number, decayIters: number): number {
  if (it < warmup) return (lr * (it + 1)) / (warmup + 1);
  if (it > decayIters) return minLr;
  const decayRatio = (it - warmup) / (decayIters - warmup);
  const coeff = 0.5 * (1.0 + Math.cos(Math.PI * decayRatio));
  return minLr + coeff * (lr - minLr);
}

describe('learningRate', () => {
  const schedule = { maxLr: 6e-4, minLr: 6e-5, warmupSteps: 10, totalSteps: 100 };

  it('matches nanoGPT get_lr at every step', () => {
    for (let step = 0; step <= 120; step++) {
      const want = nanoGptGetLr(step, 6e-4, 6e-5, 10, 100);
      expect(learningRate(step, schedule)).toBeCloseTo(want, 15);
    }
  });

  it('warms up linearly from a nonzero first step to maxLr', () => {
    expect(learningRate(0, schedule)).toBeCloseTo(6e-4 / 11, 15);
    for (let step = 1; step < 10; step++) {
      expect(learningRate(step, schedule) - learningRate(step - 1, schedule)).toBeCloseTo(6e-4 / 11, 15);
    }
    expect(learningRate(10, schedule)).toBe(6e-4);
  });

  it('decays monotonically, through the midpoint, to minLr and stays there', () => {
    expect(learningRate(55, schedule)).toBeCloseTo((6e-4 + 6e-5) / 2, 15);
    for (let step = 11; step <= 100; step++) {
      expect(learningRate(step, schedule)).toBeLessThanOrEqual(learningRate(step - 1, schedule));
    }
    expect(learningRate(100, schedule)).toBeCloseTo(6e-5, 15);
    expect(learningRate(1_000_000, schedule)).toBe(6e-5);
  });

  it('handles no warmup and no decay phase without dividing by zero', () => {
    expect(learningRate(0, { ...schedule, warmupSteps: 0 })).toBe(6e-4);
    const flat = { maxLr: 1e-3, minLr: 1e-4, warmupSteps: 5, totalSteps: 5 };
    expect(learningRate(4, flat)).toBeCloseTo((1e-3 * 5) / 6, 15);
    expect(learningRate(5, flat)).toBe(1e-4);
    expect(Number.isFinite(learningRate(6, flat))).toBe(true);
  });
});
