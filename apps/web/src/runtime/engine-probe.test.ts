import { describe, expect, it } from 'vitest';
import {
  type EngineProbe,
  engineLabel,
  keepProbe,
  measureText,
  PROBE_LIMITS,
  ProbeTally,
  pickEngine,
  probeKeyOf,
  probeMaxMs,
  readKeptProbe,
  recentSteps,
  relativeError,
  roughRate,
  slowChoiceText,
  throughput,
} from './engine-probe.ts';

const gpuInfo = { adapter: 'Google SwiftShader', software: true };
const cpuInfo = { adapter: 'CPU (WebAssembly)', software: false };
/** A tally whose device opened at 0 and whose engine was built at `at`, 1,024 tokens a step. */
function built(info: typeof gpuInfo, at: number, rival: number | null = null): ProbeTally {
  const tally = new ProbeTally(0, PROBE_LIMITS, rival);
  tally.device(info, 0);
  tally.ready(1024, at);
  return tally;
}

describe('the probe arithmetic', () => {
  it('counts all tokens over all the time', () => {
    expect(throughput(1000, [100, 100, 200])).toBeCloseTo(3000 / 0.4);
    expect(throughput(1024, [34])).toBeCloseTo(1024 / 0.034);
  });

  it('estimates from the later half of the timed steps', () => {
    expect(recentSteps([60, 50, 34, 34, 34])).toEqual([34, 34, 34]);
    expect(recentSteps([1_000])).toEqual([1_000]);
  });

  it('calls equal steps steady and scattered ones not', () => {
    expect(relativeError([10])).toBe(Number.POSITIVE_INFINITY);
    expect(relativeError([10, 10, 10])).toBe(0);
    // mean 20, sample sd 10, n 3: stderr 10/√3 ≈ 5.77, 29 % of the mean
    expect(relativeError([10, 20, 30])).toBeCloseTo(10 / Math.sqrt(3) / 20);
  });
});

describe('ProbeTally', () => {
  it('stops as soon as the recent steps agree, leaving out the warm-up and the slow first steps', () => {
    const tally = built(cpuInfo, 500);
    tally.step(400, 900); // warm-up: compiles, not counted
    expect(tally.verdict(900)).toBeNull();
    let at = 900;
    for (const ms of [60, 50, 34, 34]) {
      at += ms;
      tally.step(ms, at);
      expect(tally.verdict(at)).toBeNull(); // the later half: fewer than three steps, or 60/50 among them
    }
    tally.step(34, at + 34);
    const verdict = tally.verdict(at + 34);
    expect(verdict).toMatchObject({ kind: 'measured', steps: 3, adapter: 'CPU (WebAssembly)' });
    expect(verdict?.kind === 'measured' && verdict.tokensPerSecond).toBeCloseTo(1024 / 0.034);
  });

  it('keeps going while steps scatter, and takes what it has when the budget is spent', () => {
    const tally = built(cpuInfo, 0);
    tally.step(100, 100);
    let at = 100;
    for (const ms of [50, 150, 50, 150]) {
      at += ms;
      tally.step(ms, at);
    }
    expect(tally.verdict(at)).toBeNull(); // the later half is two steps: not steady yet
    expect(tally.nextDeadline()).toBe(PROBE_LIMITS.budgetMs);
    // over the later half: 2 × 1024 tokens in 0.2 s
    expect(tally.verdict(PROBE_LIMITS.budgetMs)).toMatchObject({ kind: 'measured', steps: 2, tokensPerSecond: 10_240 });
  });

  it('has a verdict by probeMaxMs however slowly the engine builds and steps (the page says so)', () => {
    const last = built(gpuInfo, PROBE_LIMITS.buildMs - 1);
    expect(last.verdict(probeMaxMs() - 2)).toBeNull();
    expect(last.verdict(probeMaxMs())).toMatchObject({ kind: 'slower' });
    const never = new ProbeTally(0, PROBE_LIMITS, null);
    never.device(gpuInfo, 0);
    expect(never.verdict(PROBE_LIMITS.buildMs)).toMatchObject({ kind: 'slower', tokensPerSecond: null });
  });

  it('waits up to the cap for a first timed step, then bounds the speed by the step in progress', () => {
    const tally = built(gpuInfo, 1_000);
    tally.step(2_500, 3_500); // the warm-up
    expect(tally.verdict(1_000 + PROBE_LIMITS.budgetMs)).toBeNull(); // no timed step yet: wait on
    const cap = 1_000 + PROBE_LIMITS.capMs;
    expect(tally.nextDeadline()).toBe(cap);
    const verdict = tally.verdict(cap);
    expect(verdict).toMatchObject({ kind: 'slower', software: true, adapter: 'Google SwiftShader' });
    // the timed step has run from 3.5 s to 7 s: a step takes at least 3.5 s, so under 1024 / 3.5 tokens/s
    expect(verdict?.kind === 'slower' && verdict.tokensPerSecond).toBeCloseTo(1024 / 3.5);
    expect(verdict?.kind === 'slower' && verdict.why).toBe('one step took over 3.5 s');
  });

  it('stops at the first timed step of an engine far slower than the other', () => {
    const tally = built(gpuInfo, 9_000, 30_000);
    tally.step(1_000, 10_000); // warm-up
    expect(tally.verdict(10_000)).toBeNull();
    tally.step(1_000, 11_000);
    expect(tally.verdict(11_000)).toMatchObject({ kind: 'measured', steps: 1, tokensPerSecond: 1024 });
    // one at half the rival's speed or more is measured as usual
    const close = built(gpuInfo, 0, 1_500);
    close.step(1_000, 1_000);
    close.step(1_000, 2_000);
    expect(close.verdict(2_000)).toBeNull();
  });

  it('gives up on an engine that takes too long to build, and reports a failure as unavailable', () => {
    const slow = new ProbeTally(0);
    slow.device(gpuInfo, 2_000); // the build's time counts from the device
    expect(slow.verdict(2_000 + PROBE_LIMITS.buildMs - 1)).toBeNull();
    expect(slow.verdict(2_000 + PROBE_LIMITS.buildMs)).toMatchObject({
      kind: 'slower',
      tokensPerSecond: null,
      adapter: 'Google SwiftShader',
    });
    const broken = new ProbeTally(0);
    broken.failed('no adapter');
    broken.failed('a later error');
    expect(broken.verdict(1)).toEqual({ kind: 'unavailable', reason: 'no adapter' });
  });
});

