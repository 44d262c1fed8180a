import { describe, expect, it } from 'vitest';
import { scheduleTimeText } from './schedule-time.ts';

describe('the schedule’s duration on the host form', () => {
  it('says it is not known before the speed is measured', () => {
    expect(scheduleTimeText({ steps: 400, tokensPerStep: 128, stepMs: null, engine: null, volunteers: 4 })).toBe(
      'How long 400 schedule steps take is not known yet: it is measured from this browser’s speed on this model.',
    );
  });

  it('is the steps at the measured step time, as long with more volunteers, who train more tokens', () => {
    const input = { steps: 3_000, tokensPerStep: 128, stepMs: 40, engine: 'cpu' as const, volunteers: 4 };
    expect(scheduleTimeText(input)).toBe(
      '3,000 schedule steps take about 2 min on a volunteer as fast as this browser (40 ms a step on its CPU), plus the rounds’ waits; with 4 such volunteers as long, and 1.54M tokens trained.',
    );
    expect(scheduleTimeText({ ...input, volunteers: null, engine: 'webgpu' })).toMatch(
      /on its GPU\), plus the rounds’ waits\.$/,
    );
  });
});
