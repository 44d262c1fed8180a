// Which volunteer trains on which shard, agreed on without talking: rendezvous (highest random
// weight) hashing. Shard s goes to the member whose hash of (seed, epoch, s, member) is highest,
// so the assignment is disjoint and covers every shard, and when a member leaves only its own
// shards move (everyone else's weights are unchanged). Each member walks its shards in one
// per-epoch shuffled order shared by the whole room.

import { assertInteger, fnv1a32, hashWords, wordsOf } from '../hash.ts';

const ASSIGN_DOMAIN = 0x4153_474e; // 'ASGN'
const ORDER_DOMAIN = 0x4f52_4452; // 'ORDR'

export interface EpochKey {
  /** The room's data seed. */
  seed: number;
  epoch: number;
}

const encoder = new TextEncoder();

/** A member id as one 32-bit word: FNV-1a of its UTF-8 bytes. */
export function memberWord(member: string): number {
  return fnv1a32(encoder.encode(member));
}

/** All shard indices 0 … shardCount − 1 in this epoch's order (the same for every member). */
export function epochOrder(shardCount: number, { seed, epoch }: EpochKey): number[] {
  assertInteger('shardCount', shardCount, 0);
  assertInteger('seed', seed, 0);
  assertInteger('epoch', epoch, 0);
  const key = hashWords([ORDER_DOMAIN, ...wordsOf(seed), ...wordsOf(epoch)]);
  const rank = new Float64Array(shardCount);
  for (let shard = 0; shard < shardCount; shard++) rank[shard] = hashWords([key, ...wordsOf(shard)]);
  const order = Array.from({ length: shardCount }, (_, shard) => shard);
  return order.sort((a, b) => (rank[a] as number) - (rank[b] as number) || a - b);
}

/**
 * Each member's shards, in epoch order. Every member appears in the map (possibly with no
 * shards); duplicate ids count once. Ties between members (equal 32-bit weights) go to the
 * smaller id, so the result never depends on the order `members` is given in.
 */
export function assignShards(shardCount: number, members: readonly string[], key: EpochKey): Map<string, number[]> {
  const unique = [...new Set(members)].sort();
  const words = unique.map(memberWord);
  const base = hashWords([ASSIGN_DOMAIN, ...wordsOf(key.seed), ...wordsOf(key.epoch)]);
  const assignment = new Map<string, number[]>(unique.map((member) => [member, []]));
  if (unique.length === 0) return assignment;
  for (const shard of epochOrder(shardCount, key)) {
    const shardKey = hashWords([base, ...wordsOf(shard)]);
    let best = 0;
    let bestWeight = -1;
    for (let m = 0; m < unique.length; m++) {
      const weight = hashWords([shardKey, words[m] as number]);
      if (weight > bestWeight) {
        best = m;
        bestWeight = weight;
      }
    }
    assignment.get(unique[best] as string)?.push(shard);
  }
  return assignment;
}