describe('choosing and saying', () => {
  const measured = (tokensPerSecond: number, software = false) =>
    ({ kind: 'measured', tokensPerSecond, steps: 3, adapter: 'x', software }) as const;

  it('picks the faster engine, and whichever can train when one cannot', () => {
    expect(pickEngine({ cpu: measured(30_000), webgpu: measured(190, true) })).toBe('cpu');
    expect(pickEngine({ cpu: measured(3_000), webgpu: measured(200_000) })).toBe('webgpu');
    const slower = { kind: 'slower', tokensPerSecond: 290, why: 'w', adapter: 'x', software: true } as const;
    expect(pickEngine({ cpu: measured(30_000), webgpu: slower })).toBe('cpu');
    const none = { kind: 'unavailable', reason: 'r' } as const;
    expect(pickEngine({ cpu: measured(30), webgpu: none })).toBe('cpu');
    expect(pickEngine({ cpu: none, webgpu: measured(30) })).toBe('webgpu');
    expect(pickEngine({ cpu: none, webgpu: none })).toBeNull();
  });

  it('warns, with both figures, of an engine chosen several times slower than the other', () => {
    const probe = { cpu: measured(8_700), webgpu: measured(250, true) };
    expect(slowChoiceText(probe, 'cpu')).toBeNull();
    expect(slowChoiceText(probe, 'webgpu')).toBe(
      'The GPU (x) measured about 250 tokens/s here, the CPU about 8,700 tokens/s: about 35× slower. ' +
        'The room trains less with it, and leaves a volunteer far slower than the others out of its rounds.',
    );
    // 2× slower is no warning; a speed too slow to measure is
    expect(slowChoiceText({ cpu: measured(8_000), webgpu: measured(4_000) }, 'webgpu')).toBeNull();
    const unmeasured = {
      kind: 'slower',
      tokensPerSecond: null,
      why: 'it took too long to build',
      adapter: 'x',
      software: true,
    } as const;
    expect(slowChoiceText({ cpu: measured(8_000), webgpu: unmeasured }, 'webgpu')).toMatch(
      /^The GPU \(x\) was too slow to measure \(it took too long to build\) here, the CPU about 8,000 tokens\/s\. /,
    );
    expect(slowChoiceText({ cpu: measured(8_000), webgpu: { kind: 'unavailable', reason: 'r' } }, 'webgpu')).toBeNull();
  });

  it('names the GPU by its adapter, once it is known', () => {
    expect(engineLabel('webgpu', measured(900, true))).toBe('GPU (x)');
    const unbuilt = { kind: 'slower', tokensPerSecond: null, why: 'w', adapter: '', software: false } as const;
    expect(engineLabel('webgpu', unbuilt)).toBe('GPU');
    expect(engineLabel('cpu', measured(900))).toBe('CPU');
  });

  it('rounds speeds to two digits', () => {
    expect(roughRate(30_117)).toBe('30,000 tokens/s');
    expect(roughRate(187.4)).toBe('190 tokens/s');
    expect(roughRate(7.6)).toBe('8 tokens/s');
    expect(measureText(measured(1234))).toBe('about 1,200 tokens/s');
    expect(
      measureText({
        kind: 'slower',
        tokensPerSecond: 292,
        why: 'one step took over 3.5 s',
        adapter: '',
        software: true,
      }),
    ).toBe('slower than about 290 tokens/s (one step took over 3.5 s)');
  });
});

describe('the kept result', () => {
  const probe: EngineProbe = {
    key: probeKeyOf({ preset: 'nano' }),
    measuredAt: 1_000,
    cpu: { kind: 'measured', tokensPerSecond: 30_000, steps: 5, adapter: 'CPU (WebAssembly)', software: false },
    webgpu: { kind: 'unavailable', reason: 'no adapter' },
  };

  it('is reused for a while for the same model only, and ignored when malformed', () => {
    const storage = new Map<string, string>();
    const fake = {
      getItem: (k: string) => storage.get(k) ?? null,
      setItem: (k: string, v: string) => storage.set(k, v),
    };
    keepProbe(fake, probe);
    expect(readKeptProbe(fake, probe.key, 2_000)).toEqual(probe);
    expect(readKeptProbe(fake, probeKeyOf({ preset: 'tiny' }), 2_000)).toBeNull();
    expect(readKeptProbe(fake, probe.key, 1_000 + PROBE_LIMITS.keepMs)).toBeNull();
    for (const [key] of storage) storage.set(key, '{"key":"nano:defaultxdefault","cpu":1}');
    expect(readKeptProbe(fake, probe.key, 2_000)).toBeNull();
    for (const [key] of storage) storage.set(key, 'not json');
    expect(readKeptProbe(fake, probe.key, 2_000)).toBeNull();
  });
});
