import { describe, expect, it } from 'vitest';
import { restAfterStep } from './volunteer-runtime.ts';

describe('the duty-cycle cap', () => {
  it('rests so that busy / (busy + rest) is the duty cycle', () => {
    expect(restAfterStep(100, 1)).toBe(0);
    expect(restAfterStep(100, 0.5)).toBeCloseTo(100);
    expect(restAfterStep(100, 0.25)).toBeCloseTo(300);
    for (const duty of [0.1, 0.3, 0.7]) {
      const rest = restAfterStep(40, duty);
      expect(40 / (40 + rest)).toBeCloseTo(duty);
    }
  });
  it('clamps nonsense to 5 % … 100 %', () => {
    expect(restAfterStep(10, 0)).toBeCloseTo(190);
    expect(restAfterStep(10, 7)).toBe(0);
  });
});
