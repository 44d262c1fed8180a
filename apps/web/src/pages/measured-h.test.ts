import { FIRST_ROUND_TARGET_S } from '@shoal/room/host-defaults';
import { RUN_OPTION_DEFAULTS } from '@shoal/room/run-options';
import { describe, expect, it } from 'vitest';
import type { EngineMeasure } from '../runtime/engine-probe.ts';
import { measuredInnerSteps } from './measured-h.ts';

const measured = (tokensPerSecond: number): EngineMeasure => ({
  kind: 'measured',
  tokensPerSecond,
  steps: 4,
  adapter: 'test',
  software: false,
});
const none: EngineMeasure = { kind: 'unavailable', reason: 'no WebGPU' };
const TOKENS = 4 * 64; // a step of batch 4 × sequence 64

describe("the host form's H from this browser's speed", () => {
  it('keeps the default H where the first round comes soon anyway', () => {
    // 25,600 tokens/s: 10 ms a step, the default's rounds come after half a second
    const h = measuredInnerSteps({ cpu: measured(25_600), webgpu: none }, TOKENS);
    expect(h).toEqual({ innerSteps: RUN_OPTION_DEFAULTS.innerSteps, stepMs: 10, engine: 'cpu' });
  });

  it("lowers H on a slow browser so the first round comes within the target, from the faster engine's step", () => {
    // a software GPU at 64 tokens/s (4 s a step) and the CPU at 128 tokens/s (2 s a step): the
    // default H would keep the first round 100 s away
    const h = measuredInnerSteps({ cpu: measured(128), webgpu: measured(64) }, TOKENS);
    expect(h?.engine).toBe('cpu');
    expect(h?.stepMs).toBe(2_000);
    expect(h?.innerSteps).toBeLessThan(RUN_OPTION_DEFAULTS.innerSteps);
    expect((h?.innerSteps ?? 0) * 2).toBeLessThanOrEqual(FIRST_ROUND_TARGET_S);
    expect((h?.innerSteps ?? 0) * 2).toBeGreaterThan(FIRST_ROUND_TARGET_S / 2);
  });

  it('takes a bound ("slower than") as the speed, and gives nothing when neither engine trains', () => {
    const slower: EngineMeasure = {
      kind: 'slower',
      tokensPerSecond: 64,
      why: 'one step took over 4 s',
      adapter: 'sw',
      software: true,
    };
    expect(measuredInnerSteps({ cpu: none, webgpu: slower }, TOKENS)?.innerSteps).toBe(10);
    expect(measuredInnerSteps({ cpu: none, webgpu: none }, TOKENS)).toBeNull();
    const unbounded: EngineMeasure = { ...slower, tokensPerSecond: null };
    expect(measuredInnerSteps({ cpu: none, webgpu: unbounded }, TOKENS)).toBeNull();
  });
});
