/**
 * When a round commits, and whom its failure is blamed on (docs/design.md, "Apply, commit,
 * abort"; docs/hostile-volunteers.md). Pure: the coordinator gathers the reports and acts on
 * what these return.
 */
import type { PeerId } from '@shoal/protocol';
import type { ShardClaim } from './replica.ts';

export interface Tally {
  /** The participants still in the room. */
  live: PeerId[];
  /** Those of them whose hash is the host's. */
  agreeing: PeerId[];
  /** A strict majority of the live participants and the host agree, and the quorum is met. */
  commits: boolean;
}

/**
 * The live participants, and those of them whose hash is the host's. A round commits on a strict
 * majority of live participants and the host together (the host among them) that is also at
 * least `quorum` of all participants named.
 */
export function tally(
  participants: readonly PeerId[],
  isLive: (peer: PeerId) => boolean,
  reports: ReadonlyMap<PeerId, string>,
  hostHash: string | null,
  quorum: number,
): Tally {
  const live = participants.filter(isLive);
  const agreeing = live.filter((p) => hostHash !== null && reports.get(p) === hostHash);
  const majority = hostHash !== null && 2 * (agreeing.length + 1) > live.length + 1;
  return { live, agreeing, commits: majority && agreeing.length >= quorum * participants.length };
}

/**
 * How long stragglers may still report once a majority agrees: twice as long as the round took
 * so far, at least 2 s, at most the deadline. Generous: a silent member costs only this one round
 * (it is benched after it), while an honest one on a busy machine must not be benched for
 * answering a little late.
 */
export function graceMs(deadlineMs: number, elapsedMs: number): number {
  return Math.min(deadlineMs, Math.max(2_000, 2 * elapsedMs));
}

/** Why a round that did not commit aborted. */
export function abortReason(
  why: 'complete' | 'grace' | 'deadline',
  hostHash: string | null,
  reports: ReadonlyMap<PeerId, string>,
): 'deadline' | 'hash-disagreement' | 'quorum' {
  if (why === 'deadline' && hostHash === null) return 'deadline';
  return new Set(reports.values()).size > 1 ? 'hash-disagreement' : 'quorum';
}

export interface Fault {
  peer: PeerId;
  why: string;
}

/**
 * At a commit: a live participant with no hash report, or whose Δ is in no verified shard of the
 * round (it sent nothing, or only refused bytes), missed it. Those excused (they found themselves
 * behind after the open) did not.
 */
export function roundMisses(
  label: string,
  live: readonly PeerId[],
  excused: ReadonlySet<PeerId>,
  reports: ReadonlyMap<PeerId, string>,
  contributors: ReadonlySet<PeerId>,
): Fault[] {
  const faults: Fault[] = [];
  for (const peer of live) {
    if (excused.has(peer)) continue;
    if (!reports.has(peer)) faults.push({ peer, why: `reported no hash for ${label}` });
    else if (!contributors.has(peer)) faults.push({ peer, why: `contributed nothing to ${label}` });
  }
  return faults;
}

/**
 * The referee's result for a shard is in. An owner or checker is at fault for a wrong aggregate
 * only when the other of the two reproduced the referee's result exactly and it, from the same
 * contributors, did not: two of three agree, so the third computed wrong. Otherwise (one of them
 * silent, other contributors, or a contributor that sent them different bytes) nobody is blamed:
 * without the contributions' own hashes nobody can tell who lied, and the referee's result stands.
 */
export function aggregateFaults(
  label: string,
  shard: { owner: PeerId; checker?: PeerId },
  heard: { owner: ShardClaim | null; checker: ShardClaim | null },
  referee: ShardClaim,
): Fault[] {
  const sameInputs = (claim: ShardClaim) => claim.accepted.join('\n') === referee.accepted.join('\n');
  const right = (claim: ShardClaim | null) => claim !== null && claim.hash === referee.hash;
  const wrong = (claim: ShardClaim | null) => claim !== null && sameInputs(claim) && claim.hash !== referee.hash;
  const faults: Fault[] = [];
  if (wrong(heard.owner) && right(heard.checker))
    faults.push({ peer: shard.owner, why: `wrong aggregate in ${label}` });
  if (shard.checker && wrong(heard.checker) && right(heard.owner)) {
    faults.push({ peer: shard.checker, why: `wrong check in ${label}` });
  }
  return faults;
}
