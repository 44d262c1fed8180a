import { describe, expect, it } from 'vitest';
import { BusyMeter } from './busy-meter.ts';

describe('the busy meter', () => {
  it('is the share of wall time a step was in progress, overlapping steps counted once', async () => {
    let now = 0;
    const meter = new BusyMeter(() => now, 10_000);
    expect(meter.fraction()).toBeNull();
    // 3 s busy of 4 s
    await meter.time(async () => {
      now += 3_000;
    });
    now += 1_000;
    expect(meter.fraction()).toBeCloseTo(0.75);
    // two overlapping steps over 2 s: busy 2 s, not 4
    let release: () => void = () => {};
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    const a = meter.time(() => held);
    const b = meter.time(async () => {
      now += 2_000;
    });
    await b;
    release();
    await a;
    expect(meter.fraction()).toBeCloseTo(5 / 6);
  });

  it('forgets what is older than its window, and counts a step in progress', async () => {
    let now = 0;
    const meter = new BusyMeter(() => now, 10_000);
    await meter.time(async () => {
      now += 10_000;
    });
    meter.fraction();
    now += 20_000; // idle: the busy start leaves the window
    meter.fraction();
    now += 10_000;
    expect(meter.fraction()).toBeCloseTo(0);
    let release: () => void = () => {};
    const step = meter.time(
      () =>
        new Promise<void>((resolve) => {
          release = resolve;
        }),
    );
    now += 10_000;
    expect(meter.fraction()).toBeGreaterThan(0.4);
    release();
    await step;
  });
});
