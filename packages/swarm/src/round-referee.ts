/**
 * The coordinator's rounds in flight, from their open to their commit or abort (docs/design.md,
 * "Apply, commit, abort", "The collective"): the participants' hash reports, their tally against
 * the host's tentative hash, the grace stragglers get once a majority agrees and the deadline;
 * the host refereeing a shard whose owner and checker disagreed, went silent or left; and the
 * bench for those that computed wrong or missed their part. It keeps each fragment's last
 * committed hash (the base of its next round) and the room's count of commits and aborts.
 */
import type { Codec } from '@shoal/diloco';
import type { PeerId, RoundOpenMessage, RunConfig } from '@shoal/protocol';
import { abortReason, aggregateFaults, type Fault, graceMs, roundMisses, type Tally, tally } from './commit-rule.ts';
import type { CoordinatorEvent } from './coordinator-options.ts';
import type { Member } from './member.ts';
import type { ReplicaState, ShardClaim } from './replica.ts';
import type { Roster } from './roster.ts';
import type { ShardDuties } from './shard-duty.ts';

interface OpenRound {
  fragment: number;
  round: number;
  participants: PeerId[];
  /** The round-open as sent (its shard table names each shard's owner and checker). */
  message: RoundOpenMessage;
  openedAt: number;
  /** Shards the host took over (owner or checker gone, silent, or the two disagreed). */
  refereed: Set<number>;
  /** Participants that said hello as syncing after the open: not benched for this round. */
  excused: Set<PeerId>;
  reports: Map<PeerId, string>;
  cancelDeadline: () => void;
  cancelReferee: () => void;
  /** Set once a strict majority agrees with the host: stragglers get this long to report. */
  cancelGrace: (() => void) | null;
}

/** What the referee needs of its coordinator's room. */
export interface RefereeRoom {
  config: RunConfig;
  member: Member;
  /** The host's own replica: its tentative hash is the one a round commits. */
  replica: ReplicaState;
  roster: Roster;
  /** The run's codec (the shard table's grid). */
  codec: Codec;
  /** A round's owners give up waiting after this long; the coordinator after twice that. */
  deadlineMs: number;
  /** The host's shard duties: it referees a shard whose owner and checker disagree or fail. */
  duties?: ShardDuties;
  onEvent?: (event: CoordinatorEvent) => void;
  /** Fragment p's last opened round (a report of it after its commit is no stale one). */
  lastRound: (p: number) => number;
  /** Every member that holds θ_global or is fetching it, and the host itself. */
  everyone: () => PeerId[];
  /** The room's total tokens trained, which a commit carries. */
  roomTokens: () => number;
  /** A round ended, committed or aborted: the rounds due may open. */
  ended: () => void;
}

export class RoundReferee {
  committedRounds: number;
  abortedRounds: number;
  /**
   * The hash of each fragment's last commit, the base of its next round. Not the host replica's:
   * a round opened right after a commit (it was due while the previous one was in flight) would
   * name the base from before the commit, which the host adopts only when the commit reaches it.
   */
  private readonly committedHash: (string | null)[];
  private readonly inFlight: (OpenRound | null)[];

  constructor(
    private readonly room: RefereeRoom,
    fragments: number,
    counts: { committedRounds?: number; abortedRounds?: number } = {},
  ) {
    this.committedRounds = counts.committedRounds ?? 0;
    this.abortedRounds = counts.abortedRounds ?? 0;
    this.committedHash = Array.from({ length: fragments }, () => null);
    this.inFlight = Array.from({ length: fragments }, () => null);
  }

  /** Whether fragment p has a round in flight. */
  isInFlight(p: number): boolean {
    return this.inFlight[p] !== null;
  }

  /** The base fragment p's next round starts from: its last commit's hash, or the host replica's. */
  baseHash(p: number): string {
    return this.committedHash[p] ?? this.room.replica.fragment(p).hash;
  }

  /** A round just opened with `message`: it is in flight until it commits, aborts or runs out. */
  watch(message: RoundOpenMessage): void {
    const { clock } = this.room.member;
    const { deadlineMs } = this.room;
    const open: OpenRound = {
      fragment: message.fragment,
      round: message.round,
      participants: message.participants,
      message,
      openedAt: clock.now(),
      refereed: new Set(),
      excused: new Set(),
      reports: new Map(),
      cancelDeadline: clock.setTimer(2 * deadlineMs, () => this.finish(open, 'deadline')),
      // Owners send what they have at their deadline; a shard still unverified a little later has
      // a silent owner or checker: the host takes it over while the round can still commit.
      cancelReferee: clock.setTimer(Math.round(1.25 * deadlineMs), () => this.refereeUnverified(open)),
      cancelGrace: null,
    };
    this.inFlight[message.fragment] = open;
  }

