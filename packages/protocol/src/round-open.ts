/**
 * round-open (coordinator → every replica): the schema of its body, and how a fragment is cut
 * into shards for the collective (docs/design.md, "The collective").
 *
 * Shards are contiguous ranges [start, end) of the fragment's contiguous form (values, not
 * bytes), in ascending order, covering [0, fragmentSize) without gap or overlap. Every start is
 * a multiple of the codec block, so each shard's encoding is a slice of the whole fragment's
 * encoding (diloco codec.ts) and the owner's result decodes on its own; only the last shard may
 * end off the block grid (at fragmentSize). One shard per owner, every owner a participant.
 */
import { MAX_LOW_RANK } from '@shoal/diloco';
import { z } from 'zod';
import { MAX_PARTICIPANTS } from './limits.ts';
import {
  blockSizeSchema,
  countSchema,
  deadlineSchema,
  hashHexSchema,
  offsetSchema,
  peerIdSchema,
  peerListSchema,
} from './schemas.ts';

export interface ShardRange {
  start: number;
  end: number;
}

export interface Shard extends ShardRange {
  owner: string;
  /**
   * A second participant that aggregates the same shard and reports only its result's hash
   * (design in docs/hostile-volunteers.md): a replica applies the owner's
   * result once the checker's hash agrees. Absent in rooms of older hosts.
   */
  checker?: string;
}

/**
 * Cuts `fragmentSize` values into at most `count` block-aligned shards of near-equal size: the
 * ⌈size/B⌉ blocks are dealt out so shards differ by at most one block, the larger ones first.
 * Fewer shards than `count` when the fragment has fewer blocks than that.
 */
export function shardRanges(fragmentSize: number, blockSize: number, count: number): ShardRange[] {
  for (const [name, value] of [
    ['fragmentSize', fragmentSize],
    ['blockSize', blockSize],
    ['count', count],
  ] as const) {
    if (!Number.isSafeInteger(value) || value < 1) throw new RangeError(`${name} must be an integer ≥ 1, got ${value}`);
  }
  const blocks = Math.ceil(fragmentSize / blockSize);
  const shards = Math.min(count, blocks);
  const small = Math.floor(blocks / shards);
  const larger = blocks % shards;
  const ranges: ShardRange[] = [];
  let block = 0;
  for (let k = 0; k < shards; k++) {
    const start = block * blockSize;
    block += k < larger ? small + 1 : small;
    ranges.push({ start, end: Math.min(block * blockSize, fragmentSize) });
  }
  return ranges;
}

/** The first thing wrong with a shard table, or null. Exported for the coordinator's own checks. */
export function shardTableProblem(
  shards: readonly Shard[],
  participants: readonly string[],
  fragmentSize: number,
  blockSize: number,
): { path: (string | number)[]; message: string } | null {
  const members = new Set(participants);
  const owners = new Set<string>();
  let expectedStart = 0;
  for (const [k, shard] of shards.entries()) {
    if (shard.start !== expectedStart) {
      return {
        path: ['shards', k, 'start'],
        message: `shard ${k} starts at ${shard.start}, expected ${expectedStart}`,
      };
    }
    if (shard.start % blockSize !== 0) {
      return { path: ['shards', k, 'start'], message: `shard ${k} starts off the ${blockSize}-value block grid` };
    }
    if (shard.end <= shard.start) return { path: ['shards', k, 'end'], message: `shard ${k} is empty` };
    if (!members.has(shard.owner)) {
      return { path: ['shards', k, 'owner'], message: `shard ${k}'s owner is not a participant` };
    }
    if (owners.has(shard.owner)) return { path: ['shards', k, 'owner'], message: `shard ${k}'s owner has two shards` };
    if (shard.checker !== undefined && shard.checker === shard.owner) {
      return { path: ['shards', k, 'checker'], message: `shard ${k}'s checker is its owner` };
    }
    owners.add(shard.owner);
    expectedStart = shard.end;
  }
  if (expectedStart !== fragmentSize) {
    return { path: ['shards'], message: `shards cover [0, ${expectedStart}), the fragment has ${fragmentSize} values` };
  }
  return null;
}

const shardSchema = z.object({
  owner: peerIdSchema,
  checker: peerIdSchema.optional(),
  start: offsetSchema,
  end: offsetSchema,
});

/** Round (fragment, round) opens with codec (header) over these participants and shards. */
export const roundOpenBody = z
  .object({
    /** Members that contribute; every other replica only receives the result. */
    participants: peerListSchema(MAX_PARTICIPANTS).min(1),
    shards: z.array(shardSchema).min(1).max(MAX_PARTICIPANTS),
    /** Values in the fragment's contiguous form. */
    fragmentSize: z.int().min(1),
    /** The codec's block (1 for fp32 and bf16); shard starts are multiples of it. */
    blockSize: blockSizeSchema,
    /** Milliseconds from receipt until the coordinator gives up on the round (clocks are not shared). */
    deadlineMs: deadlineSchema,
    /** The room's total tokens: the inner learning-rate schedule's position. */
    roomTokens: countSchema,
    /** hash(θ_global[p] ‖ m[p]) that the round starts from; a replica holding another must resync. */
    baseHash: hashHexSchema,
    /** Contribution weights above this are capped (weightCapFactor × the median tokens, from heartbeats). */
    maxWeight: z.int().min(1),
    /**
     * Per participant (same order), the most tokens the coordinator has seen it train since it was
     * last named for this fragment (minor 2): a claimed weight is capped at it too.
     */
    weightCaps: z.array(z.int().min(1)).max(MAX_PARTICIPANTS).optional(),
    /**
     * Per participant (same order), its time per inner step, ms (minor 4): what its heartbeats
     * claim, bounded by what the coordinator measured between them. A worker faster than the
     * others waits that much later for their rounds (docs/design.md, "Bounded staleness").
     */
    stepMs: z.array(z.number().positive().max(3_600_000)).max(MAX_PARTICIPANTS).optional(),
    /**
     * A low-rank round (minor 5, docs/lowrank.md): each 2-D tensor of the fragment travels as its
     * factor at this rank against a basis from m[p], on this side; `fragmentSize` is then the
     * payload's values (`lowRankPayloadSize`) and `codec` the factors' quantiser.
     */
    lowRank: z.object({ rank: z.int().min(1).max(MAX_LOW_RANK), side: z.enum(['right', 'left']) }).optional(),
  })
  .superRefine((body, context) => {
    const problem = shardTableProblem(body.shards, body.participants, body.fragmentSize, body.blockSize);
    if (problem) context.addIssue({ code: 'custom', ...problem });
    if (body.weightCaps && body.weightCaps.length !== body.participants.length) {
      context.addIssue({ code: 'custom', path: ['weightCaps'], message: 'one cap per participant' });
    }
    if (body.stepMs && body.stepMs.length !== body.participants.length) {
      context.addIssue({ code: 'custom', path: ['stepMs'], message: 'one step time per participant' });
    }
  });
