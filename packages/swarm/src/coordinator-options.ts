/**
 * What a coordinator is given (the run, the host's member and replica, its deadlines and duties,
 * a resumed run's counts) and what it reports of the room (shoal host --json events, the
 * dashboard).
 */
import type { Fragment } from '@shoal/diloco';
import type { DataLedger, PeerId, RunConfig } from '@shoal/protocol';
import type { Member } from './member.ts';
import type { ReplicaState } from './replica.ts';
import type { MemberSteps } from './room-progress.ts';
import type { ShardDuties } from './shard-duty.ts';

/** What the host reports (shoal host --json events, the dashboard). */
export type CoordinatorEvent =
  | { event: 'peer-joined'; peer: PeerId }
  | { event: 'peer-left'; peer: PeerId; reason: string }
  | {
      event: 'round-opened';
      fragment: number;
      round: number;
      participants: number;
      /** The quantiser, and the rank of a low-rank round (null: dense). */
      codec: string;
      rank: number | null;
      /** Values in the round's payload (the fragment's, or its factors'). */
      payloadValues: number;
    }
  | {
      event: 'round-committed';
      fragment: number;
      round: number;
      participants: number;
      hash: string;
      /** The participants whose hash agreed (the commit's contributors): `participants` of them. */
      contributors: PeerId[];
    }
  | { event: 'round-aborted'; fragment: number; round: number; reason: string };

export interface CoordinatorOptions {
  config: RunConfig;
  member: Member;
  /** The host's own replica (θ_global, m): the base hashes rounds start from. */
  replica: ReplicaState;
  fragments: Fragment[];
  /** A round's owners give up waiting after this long; the coordinator after twice that. */
  deadlineMs?: number;
  onEvent?: (event: CoordinatorEvent) => void;
  /** Appended to an unreachable member's reason (the host knows whether a TURN server is configured). */
  unreachableHint?: string;
  /** The host's shard duties: it referees a shard whose owner and checker disagree or fail. */
  duties?: ShardDuties;
  /** A resumed run: rounds continue from each fragment's last, counters from the saved ones. */
  resume?: {
    fragments: { round: number }[];
    roomTokens: number;
    committedRounds: number;
    abortedRounds: number;
    /** The room's step at the save (absent: an older host's). */
    step?: number;
    /** Each worker's steps at the save (MemberSteps; absent: an older host's). */
    members?: Record<PeerId, MemberSteps>;
    /** A dataset room's ledger at the save. */
    data?: DataLedger;
  };
}