  /**
   * Whom fragment p's round in flight waits for: the participants whose contribution a shard's
   * owner still waits for, as the owners' heartbeats say (only a named owner's word counts, and
   * only of the round's participants). Null when no round of p is in flight.
   */
  waitingFor(p: number): { round: number; peers: PeerId[] } | null {
    const open = this.inFlight[p];
    if (!open) return null;
    const owners = new Set(open.message.shards.map((shard) => shard.owner));
    const participants = new Set(open.participants);
    const peers = new Set<PeerId>();
    for (const owner of owners) {
      const claim = this.room.roster.members
        .get(owner)
        ?.waitingFor.find((w) => w.fragment === p && w.round === open.round);
      for (const peer of claim?.peers ?? []) if (participants.has(peer)) peers.add(peer);
    }
    return { round: open.round, peers: [...peers].sort() };
  }

  /**
   * A participant found itself behind (it said hello as syncing): it cannot contribute to its
   * rounds in flight, which is no miss of its own.
   */
  excuse(peer: PeerId): void {
    for (const open of this.inFlight) open?.excused.add(peer);
  }

  /** A member left: the host takes over the shards it owned or checked, and its rounds may finish. */
  left(peer: PeerId): void {
    for (const round of this.inFlight) {
      if (!round?.participants.includes(peer)) continue;
      // a shard whose owner or checker is gone can no longer be checked: the host takes it over
      for (const [shard, entry] of round.message.shards.entries()) {
        if (entry.owner === peer || entry.checker === peer) this.referee(round, shard);
      }
      this.maybeFinish(round);
    }
  }

  /** Cancels the timers of the rounds in flight, which stay uncommitted. */
  close(): void {
    for (const open of this.inFlight) {
      if (!open) continue;
      open.cancelDeadline();
      open.cancelReferee();
      open.cancelGrace?.();
    }
  }

  /** The host's replica found shard k's owner and checker in disagreement. */
  onDispute(p: number, round: number, shard: number): void {
    const open = this.inFlight[p];
    if (open?.round === round) this.referee(open, shard);
  }

  /** The referee's result for shard k is in: an owner or checker that computed wrong is benched. */
  judgeShard(p: number, round: number, shard: number, referee: ShardClaim): void {
    const open = this.inFlight[p];
    const entry = open?.round === round ? open.message.shards[shard] : undefined;
    if (!entry) return;
    const heard = this.room.replica.shardClaims(p, round, shard);
    this.benchAll(aggregateFaults(`${p}:${round}`, entry, heard, referee));
  }

  onHashReport(from: PeerId, p: number, round: number, hash: string): void {
    const { member, roster } = this.room;
    const open = this.inFlight[p];
    if (from === member.self) {
      // the host's own replica has its tentative state: the round may commit now
      if (open?.round === round) this.maybeFinish(open);
      return;
    }
    if (!open || open.round !== round) {
      // A follower's report that arrives after its round committed still says whether it agrees.
      if (round === this.room.lastRound(p) && hash === this.committedHash[p]) this.holds(from, p);
      else member.refuse(from, 'hash-report', 'stale-round', `round ${round} of fragment ${p} is not open`);
      return;
    }
    if (!roster.members.has(from)) {
      member.refuse(from, 'hash-report', 'not-member', `${from} is not in this room`);
      return;
    }
    if (open.reports.has(from)) {
      member.refuse(from, 'hash-report', 'duplicate', `${from} already reported ${p}:${round}`);
      return;
    }
    // A follower's report (not a participant) tells at the commit whether it holds θ_global (a
    // late joiner whose state arrived while a commit overtook its hello becomes synced here).
    open.reports.set(from, hash);
    if (open.participants.includes(from)) this.maybeFinish(open);
  }

  /**
   * The host aggregates shard k itself (it is trusted): participants resend their kept Δ shard to
   * it (reassign), and its result replaces the owner's and the checker's at every replica.
   */
  private referee(open: OpenRound, shard: number): void {
    const { duties, member, roster, deadlineMs } = this.room;
    const entry = open.message.shards[shard];
    if (!duties || !entry || open.refereed.has(shard) || this.inFlight[open.fragment] !== open) return;
    open.refereed.add(shard);
    const live = open.participants.filter((p) => roster.members.has(p));
    duties.take(open.message, this.room.codec, shard, 'referee', deadlineMs, live);
    void member.broadcast(live, {
      kind: 'reassign',
      fragment: open.fragment,
      round: open.round,
      shard,
      owner: member.self,
      previous: entry.owner,
      deadlineMs,
    });
  }

