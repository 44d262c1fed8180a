/**
 * What an attack is and what it gets to work with. A hostile peer is an ordinary
 * Worker whose outgoing bytes the attack rewrites, drops or adds to from outside, through the
 * simulated network's send hooks and the wire codec; nothing inside the swarm knows it is hostile.
 */
import type { Fragment, FragmentHasher } from '@shoal/diloco';
import type { Message, MessageKind, MessageOf, PeerId, RoundOpenMessage, RunConfig, WireCodec } from '@shoal/protocol';
import type { Member, Worker } from '@shoal/swarm';
import type { SimNetwork, VirtualClock } from '../index.ts';

export type AttackFamily = 'owner' | 'contribution' | 'authority' | 'liveness' | 'memory';

/** A hostile worker: it trains and takes part like any other; its attack acts on its traffic. */
export interface HostilePeer {
  peer: PeerId;
  member: Member;
  worker: Worker;
}

/** What a rewrite makes of one outgoing message: null sends it unchanged. */
export type Rewritten = Message | 'drop' | null;

export interface AttackContext {
  readonly clock: VirtualClock;
  readonly network: SimNetwork;
  readonly codec: WireCodec;
  readonly config: RunConfig;
  readonly fragments: readonly Fragment[];
  /** Hashes θ ‖ m as every replica does (an attacker can make up a state and its true hash). */
  readonly hasher: FragmentHasher;
  readonly coordinator: PeerId;
  /** The honest workers (the host is honest too, and is `coordinator`). */
  readonly honest: readonly PeerId[];
  /** From this virtual time (ms) the attack is on; before it the hostile peers behave. */
  readonly startMs: number;
  isActive(): boolean;
  /** The round-open the coordinator sent for (fragment, round), once it has sent it. */
  roundOpen(fragment: number, round: number): RoundOpenMessage | undefined;
  /** The last round the coordinator opened for `fragment` (0 before the first). */
  latestRound(fragment: number): number;
  /** Rewrites what `peer` sends of `kind` while the attack is on (forged messages pass untouched). */
  rewrite<K extends MessageKind>(peer: PeerId, kind: K, change: (to: PeerId, message: MessageOf<K>) => Rewritten): void;
  /**
   * Sends a message the attacker made up, from `from` to each of `to` (its own rewrites let it
   * pass); of the signed kinds, signed with `from`'s own key.
   */
  forge(from: PeerId, to: PeerId | readonly PeerId[], message: Message): void;
  /** Calls `tick` at the attack's start and every `ms` after it, while the run lasts. */
  every(ms: number, tick: () => void): void;
}

export interface Attack {
  /** Kebab-case, unique: `--only` takes these. */
  name: string;
  family: AttackFamily;
  /** What the hostile peer does, in one line. */
  summary: string;
  /** The room this attack needs, when it is not --workers (the two-worker tie-break). */
  workers?: number;
  /** Which workers turn hostile: the last ids (default) or the first (ids sort first). */
  hostileAt?: 'first' | 'last';
  /** Sets the attack up on a room that has not started yet. */
  install?(context: AttackContext, hostile: HostilePeer): void;
  /**
   * An attack on a component the in-memory room does not contain (the mesh's chunk
   * reassembler): run on that component alone, set up for the room's run, beside no training.
   */
  probe?(config: RunConfig): ProbeOutcome;
}

export interface ProbeOutcome {
  /** Bytes the victim reserved on the attacker's account. */
  bytesHeld: number;
  /** Inputs the victim refused. */
  refusals: number;
  /** What was probed, for the report. */
  scope: string;
}
