/**
 * The host (docs/design.md, "The host is a replica"): the coordinator plus a replica of
 * θ_global and m that follows every round whether or not it trains, evaluates validation loss on
 * θ_global with its own engine, and serves state to late joiners. `shoal host`, the dashboard
 * and the simulator all run one.
 */
import { buildFragments, createFragmentHasher, type Fragment } from '@shoal/diloco';
import { buildLayout, initParameters } from '@shoal/model';
import type { RoomRunState, RunConfig } from '@shoal/protocol';
import { Coordinator, type CoordinatorEvent } from './coordinator.ts';
import type { Member } from './member.ts';
import { ReplicaState, type VectorInterner } from './replica.ts';
import { ReplicaNode } from './replica-node.ts';
import type { RoundMemo } from './round-memo.ts';
import { ShardDuties } from './shard-duty.ts';

export interface HostOptions {
  member: Member;
  config: RunConfig;
  /** θ_global to start from (a checkpoint); the seeded init when omitted. */
  params?: Float32Array;
  momentum?: Float32Array;
  /**
   * Take a saved run up again (with `params` and `momentum` from its checkpoint): each fragment's
   * last committed round and hash, which the weights and momentum must reproduce, and the room's
   * counters.
   */
  resume?: Pick<
    RoomRunState,
    'fragments' | 'roomTokens' | 'step' | 'members' | 'committedRounds' | 'abortedRounds' | 'data'
  >;
  deadlineMs?: number;
  /** Appended to an unreachable member's reason in the roster. */
  unreachableHint?: string;
  onEvent?: (event: CoordinatorEvent) => void;
  /** Shares its replica's vectors with the other replicas of this process (the simulator). */
  vectors?: VectorInterner;
  /** Shares its replica's and its shard duties' work with the others of this process (the simulator). */
  memo?: RoundMemo;
}

export class Host {
  private constructor(
    readonly member: Member,
    readonly config: RunConfig,
    readonly fragments: Fragment[],
    readonly replica: ReplicaNode,
    readonly coordinator: Coordinator,
  ) {}

  static async create(options: HostOptions): Promise<Host> {
    const { member, config } = options;
    const layout = buildLayout(config.model);
    const fragments = buildFragments(layout, config.diloco.fragments, config.diloco.fragmentMode);
    const hasher = await createFragmentHasher(config.diloco.hashAlgorithm);
    const state = ReplicaState.forRun(config, {
      fragments,
      params: options.params ?? initParameters(layout, config.train.seed),
      hasher,
      momentum: options.momentum,
      vectors: options.vectors,
      memo: options.memo,
    });
    // The host referees shards whose owner and checker disagree or fail (docs/hostile-volunteers.md).
    const duties = new ShardDuties({
      member,
      hasher,
      config,
      replicas: () => member.transport.peers(),
      departed: () => new Set(),
      memo: options.memo,
    });
    member.on('contribution', (from, message) => duties.onContribution(from, message));
    const { resume } = options;
    if (resume) {
      if (resume.fragments.length !== state.fragments.length)
        throw new Error(`the run state has ${resume.fragments.length} fragments, the run ${state.fragments.length}`);
      for (const [p, saved] of resume.fragments.entries()) {
        const fragment = state.fragment(p);
        if (fragment.hash !== saved.hash) {
          throw new Error(
            `fragment ${p}: the weights and momentum hash to ${fragment.hash}, the run state says ${saved.hash} ` +
              '(the two files are not from the same save)',
          );
        }
        fragment.round = saved.round;
      }
    }
    const coordinator = new Coordinator({
      config,
      member,
      replica: state,
      fragments,
      deadlineMs: options.deadlineMs,
      onEvent: options.onEvent,
      unreachableHint: options.unreachableHint,
      resume,
      duties,
    });
    // The host's θ_global is the room's: it never fetches it from a peer, and it serves joiners.
    const replica = new ReplicaNode(member, state, {
      coordinator: () => member.self,
      stateSource: () => null,
      servesState: true,
      events: { disputed: (p, round, shard) => coordinator.onDispute(p, round, shard) },
    });
    return new Host(member, config, fragments, replica, coordinator);
  }

  /** Stops coordinating (timers included); θ_global stays readable for a last checkpoint. */
  close(): void {
    this.coordinator.close();
  }

  /** θ_global in the logical layout. */
  params(): Float32Array {
    return this.replica.state.params(new Float32Array(buildLayout(this.config.model).size));
  }

  /** The committed round and hash of every fragment. */
  fragmentStates(): { fragment: number; round: number; hash: string }[] {
    return this.replica.state.fragments.map((f, fragment) => ({ fragment, round: f.round, hash: f.hash }));
  }
}
