/**
 * What a worker tells its coordinator: its hello (who it is, what its replica holds) and its
 * heartbeats (its progress and figures, from which the coordinator opens rounds and the
 * dashboard draws the room).
 */
import type { Capabilities, HeartbeatMessage, HelloMessage, RunConfig, ShardPosition } from '@shoal/protocol';
import type { Member } from './member.ts';
import type { ReplicaNode } from './replica-node.ts';
import type { ShardDuties } from './shard-duty.ts';
import type { WorkerMetrics } from './worker-options.ts';
import type { WorkerRounds } from './worker-rounds.ts';

/** A worker's hello: the fragments its replica follows, at the round and hash it holds them. */
export function helloOf(capabilities: Capabilities, replica: ReplicaNode | null, innerStep: number): HelloMessage {
  return {
    kind: 'hello',
    role: 'worker',
    client: 'shoal-swarm 0.1.0',
    capabilities,
    // a pipeline stage holds its stage's fragments only
    holds:
      replica?.state.fragments.flatMap((f, fragment) =>
        replica?.state.follows(fragment) ? [{ fragment, round: f.round, hash: f.hash }] : [],
      ) ?? [],
    innerStep,
  };
}

/** What a worker's heartbeat reports, where it has it (its rounds and duties once it has the run's config). */
export interface HeartbeatSources {
  member: Member;
  metrics: WorkerMetrics;
  config: RunConfig | null;
  rounds: WorkerRounds | null;
  duties: ShardDuties | null;
  /** Its contributions that shard owners refused, by reason. */
  rejectedContributions: ReadonlyMap<string, number>;
  /** A dataset room: where it stands in the shards it drew from. */
  data: ShardPosition[] | undefined;
}

export function heartbeatOf(o: HeartbeatSources): HeartbeatMessage {
  const { member, metrics, rounds } = o;
  const waitingFor = o.duties?.waitingFor() ?? [];
  return {
    kind: 'heartbeat',
    innerStep: metrics.innerStep,
    tokensSinceContribution: rounds?.unsentTokens() ?? [],
    loss: metrics.loss,
    tokensPerSecond: metrics.tokensPerSecond,
    bytesSent: member.bytesSent,
    bytesReceived: member.bytesReceived,
    stalls: metrics.stalls,
    reachable: member.transport.peers(),
    rejectedContributions: Object.fromEntries(o.rejectedContributions),
    ...(o.config?.diloco.lowRank && rounds ? { lowRankErrors: rounds.lowRankErrors } : {}),
    ...(o.data ? { data: o.data } : {}),
    ...(waitingFor.length > 0 ? { waitingFor } : {}),
  };
}
