import { describe, expect, it } from 'vitest';
import {
  activationBytesPerStep,
  idealBubble,
  PIPELINE_SCHEDULES,
  type PipelineSchedule,
  type ScheduleResult,
  scheduleOrder,
  simulateSchedule,
} from './schedule.ts';

const fill = (stages: number, seconds: number) => new Array<number>(stages).fill(seconds);
const label = (ops: { kind: string; micro: number }[]) => ops.map((op) => `${op.kind}${op.micro}`).join(' ');

/** Checks every ordering and dependency rule of the model against a timeline. */
function expectDependenciesHold(
  result: ScheduleResult,
  schedule: PipelineSchedule,
  stages: number,
  micros: number,
  transfer: number,
) {
  const timeline = result.timeline;
  expect(timeline).toHaveLength(stages * micros * 2);
  const at = (stage: number, micro: number, kind: 'F' | 'B') => {
    const found = timeline.find((op) => op.stage === stage && op.micro === micro && op.kind === kind);
    if (!found) throw new Error(`missing ${kind}${micro} on stage ${stage}`);
    return found;
  };
  const orders = scheduleOrder(schedule, stages, micros);
  for (let s = 0; s < stages; s++) {
    const ops = timeline.filter((op) => op.stage === s).sort((a, b) => a.start - b.start);
    expect(label(ops)).toBe(label(orders[s] ?? [])); // runs in its order
    for (const [i, op] of ops.entries()) expect(op.start).toBeGreaterThanOrEqual(ops[i - 1]?.end ?? 0); // one at a time
    for (let m = 0; m < micros; m++) {
      if (s > 0) expect(at(s, m, 'F').start).toBeGreaterThanOrEqual(at(s - 1, m, 'F').end + transfer - 1e-12);
      expect(at(s, m, 'B').start).toBeGreaterThanOrEqual(at(s, m, 'F').end);
      if (s < stages - 1) expect(at(s, m, 'B').start).toBeGreaterThanOrEqual(at(s + 1, m, 'B').end + transfer - 1e-12);
    }
  }
}

describe('scheduleOrder', () => {
  it('writes 1F1B for 2 stages and 3 micro-batches as worked out by hand', () => {
    const orders = scheduleOrder('1f1b', 2, 3);
    expect(orders.map(label)).toEqual(['F0 F1 B0 F2 B1 B2', 'F0 B0 F1 B1 F2 B2']);
    expect(orders[1]?.[2]).toEqual({ stage: 1, micro: 1, kind: 'F' });
  });

  it('writes GPipe as all forwards then all backwards in micro order', () => {
    expect(scheduleOrder('gpipe', 2, 3).map(label)).toEqual(['F0 F1 F2 B0 B1 B2', 'F0 F1 F2 B0 B1 B2']);
  });

  it('caps 1F1B warm-up at the micro-batch count', () => {
    expect(scheduleOrder('1f1b', 4, 2).map(label)).toEqual([
      'F0 F1 B0 B1',
      'F0 F1 B0 B1',
      'F0 F1 B0 B1',
      'F0 B0 F1 B1',
    ]);
  });
});

