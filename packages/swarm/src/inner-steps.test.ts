import { describe, expect, it } from 'vitest';
import { FIRST_ROUND_TARGET_S, INNER_STEPS_RANGE, innerStepsFor } from './inner-steps.ts';

describe('innerStepsFor', () => {
  it('picks H so the first round opens within the target, rounded down to a nice number', () => {
    // 120 ms a step: 250 steps are 30 s
    expect(innerStepsFor({ stepMs: 120 })).toBe(250);
    // 700 ms: 42.8 steps → 40 (28 s)
    expect(innerStepsFor({ stepMs: 700 })).toBe(40);
    expect(innerStepsFor({ stepMs: 700, targetS: 60 })).toBe(80);
    for (const stepMs of [35, 90, 333, 1_000, 2_500]) {
      const H = innerStepsFor({ stepMs }) as number;
      if (H > INNER_STEPS_RANGE.min) expect((H * stepMs) / 1000).toBeLessThanOrEqual(FIRST_ROUND_TARGET_S);
      // never less than ~2/3 of the target (the nice numbers are at most 25% apart)
      if (H < INNER_STEPS_RANGE.max) expect((H * stepMs) / 1000).toBeGreaterThan(FIRST_ROUND_TARGET_S * 0.66);
    }
  });

  it('keeps H within its range, and gives none for an unknown speed', () => {
    expect(innerStepsFor({ stepMs: 5 })).toBe(INNER_STEPS_RANGE.max); // 6,000 steps in 30 s
    expect(innerStepsFor({ stepMs: 5_000 })).toBe(INNER_STEPS_RANGE.min); // SwiftShader-slow: 6 steps
    expect(innerStepsFor({ stepMs: 0 })).toBeNull();
    expect(innerStepsFor({ stepMs: Number.NaN })).toBeNull();
    expect(innerStepsFor({ stepMs: -1 })).toBeNull();
  });
});
