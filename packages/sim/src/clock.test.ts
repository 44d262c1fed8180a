import { describe, expect, it } from 'vitest';
import { VirtualClock } from './clock.ts';

/** Resolves after `ms` of real time: work that happens outside the virtual clock. */
const realDelay = <T>(ms: number, value: T) => new Promise<T>((resolve) => setTimeout(() => resolve(value), ms));

describe('VirtualClock, driven synchronously', () => {
  it('runs events in time order, ties in scheduling order, with now() at the event time', () => {
    const clock = new VirtualClock();
    const log: string[] = [];
    clock.schedule(5, () => log.push(`a@${clock.now()}`));
    clock.schedule(2, () => log.push(`b@${clock.now()}`));
    clock.scheduleAt(5, () => log.push(`c@${clock.now()}`));
    clock.schedule(0, () => {
      log.push(`d@${clock.now()}`);
      clock.schedule(2, () => log.push(`e@${clock.now()}`)); // ties with b, scheduled after it
    });
    expect(clock.run()).toEqual({ events: 5, reason: 'idle' });
    expect(log).toEqual(['d@0', 'b@2', 'e@2', 'a@5', 'c@5']);
    expect(clock.now()).toBe(5);
  });

  it('cancels events, once', () => {
    const clock = new VirtualClock();
    const log: number[] = [];
    const first = clock.schedule(1, () => log.push(1));
    clock.schedule(2, () => log.push(2));
    expect(clock.pending()).toBe(2);
    expect(first.cancel()).toBe(true);
    expect(first.cancel()).toBe(false);
    expect(clock.pending()).toBe(1);
    const stop = clock.setTimer(3, () => log.push(3));
    stop();
    clock.run();
    expect(log).toEqual([2]);
    expect(clock.now()).toBe(2);
  });

  it('stops at `until` (moving time there), after `maxEvents`, or when `stopWhen` says so', () => {
    const clock = new VirtualClock({ startMs: 100 });
    let count = 0;
    for (const delay of [10, 20, 30, 40]) clock.schedule(delay, () => count++);
    expect(clock.run({ until: 125 })).toEqual({ events: 2, reason: 'until' });
    expect(clock.now()).toBe(125);
    expect(clock.run({ maxEvents: 1 })).toEqual({ events: 1, reason: 'max-events' });
    expect(clock.now()).toBe(130);
    expect(clock.run({ stopWhen: () => count >= 3 })).toEqual({ events: 0, reason: 'stopped' });
    expect(clock.run({ until: 1000 })).toEqual({ events: 1, reason: 'until' });
    expect(clock.now()).toBe(1000);
    expect(clock.step()).toBe(false);
  });

  it('refuses the past, bad delays and re-entrant stepping', () => {
    const clock = new VirtualClock({ startMs: 10 });
    expect(() => clock.scheduleAt(9, () => {})).toThrow(/already 10 ms/);
    expect(() => clock.schedule(-1, () => {})).toThrow(RangeError);
    expect(() => clock.schedule(Number.NaN, () => {})).toThrow(RangeError);
    expect(() => clock.schedule(Number.POSITIVE_INFINITY, () => {})).toThrow(RangeError);
    clock.schedule(0, () => clock.step());
    expect(() => clock.step()).toThrow(/inside an event/);
    clock.schedule(0, () => {
      throw new Error('callback failed');
    });
    expect(() => clock.run()).toThrow('callback failed');
    expect(clock.run()).toEqual({ events: 0, reason: 'idle' });
  });
});

