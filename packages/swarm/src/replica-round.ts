/**
 * A replica's round in flight (replica.ts): its shard slots as results arrive, which result of a
 * shard its replicas apply, and what adding a result or a commit comes to.
 */
import type { Codec, FragmentProjection } from '@shoal/diloco';
import type { ShardRange } from '@shoal/protocol';

/**
 * One shard's results as they arrive: the owner's payload (decoded) and result hash, the
 * checker's hash, and the host's (referee's) result, which replaces both.
 */
export interface ShardSlot {
  /** Who may check it: without a checker (one participant, an older host) the owner's result stands. */
  checked: boolean;
  owner: { values: Float32Array; hash: string; accepted: string[]; bound: number } | null;
  checkHash: string | null;
  /** The peers the checker says it aggregated (its verdicts; bound by its hash). */
  checkAccepted: string[];
  referee: { values: Float32Array; accepted: string[]; bound: number } | null;
}

export interface PendingRound {
  fragment: number;
  round: number;
  codec: Codec;
  /** A low-rank round's projection, built from m[p] at its open: shards carry its payload. */
  projection: FragmentProjection | null;
  shards: ShardRange[];
  slots: ShardSlot[];
  tentative: { theta: Float32Array; momentum: Float32Array; hash: string } | null;
  /** The aggregate was out of bounds or not finite: no hash is reported, the round cannot commit here. */
  refused: string | null;
}

/** A shard result's values, and the largest |value| its encoding allows (Infinity: not known). */
export type Decoded = { values: Float32Array; bound: number };

/** What a round's outer step gives: θ' and m' with their hash, or why Δ̄ or θ' cannot be applied. */
export type StepOutcome =
  | { theta: Float32Array; momentum: Float32Array; hash: string }
  | { reason: 'non-finite' | 'magnitude'; message: string };

/** An aggregator's claim about a shard: the hash of its result and the peers it aggregated. */
export interface ShardClaim {
  hash: string;
  accepted: string[];
}

/** Which of a shard's aggregators a result comes from (the replica node tells by the sender). */
export type ShardSource = 'owner' | 'checker' | 'referee';

/** `shards`: the round's shard count, so callers can tell how far the all-gather is. */
export type ShardResultOutcome =
  | { status: 'waiting'; missing: number; shards: number }
  | { status: 'complete'; hash: string; shards: number }
  /** The owner's and the checker's hashes differ: the shard waits for the referee. */
  | { status: 'disputed'; ownerHash: string; checkHash: string }
  /** Every shard is in, but the aggregate fails the bounds: no hash for this round. */
  | { status: 'refused'; reason: 'non-finite' | 'magnitude'; message: string }
  | { status: 'ignored'; reason: string };

/** 'waiting': the round's results are still arriving; the caller applies the commit once they are in. */
export type CommitOutcome = 'adopted' | 'diverged' | 'not-ready' | 'waiting';

export const key = (fragment: number, round: number) => `${fragment}:${round}`;

/** The values a shard's replicas apply: the referee's, or the owner's once its checker agrees. */
export function verifiedResult(slot: ShardSlot): { values: Float32Array; accepted: string[]; bound: number } | null {
  if (slot.referee) return slot.referee;
  if (!slot.owner) return null;
  if (!slot.checked) return slot.owner;
  return slot.checkHash === slot.owner.hash ? slot.owner : null;
}

export const verifiedValues = (slot: ShardSlot) => verifiedResult(slot)?.values ?? null;
