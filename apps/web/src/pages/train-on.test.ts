import { describe, expect, it } from 'vitest';
import { endedBySchedule, parseScheduleSteps, proposedScheduleSteps, trainOnText } from './train-on.ts';

describe('training on from a finished room', () => {
  it('knows a room its schedule ended, from its record or, in an older record, its checkpoint', () => {
    const info = { step: 400, totalSteps: 400 };
    expect(endedBySchedule({ status: 'stopped', endedBy: 'schedule' }, null)).toBe(true);
    expect(endedBySchedule({ status: 'stopped', endedBy: 'host' }, info)).toBe(false);
    expect(endedBySchedule({ status: 'stopped' }, info)).toBe(true);
    expect(endedBySchedule({ status: 'stopped' }, { step: 120, totalSteps: 400 })).toBe(false);
    expect(endedBySchedule({ status: 'stopped' }, { step: 400 })).toBe(false);
    expect(endedBySchedule({ status: 'paused' }, info)).toBe(false);
  });

  it('proposes twice the schedule and accepts only a length past the checkpoint', () => {
    expect(proposedScheduleSteps({ step: 408, totalSteps: 400 })).toBe(800);
    expect(proposedScheduleSteps({ step: 408 })).toBe(816);
    expect(parseScheduleSteps('800', { step: 408 })).toEqual({ steps: 800 });
    expect(parseScheduleSteps('408', { step: 408 })).toEqual({
      error: 'More than 408: the checkpoint is at that step already.',
    });
    expect(parseScheduleSteps('1.5', { step: 408 })).toEqual({ error: 'A whole number of steps.' });
    expect(parseScheduleSteps('', { step: 408 })).toEqual({ error: 'A whole number of steps.' });
  });

  it('says what the lengthened schedule does to the learning rate', () => {
    expect(trainOnText({ step: 400, totalSteps: 400 }, 800)).toMatch(
      /^The room goes on from step 400 on a schedule of 800 steps \(it was 400\): the learning rate rises again/,
    );
  });
});
