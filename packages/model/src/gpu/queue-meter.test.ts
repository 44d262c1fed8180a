import { describe, expect, it } from 'vitest';
import { QueueMeter } from './queue-meter.ts';

/** A promise and its resolver: a step the test finishes by hand. */
function step(): { done: Promise<void>; finish: () => void } {
  let finish = () => {};
  const done = new Promise<void>((resolve) => {
    finish = resolve;
  });
  return { done, finish };
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 0));

describe('QueueMeter', () => {
  it('counts the time at least one step is unfinished, and each step from its predecessor’s end', async () => {
    let now = 0;
    const meter = new QueueMeter(() => now);
    const [a, b] = [step(), step()];
    now = 10;
    meter.submitted(a.done);
    meter.submitted(b.done); // queued behind a
    now = 30;
    a.finish();
    await settle();
    expect(meter.stats()).toMatchObject({ inFlight: 1, steps: 1, stepMs: 20 });
    now = 45;
    b.finish();
    await settle();
    // b ran from a's end (30) to 45, a step 17.5 ms on average; the queue was busy 10 … 45
    expect(meter.stats()).toMatchObject({ inFlight: 0, steps: 2, stepMs: 17.5, busyMs: 35 });
    now = 50;
    const c = step();
    meter.submitted(c.done);
    now = 100;
    // a step still in flight counts up to now
    expect(meter.stats()).toMatchObject({ busyMs: 85, wallMs: 100, fraction: 0.85 });
    meter.reset();
    now = 120;
    c.finish();
    await settle();
    // after a reset, only what follows it: c's spell counts from the reset (c ran 50 … 120)
    expect(meter.stats()).toMatchObject({ busyMs: 20, wallMs: 20, fraction: 1, steps: 1, stepMs: (20 + 15 + 70) / 3 });
  });

  it('averages step times, so steps whose ends are seen in one turn do not read as instant', async () => {
    let now = 0;
    const meter = new QueueMeter(() => now);
    const [a, b] = [step(), step()];
    meter.submitted(a.done);
    meter.submitted(b.done);
    now = 40;
    a.finish();
    b.finish();
    await settle();
    expect(meter.stats()).toMatchObject({ steps: 2, stepMs: 20 });
  });

  it('resolves atMost(n) once at most n steps are unfinished', async () => {
    const meter = new QueueMeter(() => 0);
    const steps = [step(), step(), step()];
    for (const s of steps) meter.submitted(s.done);
    let room = false;
    void meter.atMost(1).then(() => {
      room = true;
    });
    await expect(meter.atMost(3)).resolves.toBeUndefined();
    steps[0]?.finish();
    await settle();
    expect(room).toBe(false);
    steps[1]?.finish();
    await settle();
    expect(room).toBe(true);
  });
});
