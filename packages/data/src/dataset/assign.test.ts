import { describe, expect, it } from 'vitest';
import { assignShards, epochOrder } from './assign.ts';

const members = ['alice', 'bob', 'carol', 'dave', 'erin'];

function owners(assignment: Map<string, number[]>): Map<number, string> {
  const owner = new Map<number, string>();
  for (const [member, shards] of assignment) {
    for (const shard of shards) {
      expect(owner.has(shard), `shard ${shard} assigned twice`).toBe(false);
      owner.set(shard, member);
    }
  }
  return owner;
}

describe('assignShards', () => {
  it('is disjoint and covers every shard, for several room sizes', () => {
    for (const shardCount of [1, 7, 64, 1000]) {
      for (const size of [1, 2, 5]) {
        const assignment = assignShards(shardCount, members.slice(0, size), { seed: 3, epoch: 0 });
        expect(owners(assignment).size).toBe(shardCount);
        expect([...assignment.keys()].sort()).toEqual(members.slice(0, size).sort());
      }
    }
  });

  it('is deterministic and does not depend on the order members are listed in', () => {
    const a = assignShards(200, members, { seed: 9, epoch: 2 });
    const b = assignShards(200, [...members].reverse(), { seed: 9, epoch: 2 });
    expect([...a].sort()).toEqual([...b].sort());
  });

  it('spreads shards roughly evenly', () => {
    const assignment = assignShards(5000, members, { seed: 1, epoch: 0 });
    for (const shards of assignment.values()) expect(shards.length).toBeGreaterThan(800);
  });

  it('moves only the leaving member’s shards when a member leaves', () => {
    const key = { seed: 5, epoch: 1 };
    const before = owners(assignShards(500, members, key));
    const after = owners(
      assignShards(
        500,
        members.filter((m) => m !== 'carol'),
        key,
      ),
    );
    for (const [shard, owner] of before) {
      if (owner === 'carol') expect(after.get(shard)).not.toBe('carol');
      else expect(after.get(shard)).toBe(owner);
    }
  });

  it('changes with the epoch and the seed', () => {
    const a = owners(assignShards(300, members, { seed: 1, epoch: 0 }));
    const b = owners(assignShards(300, members, { seed: 1, epoch: 1 }));
    const c = owners(assignShards(300, members, { seed: 2, epoch: 0 }));
    const same = (x: Map<number, string>, y: Map<number, string>) => [...x].filter(([s, m]) => y.get(s) === m).length;
    expect(same(a, b)).toBeLessThan(120);
    expect(same(a, c)).toBeLessThan(120);
  });

  it('lists each member’s shards in the epoch order shared by the room', () => {
    const key = { seed: 4, epoch: 3 };
    const order = epochOrder(100, key);
    expect([...order].sort((x, y) => x - y)).toEqual(Array.from({ length: 100 }, (_, i) => i));
    expect(order).not.toEqual([...order].sort((x, y) => x - y));
    const rank = new Map(order.map((shard, i) => [shard, i]));
    for (const shards of assignShards(100, members, key).values()) {
      const ranks = shards.map((shard) => rank.get(shard) as number);
      expect(ranks).toEqual([...ranks].sort((x, y) => x - y));
    }
    expect(epochOrder(100, { seed: 4, epoch: 4 })).not.toEqual(order);
  });

  it('gives an empty map for an empty room', () => {
    expect(assignShards(10, [], { seed: 0, epoch: 0 }).size).toBe(0);
  });
});
