import { describe, expect, it } from 'vitest';
import { TokenEta } from './simulate-eta.ts';

describe('TokenEta (shoal simulate’s progress)', () => {
  it('is the wall time per token since the first report times the tokens left', () => {
    const eta = new TokenEta();
    expect(eta.secondsLeft(0, 0, 1000)).toBeNull();
    eta.note(100, 5_000); // after 5 s of building the room: not a cost per token
    expect(eta.secondsLeft(5_000, 100, 1000)).toBeNull();
    eta.note(200, 6_000);
    expect(eta.secondsLeft(6_000, 200, 1000)).toBe(8); // 10 ms a token, 800 left
    // a burst of cheap steps, then a round that holds the tokens still: the estimate follows the
    // average, not the burst, and grows while nothing moves
    eta.note(600, 6_100);
    expect(eta.secondsLeft(6_100, 600, 1000)).toBeCloseTo(0.88); // 2.2 ms a token
    expect(eta.secondsLeft(10_100, 600, 1000)).toBeCloseTo(4.08); // 10.2 ms
    expect(eta.secondsLeft(20_000, 1000, 1000)).toBe(0);
  });
});
