import { describe, expect, it } from 'vitest';
import type { VolunteerStats } from '../runtime/messages.ts';
import { ownColumns, ownPointOf } from './own-series.ts';

const stats = (patch: Partial<VolunteerStats>) =>
  ({ phase: 'training', loss: 2, tokensPerSecond: 900, ...patch }) as VolunteerStats;

describe('a volunteer’s own progress over time', () => {
  it('records points from Start on, a paused volunteer at 0 tok/s', () => {
    expect(ownPointOf(stats({ phase: 'waiting' }), 1)).toBeNull();
    expect(ownPointOf(stats({}), 5)).toEqual({ at: 5, loss: 2, tokensPerSecond: 900 });
    expect(ownPointOf(stats({ phase: 'paused' }), 6)).toEqual({ at: 6, loss: 2, tokensPerSecond: 0 });
  });

  it('draws the loss in bits per byte and the speed, x in seconds since the first point', () => {
    const { loss, speed } = ownColumns([
      { at: 10_000, loss: null, tokensPerSecond: 0 },
      { at: 12_500, loss: Math.LN2, tokensPerSecond: 800 },
    ]);
    expect(loss).toEqual([
      [0, 2.5],
      [undefined, 1],
    ]);
    expect(speed).toEqual([
      [0, 2.5],
      [0, 800],
    ]);
  });
});