describe('VirtualClock, driven asynchronously', () => {
  /**
   * Actors with distinct periods sleep in a loop, with a chain of awaits between wake-up and the
   * next sleep. Ties between actors go to the one whose sleep was called first: the one with the
   * longer period (it went to sleep earlier).
   */
  async function interleave(periods: number[], untilMs: number): Promise<string[]> {
    const clock = new VirtualClock();
    const log: string[] = [];
    const deepWork = async (depth: number): Promise<void> => {
      if (depth > 0) await deepWork(depth - 1);
      await Promise.resolve();
    };
    const actor = async (name: number, period: number) => {
      while (clock.now() + period <= untilMs) {
        await clock.sleep(period);
        await deepWork(5);
        log.push(`${clock.now()}:${name}`);
      }
    };
    const done = periods.map((period, name) => actor(name, period));
    const result = await clock.runAsync();
    await Promise.all(done);
    expect(result.reason).toBe('idle');
    return log;
  }

  it('interleaves many sleeping actors exactly by time, deterministically', async () => {
    const periods = [3, 5, 7, 2, 11, 4];
    const log = await interleave(periods, 60);
    const expected: { at: number; period: number; name: number }[] = [];
    periods.forEach((period, name) => {
      for (let at = period; at <= 60; at += period) expected.push({ at, period, name });
    });
    expected.sort((a, b) => a.at - b.at || b.period - a.period);
    expect(log).toEqual(expected.map(({ at, name }) => `${at}:${name}`));
    expect(await interleave(periods, 60)).toEqual(log);
  });

  it('runs what promise continuations schedule before the next event', async () => {
    const clock = new VirtualClock();
    const log: string[] = [];
    clock.schedule(11, () => log.push(`timer@${clock.now()}`));
    const actor = (async () => {
      await clock.sleep(10);
      for (let i = 0; i < 20; i++) await Promise.resolve(); // a long chain of continuations
      clock.schedule(0, () => log.push(`follow-up@${clock.now()}`));
    })();
    await clock.runAsync();
    await actor;
    expect(log).toEqual(['follow-up@10', 'timer@11']);
    // the synchronous driver does not wait for continuations, which is why runAsync exists
    const sync = new VirtualClock();
    const syncLog: string[] = [];
    sync.schedule(11, () => syncLog.push('timer'));
    void sync.sleep(10).then(() => sync.schedule(0, () => syncLog.push('follow-up')));
    sync.run();
    expect(syncLog).toEqual(['timer']);
  });

  it('holds virtual time still during tracked real work and hands results back in track order', async () => {
    const clock = new VirtualClock();
    const log: string[] = [];
    let ticks = 0;
    const ticker = (async () => {
      while (clock.now() < 5) {
        await clock.sleep(1);
        ticks++;
      }
    })();
    const worker = async (name: string, realMs: number) => {
      await clock.sleep(2);
      const started = clock.now();
      const ticksBefore = ticks;
      const value = await clock.track(realDelay(realMs, name)); // B's work ends first in real time
      log.push(`${value}: ${started}->${clock.now()}, ticks ${ticksBefore}->${ticks}`);
      await clock.sleep(1);
      log.push(`${name} slept until ${clock.now()}`);
    };
    const done = [worker('A', 40), worker('B', 5), ticker];
    await clock.runAsync();
    await Promise.all(done);
    // the ticker's wake-up at 2 was scheduled at 1, after the workers' (at 0), so it runs after them
    expect(log).toEqual(['A: 2->2, ticks 1->1', 'B: 2->2, ticks 1->1', 'A slept until 3', 'B slept until 3']);
    expect(clock.trackedCount()).toBe(0);
  });

  it('passes tracked failures through, and waits for tracked work before calling a run idle', async () => {
    const clock = new VirtualClock();
    const outcome = clock.track(Promise.reject(new Error('engine lost'))).catch((error: Error) => error.message);
    let late = -1;
    void clock.track(realDelay(10, 0)).then(() => clock.sleep(7).then(() => (late = clock.now())));
    expect(await clock.runAsync()).toEqual({ events: 1, reason: 'idle' });
    expect(await outcome).toBe('engine lost');
    expect(late).toBe(7);
  });

  it('advances one event at a time and refuses a second driver', async () => {
    const clock = new VirtualClock();
    const log: number[] = [];
    void clock.sleep(4).then(() => {
      log.push(clock.now());
      return clock.sleep(1).then(() => log.push(clock.now()));
    });
    expect(await clock.advance()).toBe(true);
    expect(log).toEqual([4]);
    const first = clock.runAsync();
    await expect(clock.runAsync()).rejects.toThrow(/already running/);
    await first;
    expect(log).toEqual([4, 5]);
    expect(await clock.advance()).toBe(false);
  });
});
