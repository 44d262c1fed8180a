import { describe, expect, it } from 'vitest';
import { SharedRounds } from './shared-rounds.ts';

const bytes = (...values: number[]) => Uint8Array.from(values);

describe('SharedRounds (what the replicas of a simulated room compute once)', () => {
  it('gives a result to the next caller only for the same key and the same bytes, in any buffer', () => {
    const memo = new SharedRounds();
    const scope = { fragment: 0, round: 1 };
    let computed = 0;
    const compute = () => ++computed;
    expect(memo.recall(scope, 'decoded 0', [bytes(1, 2, 3)], compute)).toBe(1);
    // the same bytes delivered in another buffer (a copy per send, or the sender's own): shared
    expect(memo.recall(scope, 'decoded 0', [bytes(1, 2, 3)], compute)).toBe(1);
    // one byte apart (an owner that sends each replica its own result): computed apart, and kept apart
    expect(memo.recall(scope, 'decoded 0', [bytes(1, 2, 4)], compute)).toBe(2);
    expect(memo.recall(scope, 'decoded 0', [bytes(1, 2, 4)], compute)).toBe(2);
    expect(memo.recall(scope, 'decoded 0', [bytes(1, 2, 3)], compute)).toBe(1);
    // another key, fewer bytes, or another round of the fragment: not the same inputs
    expect(memo.recall(scope, 'decoded 1', [bytes(1, 2, 3)], compute)).toBe(3);
    expect(memo.recall(scope, 'decoded 0', [bytes(1, 2)], compute)).toBe(4);
    expect(memo.recall({ fragment: 1, round: 1 }, 'decoded 0', [bytes(1, 2, 3)], compute)).toBe(5);
    expect([memo.hits, memo.misses]).toEqual([3, 5]);
  });

  it("lets a fragment's older round go at its next, and keeps nothing for a replica that lags", () => {
    const memo = new SharedRounds();
    let computed = 0;
    const compute = () => ++computed;
    memo.recall({ fragment: 0, round: 1 }, 'step', [], compute);
    memo.recall({ fragment: 0, round: 2 }, 'step', [], compute);
    expect(memo.recall({ fragment: 0, round: 1 }, 'step', [], compute)).toBe(3);
    expect(memo.recall({ fragment: 0, round: 1 }, 'step', [], compute)).toBe(4);
    expect(memo.recall({ fragment: 0, round: 2 }, 'step', [], compute)).toBe(2);
  });

  it('hands a result off once (owner to checker), and keeps nothing of a compute that throws', () => {
    const memo = new SharedRounds();
    const scope = { fragment: 0, round: 1 };
    let computed = 0;
    const compute = () => ++computed;
    expect(memo.handOff(scope, 'aggregate', [bytes(7)], compute)).toBe(1);
    expect(memo.handOff(scope, 'aggregate', [bytes(7)], compute)).toBe(1);
    expect(memo.handOff(scope, 'aggregate', [bytes(7)], compute)).toBe(2);
    expect(() =>
      memo.recall(scope, 'bad', [], () => {
        throw new RangeError('no');
      }),
    ).toThrow(/no/);
    expect(memo.recall(scope, 'bad', [], compute)).toBe(3);
  });

  it('names objects by identity, never one name for two', () => {
    const memo = new SharedRounds();
    const a = new Float32Array(4);
    const b = new Float32Array(4);
    expect(memo.id(a)).toBe(memo.id(a));
    expect(memo.id(a)).not.toBe(memo.id(b));
  });
});
