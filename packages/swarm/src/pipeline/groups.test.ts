import { describe, expect, it } from 'vitest';
import { PipelineGroups } from './groups.ts';

describe('PipelineGroups', () => {
  it('fills groups slot by slot and trains only complete ones', () => {
    const groups = new PipelineGroups(2);
    expect(groups.add('a')).toMatchObject({ group: 0, stage: 0 });
    expect(groups.complete('a')).toBe(false);
    expect(groups.add('b')).toMatchObject({ group: 0, stage: 1 });
    expect(groups.complete('a') && groups.complete('b')).toBe(true);
    expect(groups.add('c')).toMatchObject({ group: 1, stage: 0 });
    expect(groups.add('d')).toMatchObject({ group: 1, stage: 1 });
    expect(groups.add('a')).toEqual(groups.slot('a')); // a repeated hello keeps its slot
    expect(groups.list().map((g) => g.slots)).toEqual([
      ['a', 'b'],
      ['c', 'd'],
    ]);
  });

  it('gives a replacement the empty slot, with a new version', () => {
    const groups = new PipelineGroups(2);
    for (const peer of ['a', 'b', 'c', 'd']) groups.add(peer);
    const before = groups.slot('c')?.version as number;
    expect(groups.remove('c')).toEqual([1]);
    expect(groups.complete('d')).toBe(false);
    expect(groups.add('e')).toMatchObject({ group: 1, stage: 0 });
    expect(groups.slot('e')?.version).toBeGreaterThan(before);
    expect(groups.slot('d')?.version).toBe(groups.slot('e')?.version);
    expect(groups.complete('d')).toBe(true);
    expect(groups.slot('c')).toBeNull();
    expect(groups.remove('c')).toEqual([]);
  });

  it('re-forms incomplete groups so the spares complete an earlier one', () => {
    const groups = new PipelineGroups(3);
    for (const peer of ['a0', 'a1', 'a2', 'b0', 'b1', 'b2']) groups.add(peer);
    groups.remove('b0');
    groups.remove('b2');
    expect(groups.remove('a1')).toEqual([0, 1]); // b1 moves into group 0's stage 1
    expect(groups.list().map((g) => g.slots)).toEqual([['a0', 'b1', 'a2']]);
    expect(groups.complete('b1')).toBe(true);
    expect(groups.slot('b1')).toMatchObject({ group: 0, stage: 1 });
  });

  it('merges two incomplete groups that complete each other, when their members are linked', () => {
    const groups = new PipelineGroups(2);
    groups.add('a');
    groups.add('b', undefined, () => false); // no channel to a yet: a group of its own, at stage 0
    groups.remove('a');
    groups.add(
      'c',
      (s) => s === 1,
      (x, y) => !(x === 'c' && y === 'b'),
    ); // group 0's stage 1
    expect(groups.list().map((g) => g.slots)).toEqual([
      [null, 'c'],
      ['b', null],
    ]);
    expect(groups.reform(() => false)).toEqual([]);
    expect(groups.reform()).toEqual([0, 1]);
    expect(groups.list().map((g) => g.slots)).toEqual([['b', 'c']]);
    expect(groups.complete('b') && groups.complete('c')).toBe(true);
  });

  it('places a member only in a stage that fits it', () => {
    const groups = new PipelineGroups(2);
    expect(groups.add('small', (stage) => stage === 1)).toMatchObject({ group: 0, stage: 1 });
    expect(groups.add('big')).toMatchObject({ group: 0, stage: 0 });
    expect(groups.add('none', () => false)).toBeNull();
    // a newcomer without a channel to a group's members goes elsewhere, though a slot is free there
    const linked = new PipelineGroups(2);
    linked.add('a');
    expect(linked.add('far', undefined, (x, y) => !(x === 'far' && y === 'a'))).toMatchObject({ group: 1, stage: 0 });
    expect(linked.add('near')).toMatchObject({ group: 0, stage: 1 });
    expect(() => new PipelineGroups(1)).toThrow(/2 or more stages/);
  });
});
