import { describe, expect, it } from 'vitest';
import type { RoomFigures } from '../store.ts';
import {
  aboutTime,
  countdownText,
  endText,
  firstRoundText,
  progressText,
  risingText,
  statusWords,
  timeLeftMs,
} from './room-progress.ts';

const figures = (patch: Partial<RoomFigures>): RoomFigures => ({
  status: 'running',
  step: 10,
  tokens: 2_560,
  roundsCommitted: 0,
  evalLoss: 5.5,
  tokensPerSecond: 1_000,
  nextRounds: [
    { fragment: 0, round: 1, open: false, steps: 40, etaMs: 20_000 },
    { fragment: 1, round: 1, open: false, steps: 65, etaMs: 32_500 },
  ],
  evalTrend: null,
  endedBy: null,
  totalSteps: 400,
  stepMs: 500,
  volunteers: 2,
  at: 1_000_000,
  ...patch,
});

describe('the room’s progress in words', () => {
  it('says when the first round comes, and ticks down between views', () => {
    expect(firstRoundText(figures({}), 1_000_000)).toBe('First round in ~40 steps (~20 s).');
    expect(firstRoundText(figures({}), 1_005_000)).toBe('First round in ~40 steps (~15 s).');
    expect(firstRoundText(figures({}), 1_030_000)).toBe('First round due now.');
    expect(firstRoundText(figures({ status: 'waiting' }), 0)).toBe('First round ~40 steps after Start.');
    const unmeasured = figures({ nextRounds: [{ fragment: 0, round: 1, open: false, steps: 50, etaMs: null }] });
    expect(firstRoundText(unmeasured, 0)).toMatch(/~50 steps \(the volunteers’ speed is not known yet\)/);
    const open = figures({ nextRounds: [{ fragment: 1, round: 1, open: true, steps: 0, etaMs: 0 }] });
    expect(firstRoundText(open, 0)).toMatch(/First round open/);
    // after the first commit, the countdowns take over
    expect(firstRoundText(figures({ roundsCommitted: 1 }), 0)).toBeNull();
  });

  it('counts each fragment down', () => {
    const [next] = figures({}).nextRounds;
    if (!next) throw new Error('no round');
    expect(countdownText(next, 1_000_000, 1_002_000)).toBe('round 1 in ~18 s');
    expect(countdownText({ ...next, open: true }, 0, 0)).toBe('round 1 open');
    expect(countdownText({ ...next, etaMs: null }, 0, 0)).toBe('round 1 in ~40 steps');
    expect(aboutTime(200_000)).toBe('~3 min');
  });

  it('flags a rising validation loss and says why a run ended', () => {
    expect(risingText(null)).toBeNull();
    expect(risingText({ best: 2.09, bestStep: 400, latest: 2.3, rising: false })).toBeNull();
    expect(risingText({ best: 2.09, bestStep: 400, latest: 2.35, rising: true })).toBe(
      'Validation loss is rising: 3.02 → 3.39 bits/byte (2.09 → 2.35 nats) since step 400 — the model may be overfitting this text.',
    );
    expect(endText(figures({}))).toBeNull();
    expect(endText(figures({ status: 'stopped', endedBy: 'schedule' }))).toBe(
      'The learning-rate schedule’s 400 steps are done: the run stopped by itself.',
    );
    expect(endText(figures({ status: 'stopped', endedBy: 'host' }))).toBe('The host stopped the run.');
  });

  it('says the step of the schedule, the tokens and the time left at the measured speed', () => {
    // 390 steps left at 500 ms a step: 195 s, ticking down while the room trains
    expect(timeLeftMs(figures({}), 1_000_000)).toBe(195_000);
    expect(timeLeftMs(figures({}), 1_015_000)).toBe(180_000);
    expect(progressText(figures({}), 1_015_000)).toBe('Step 10 of 400 · 2.56k tokens · ~3 min left');
    // paused: it does not run down
    expect(timeLeftMs(figures({ status: 'paused' }), 1_015_000)).toBe(195_000);
    expect(progressText(figures({ status: 'paused' }), 0)).toBe(
      'Step 10 of 400 · 2.56k tokens · paused (~3 min left at the last speed)',
    );
    expect(progressText(figures({ stepMs: null, volunteers: 0 }), 0)).toBe(
      'Step 10 of 400 · 2.56k tokens · waiting for volunteers',
    );
    expect(progressText(figures({ stepMs: null }), 0)).toBe(
      'Step 10 of 400 · 2.56k tokens · time left: measuring the volunteers’ speed…',
    );
    expect(progressText(figures({ status: 'waiting', step: 0, tokens: 0, stepMs: null }), 0)).toBe(
      'Step 0 of 400 · 0 tokens · the time left is known once volunteers train',
    );
    expect(progressText(figures({ status: 'stopped', step: 400 }), 0)).toBe('Step 400 of 400 · 2.56k tokens · ended');
    expect(timeLeftMs(figures({ step: 420 }), 1_000_000)).toBe(0);
    expect(progressText(figures({ totalSteps: null }), 1_000_000)).toBe('Step 10 · 2.56k tokens');
    expect(aboutTime(3 * 3600_000)).toBe('~3 h');
    expect(aboutTime(150 * 60_000)).toBe('~2.5 h');
  });

  it('says a started room without volunteers waits for them, and a paused one counts nothing down', () => {
    expect(statusWords('running', 0)).toEqual({ words: 'waiting for volunteers', tone: 'waiting' });
    expect(statusWords('running', 2)).toEqual({ words: 'training', tone: 'running' });
    expect(statusWords('paused', 0)).toEqual({ words: 'paused', tone: 'paused' });
    expect(firstRoundText(figures({ status: 'paused' }), 1_000_000)).toBe(
      'First round ~40 steps after the room resumes.',
    );
  });
});