describe('simulateSchedule', () => {
  it('gives exactly the ideal bubble, the same makespan for both schedules, and the textbook memory at equal times and free links', () => {
    for (let S = 1; S <= 4; S++) {
      for (let M = 1; M <= 8; M++) {
        const steps = PIPELINE_SCHEDULES.map((schedule) => {
          const r = simulateSchedule({ schedule, forwardSeconds: fill(S, 1), backwardSeconds: fill(S, 2), micros: M });
          expect(r.stepSeconds, `${schedule} S=${S} M=${M}`).toBe((M + S - 1) * 3);
          expect(r.bubbleFraction, `${schedule} S=${S} M=${M}`).toBeCloseTo(idealBubble(S, M), 12);
          expect(r.busySeconds).toEqual(fill(S, 3 * M));
          const memory = schedule === 'gpipe' ? fill(S, M) : fill(S, 0).map((_, s) => Math.min(S - s, M));
          expect(r.peakInFlight, `${schedule} S=${S} M=${M}`).toEqual(memory);
          return r.stepSeconds;
        });
        expect(steps[0]).toBe(steps[1]);
      }
    }
  });

  it('keeps every dependency with unequal stage times and slow links', () => {
    for (const schedule of PIPELINE_SCHEDULES) {
      const input = {
        schedule,
        forwardSeconds: [1, 3, 0.5, 2],
        backwardSeconds: [2, 5, 1, 4],
        micros: 6,
        transferSeconds: 0.7,
      };
      const result = simulateSchedule(input);
      expectDependenciesHold(result, schedule, 4, 6, 0.7);
      expect(result.bubbleFraction).toBeGreaterThan(0);
      expect(result.bubbleFraction).toBeLessThan(1);
    }
  });

  it('serialises messages on a link: a transfer slower than compute paces the downstream stage', () => {
    // Stage 0 emits an activation every 1 s but the link needs 3 s per message, so stage 1's
    // forwards start at 4, 7, 10 (not 4, 5, 6).
    const r = simulateSchedule({
      schedule: 'gpipe',
      forwardSeconds: [1, 1],
      backwardSeconds: [1, 1],
      micros: 3,
      transferSeconds: 3,
    });
    expect(r.timeline.filter((op) => op.stage === 1 && op.kind === 'F').map((op) => op.start)).toEqual([4, 7, 10]);
  });

  it('lengthens a single micro-batch step by the 2(S−1) transfers on its critical path', () => {
    for (let S = 1; S <= 4; S++) {
      for (const schedule of PIPELINE_SCHEDULES) {
        const base = { schedule, forwardSeconds: fill(S, 1), backwardSeconds: fill(S, 2), micros: 1 };
        const free = simulateSchedule(base).stepSeconds;
        const slow = simulateSchedule({ ...base, transferSeconds: 0.5 }).stepSeconds;
        expect(slow - free).toBeGreaterThanOrEqual(2 * (S - 1) * 0.5);
      }
    }
  });

  it('ends each stage its optimizer time after its last backward and counts it as busy', () => {
    const r = simulateSchedule({
      schedule: '1f1b',
      forwardSeconds: [1, 1],
      backwardSeconds: [1, 1],
      micros: 2,
      optimizerSeconds: [5, 0],
    });
    // Stage 0's last backward ends at 6 (the 1F1B makespan (M+S−1)(f+b)), then 5 s of AdamW.
    expect(r.stepSeconds).toBe(11);
    expect(r.busySeconds).toEqual([9, 4]);
  });

  it('rejects invalid input with a RangeError naming the field', () => {
    const good = { schedule: '1f1b' as const, forwardSeconds: [1, 1], backwardSeconds: [1, 1], micros: 2 };
    expect(() => simulateSchedule({ ...good, forwardSeconds: [] })).toThrow(RangeError);
    expect(() => simulateSchedule({ ...good, micros: 0 })).toThrow(/micros/);
    expect(() => simulateSchedule({ ...good, micros: 1.5 })).toThrow(/micros/);
    expect(() => simulateSchedule({ ...good, backwardSeconds: [1] })).toThrow(
      /backwardSeconds must have one entry per stage/,
    );
    expect(() => simulateSchedule({ ...good, forwardSeconds: [1, -1] })).toThrow(/forwardSeconds\[1\]/);
    expect(() => simulateSchedule({ ...good, backwardSeconds: [1, Number.NaN] })).toThrow(/backwardSeconds\[1\]/);
    expect(() => simulateSchedule({ ...good, transferSeconds: Number.POSITIVE_INFINITY })).toThrow(/transferSeconds/);
    expect(() => simulateSchedule({ ...good, optimizerSeconds: [0] })).toThrow(/optimizerSeconds/);
    expect(() => simulateSchedule({ ...good, schedule: 'zb' as PipelineSchedule })).toThrow(
      /schedule must be one of gpipe, 1f1b/,
    );
    expect(() => scheduleOrder('gpipe', 0, 1)).toThrow(/stages/);
    expect(() => idealBubble(2, 0)).toThrow(/micros/);
  });
});

describe('activationBytesPerStep', () => {
  it('counts both directions over every hop', () => {
    // 3 hops × 8 micro-batches × 2 directions × (2×256×384 = 196608 values) × 2 bytes = 18874368.
    const bf16 = { stages: 4, micros: 8, microBatch: 2, seqLen: 256, channels: 384, bytesPerValue: 2 as const };
    expect(activationBytesPerStep(bf16)).toBe(18_874_368);
    expect(activationBytesPerStep({ ...bf16, bytesPerValue: 4 })).toBe(37_748_736);
    expect(activationBytesPerStep({ ...bf16, stages: 1 })).toBe(0);
  });
});

describe('idealBubble', () => {
  it('is (S−1)/(M+S−1)', () => {
    expect(idealBubble(1, 4)).toBe(0);
    expect(idealBubble(4, 1)).toBe(0.75);
    expect(idealBubble(4, 13)).toBe(0.1875);
  });
});