  /** Shards still unverified at the host after the owners' deadline: their aggregator was silent. */
  private refereeUnverified(open: OpenRound): void {
    if (this.inFlight[open.fragment] !== open) return;
    const { replica, roster } = this.room;
    for (const shard of replica.unverifiedShards(open.fragment, open.round)) {
      const entry = open.message.shards[shard];
      const heard = replica.shardClaims(open.fragment, open.round, shard);
      if (entry && heard.owner === null) roster.bench(entry.owner, `sent no result for ${open.fragment}:${open.round}`);
      if (entry?.checker && heard.checker === null) {
        roster.bench(entry.checker, `sent no check for ${open.fragment}:${open.round}`);
      }
      this.referee(open, shard);
    }
  }

  private benchAll(faults: Fault[]): void {
    for (const { peer, why } of faults) this.room.roster.bench(peer, why);
  }

  /** `peer` reported fragment p's committed hash: synced once it has for every fragment it was behind on. */
  private holds(peer: PeerId, p: number): void {
    const info = this.room.roster.members.get(peer);
    info?.behind?.delete(p);
    if (!info?.behind?.size) this.room.roster.setStatus(peer, 'synced');
  }

  private tally(open: OpenRound, hostHash: string | null): Tally {
    const isLive = (peer: PeerId) => this.room.roster.members.has(peer);
    return tally(open.participants, isLive, open.reports, hostHash, this.room.config.diloco.quorum);
  }

  /**
   * Commits once the host has its tentative hash and every live participant has reported; once a
   * strict majority agrees with the host, stragglers get a grace period (twice as long as the
   * round took so far, at least 2 s, at most the deadline) rather than the whole deadline.
   */
  private maybeFinish(open: OpenRound): void {
    const hostHash = this.room.replica.tentativeHash(open.fragment, open.round);
    const { live, commits } = this.tally(open, hostHash);
    if (hostHash !== null && live.every((p) => open.reports.has(p))) {
      this.finish(open, 'complete');
      return;
    }
    if (!commits || open.cancelGrace) return;
    const { clock } = this.room.member;
    const grace = graceMs(this.room.deadlineMs, clock.now() - open.openedAt);
    open.cancelGrace = clock.setTimer(grace, () => this.finish(open, 'grace'));
  }

  private finish(open: OpenRound, why: 'complete' | 'grace' | 'deadline'): void {
    if (this.inFlight[open.fragment] !== open) return;
    this.inFlight[open.fragment] = null;
    open.cancelDeadline();
    open.cancelReferee();
    open.cancelGrace?.();
    const { fragment, round } = open;
    const hostHash = this.room.replica.tentativeHash(fragment, round);
    const verdict = this.tally(open, hostHash);
    if (verdict.commits && hostHash !== null) this.commit(open, hostHash, verdict);
    else this.abort(open, why, hostHash, verdict);
    this.room.duties?.endRound(fragment, round);
    this.room.ended();
  }

  /** The round commits at the host's hash: members that missed their part are benched. */
  private commit(open: OpenRound, hostHash: string, { live, agreeing }: Tally): void {
    const { fragment, round } = open;
    const { member, replica, roster } = this.room;
    const contributors = new Set(replica.verifiedContributors(fragment, round).flatMap((peers) => peers ?? []));
    this.benchAll(roundMisses(`${fragment}:${round}`, live, open.excused, open.reports, contributors));
    for (const [peer, reported] of open.reports) {
      if (reported === hostHash) this.holds(peer, fragment);
      else roster.setStatus(peer, 'diverged');
    }
    this.committedRounds++;
    this.committedHash[fragment] = hostHash;
    void member.broadcast(this.room.everyone(), {
      kind: 'commit',
      fragment,
      round,
      hash: hostHash,
      contributors: agreeing,
      roomTokens: this.room.roomTokens(),
    });
    this.room.onEvent?.({
      event: 'round-committed',
      fragment,
      round,
      participants: agreeing.length,
      hash: hostHash,
      contributors: agreeing,
    });
  }

  /** The round aborts: every replica drops its tentative state. */
  private abort(open: OpenRound, why: 'complete' | 'grace' | 'deadline', hostHash: string | null, { agreeing }: Tally) {
    const { fragment, round } = open;
    const reason = abortReason(why, hostHash, open.reports);
    this.abortedRounds++;
    void this.room.member.broadcast(this.room.everyone(), {
      kind: 'abort',
      fragment,
      round,
      reason,
      message: `${agreeing.length} of ${open.participants.length} participants agreed with the host`,
    });
    this.room.onEvent?.({ event: 'round-aborted', fragment, round, reason });
  }
}
