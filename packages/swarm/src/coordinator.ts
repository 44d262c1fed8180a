/**
 * The coordinator (it runs in the host, which is also a replica): the roster, heartbeats,
 * opening rounds from the median worker's progress, participants and shard owners, deadlines,
 * commit by hash agreement, owner reassignment, late joiners and leaving peers (ARCHITECTURE.md,
 * "Rounds in a room of unequal GPUs", "Apply, commit, abort", "The collective").
 *
 * Schedule: fragment p's round r opens when the median synced worker has done
 * H·r + ⌊p·H/P⌋ inner steps (staggered as in the paper), and never while p's previous round is
 * open: at most one round in flight per fragment.
 */
import type { Fragment } from '@shoal/diloco';
import {
  type Capabilities,
  type PeerId,
  type Member as RosterMember,
  type RoundOpenMessage,
  type RunConfig,
  shardRanges,
} from '@shoal/protocol';
import type { Member } from './member.ts';
import type { ReplicaState, ShardClaim } from './replica.ts';
import type { ShardDuties } from './shard-duty.ts';

export interface MemberInfo {
  peer: PeerId;
  role: RosterMember['role'];
  status: RosterMember['status'];
  reason: string;
  capabilities: Capabilities;
  innerStep: number;
  tokensSince: number[];
  loss: number | null;
  tokensPerSecond: number;
  bytesSent: number;
  bytesReceived: number;
  stalls: number;
  lastSeen: number;
  /**
   * Its own step count when it said hello: a worker returning to a restarted host counts on from
   * there, and `innerStep` is what it did since (so the room's tokens are not counted twice).
   */
  baseStep: number;
  /**
   * Where the room's schedule stood when it said hello (the median worker's step): the
   * schedule counts its progress from there, so a newcomer at step 0 does not hold the median, and
   * with it every round, back until it has caught up with the veterans.
   */
  scheduleOffset: number;
  /** The peers it has an open channel to (heartbeats); null until its first heartbeat. */
  reachable: Set<PeerId> | null;
  /** Its contributions that shard owners refused, by reason, as its heartbeats report them. */
  rejected: Record<string, number>;
  /** Its inner step when it was last named for each fragment's round (what its next weight can be). */
  stepAtLastRound: number[];
  /** Rounds it was named for and failed (no contribution, result or hash): each doubles its bench. */
  misses: number;
  /** Excluded from rounds until this many rounds have opened in the room (0: not benched). */
  benchedUntil: number;
}

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

/** What the host reports (shoal host --json events, the dashboard). */
export type CoordinatorEvent =
  | { event: 'peer-joined'; peer: PeerId }
  | { event: 'peer-left'; peer: PeerId; reason: string }
  | { event: 'round-opened'; fragment: number; round: number; participants: number }
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
  };
}

const median = (values: number[]) => {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor((sorted.length - 1) / 2)] as number;
};

export class Coordinator {
  readonly members = new Map<PeerId, MemberInfo>();
  committedRounds = 0;
  abortedRounds = 0;
  /**
   * No new rounds while set (a dashboard before Start, or paused): members are still welcomed,
   * rounds in flight still finish. Clearing it does not open rounds until the next heartbeat.
   */
  paused = false;
  /** Tokens of members that left, and of the run before a resume (the room's total keeps them). */
  private departedTokens = 0;
  private epoch = 0;
  /** Rounds opened in the room, all fragments: benches are counted in them. */
  private roundsOpened = 0;
  private readonly lastRound: number[];
  /**
   * The hash of each fragment's last commit, the base of its next round. Not the host replica's:
   * a round opened right after a commit (it was due while the previous one was in flight) would
   * name the base from before the commit, which the host adopts only when the commit reaches it.
   */
  private readonly committedHash: (string | null)[];
  private readonly nextOpenStep: number[];
  private readonly inFlight: (OpenRound | null)[];
  private readonly config: RunConfig;
  private readonly member: Member;
  private readonly deadlineMs: number;

  constructor(private readonly options: CoordinatorOptions) {
    const { config, member, fragments } = options;
    this.config = config;
    this.member = member;
    this.deadlineMs = options.deadlineMs ?? 60_000;
    const { innerSteps: H, fragments: P } = config.diloco;
    const { resume } = options;
    this.lastRound = fragments.map((_, p) => resume?.fragments[p]?.round ?? 0);
    this.departedTokens = resume?.roomTokens ?? 0;
    this.committedRounds = resume?.committedRounds ?? 0;
    this.abortedRounds = resume?.abortedRounds ?? 0;
    this.committedHash = fragments.map(() => null);
    this.inFlight = fragments.map(() => null);
    this.nextOpenStep = fragments.map((_, p) => H + Math.floor((p * H) / P));
    member.on('hello', (from, message) =>
      this.onHello(from, message.role, message.capabilities, message.holds, message.innerStep ?? 0),
    );
    member.on('heartbeat', (from, message) => {
      const info = this.members.get(from);
      if (!info) {
        // A worker this coordinator dropped (its link failed) or never welcomed: say so, so it says
        // hello again instead of waiting on rounds that will never name it.
        this.member.rejectBack(from, 'heartbeat', 'not-member', 'say hello first');
        return;
      }
      info.innerStep = Math.max(0, message.innerStep - info.baseStep);
      info.tokensSince = message.tokensSinceContribution;
      info.loss = message.loss;
      info.tokensPerSecond = message.tokensPerSecond;
      info.bytesSent = message.bytesSent;
      info.bytesReceived = message.bytesReceived;
      info.stalls = message.stalls;
      info.reachable = new Set(message.reachable);
      info.rejected = message.rejectedContributions ?? {};
      info.lastSeen = member.clock.now();
      this.maybeOpenRounds();
    });
    member.on('hash-report', (from, message) => this.onHashReport(from, message.fragment, message.round, message.hash));
    member.on('leave', (from, message) => this.removeMember(from, message.reason || 'left'));
    options.duties?.onFinished((job) => {
      if (job.role !== 'referee') return;
      this.judgeShard(job.fragment, job.round, job.shard, { hash: job.resultHash, accepted: job.accepted });
    });
    member.onPeerDown((peer, reason) => this.removeMember(peer, reason));
  }

  /** The room's total tokens trained (the inner schedule's position). */
  get roomTokens(): number {
    const tokensPerStep = this.config.train.batchSize * this.config.train.seqLen;
    let total = this.departedTokens;
    for (const info of this.members.values()) total += info.innerStep * tokensPerStep;
    return total;
  }

  /** The median synced worker's inner step, on the room's schedule. */
  get medianStep(): number {
    return median(this.syncedWorkers().map((info) => info.scheduleOffset + info.innerStep));
  }

  syncedWorkers(): MemberInfo[] {
    return [...this.members.values()].filter((info) => info.role === 'worker' && info.status === 'synced');
  }

  roster() {
    return {
      kind: 'roster' as const,
      epoch: ++this.epoch,
      coordinator: this.member.self,
      members: [...this.members.values()].map(({ peer, role, status, reason, capabilities }) => ({
        peer,
        role,
        status,
        reason,
        capabilities,
      })),
    };
  }

  /** Every member that holds θ_global or is fetching it, and the host itself. */
  private everyone(): PeerId[] {
    return [this.member.self, ...this.members.keys()];
  }

  private broadcastRoster(): void {
    void this.member.broadcast(this.members.keys(), this.roster());
  }

  private onHello(
    from: PeerId,
    role: MemberInfo['role'],
    capabilities: Capabilities,
    holds: { fragment: number; round: number; hash: string }[],
    ownStep: number,
  ) {
    const fresh = this.options.replica.fragments.every((f) => f.round === 0);
    const existing = this.members.get(from);
    const holdsCurrent =
      holds.length === this.options.replica.fragments.length &&
      holds.every((h) => this.options.replica.fragments[h.fragment]?.hash === h.hash);
    const status: MemberInfo['status'] = role === 'spectator' ? 'synced' : fresh || holdsCurrent ? 'synced' : 'syncing';
    if (existing) {
      // a hello does not lift a bench: the member stays out of rounds until it has served it
      if (existing.status !== 'excluded') existing.status = status;
      // a participant that found itself behind cannot contribute to its rounds in flight: that is
      // no miss of its own
      if (status === 'syncing') for (const open of this.inFlight) open?.excused.add(from);
      existing.capabilities = capabilities;
    } else {
      this.members.set(from, {
        peer: from,
        role,
        status,
        reason: '',
        capabilities,
        innerStep: 0,
        tokensSince: this.options.fragments.map(() => 0),
        loss: null,
        tokensPerSecond: capabilities.tokensPerSecond,
        bytesSent: 0,
        bytesReceived: 0,
        stalls: 0,
        lastSeen: this.member.clock.now(),
        baseStep: ownStep,
        // the median worker's step, or where the last rounds opened when nobody is training
        scheduleOffset: Math.max(this.medianStep, Math.min(...this.nextOpenStep) - this.config.diloco.innerSteps),
        reachable: null,
        rejected: {},
        misses: 0,
        benchedUntil: 0,
        stepAtLastRound: this.options.fragments.map(() => 0),
      });
      this.options.onEvent?.({ event: 'peer-joined', peer: from });
    }
    void this.member.send(from, {
      kind: 'welcome',
      config: this.config,
      fragments: this.options.replica.fragments.map((f, fragment) => ({ fragment, round: f.round, hash: f.hash })),
      roomTokens: this.roomTokens,
      stateFrom: status === 'syncing' ? this.member.self : null,
    });
    this.broadcastRoster();
    this.maybeOpenRounds();
  }

  private removeMember(peer: PeerId, reason: string): void {
    const info = this.members.get(peer);
    if (!info) return;
    this.members.delete(peer);
    this.departedTokens += info.innerStep * this.config.train.batchSize * this.config.train.seqLen;
    this.options.onEvent?.({ event: 'peer-left', peer, reason });
    for (const round of this.inFlight) {
      if (!round?.participants.includes(peer)) continue;
      // a shard whose owner or checker is gone can no longer be checked: the host takes it over
      for (const [shard, entry] of round.message.shards.entries()) {
        if (entry.owner === peer || entry.checker === peer) this.referee(round, shard);
      }
      this.maybeFinish(round);
    }
    this.broadcastRoster();
    this.maybeOpenRounds();
  }

  /**
   * Opens a round of fragment p now if none is in flight, whatever the schedule says (the
   * simulator's final sync before evaluation). False when it could not.
   */
  openNow(p: number): boolean {
    const workers = this.syncedWorkers();
    if (workers.length === 0 || this.inFlight[p]) return false;
    this.open(p, workers);
    return true;
  }

  /**
   * Stops the coordinator: no new rounds, and the timers of rounds in flight are cancelled (a
   * stopping `shoal host` must not wait out a round's deadline). Rounds in flight stay uncommitted.
   */
  close(): void {
    this.paused = true;
    for (const open of this.inFlight) {
      if (!open) continue;
      open.cancelDeadline();
      open.cancelReferee();
      open.cancelGrace?.();
    }
    this.options.duties?.clear();
  }

  /** Whether fragment p has a round in flight. */
  isInFlight(p: number): boolean {
    return this.inFlight[p] !== null;
  }

  /** Opens every fragment's round that the median worker's progress calls for. */
  maybeOpenRounds(): void {
    if (this.paused) return;
    let workers = this.syncedWorkers();
    // every worker benched: nobody is left to train with, so the benches end now
    if (workers.length === 0 && this.liftBenches(true)) workers = this.syncedWorkers();
    if (workers.length === 0) return;
    const step = this.medianStep;
    for (let p = 0; p < this.inFlight.length; p++) {
      if (this.inFlight[p] || step < (this.nextOpenStep[p] as number)) continue;
      this.open(p, workers);
    }
  }

  private open(p: number, workers: MemberInfo[]): void {
    const { diloco } = this.config;
    const fragment = this.options.fragments[p] as Fragment;
    const blockSize = diloco.codec === 'fp32' || diloco.codec === 'bf16' ? 1 : diloco.codecBlockSize;
    this.roundsOpened++;
    this.liftBenches();
    const participants = this.connected(workers);
    const n = participants.length;
    // Owner k is participant k; its checker the next one (docs/hostile-volunteers.md). One
    // participant alone has nobody to check it: its result is its own Δ, bounded like any other.
    const shards = shardRanges(fragment.size, blockSize, n).map((range, k) => ({
      ...range,
      owner: participants[k] as PeerId,
      ...(n >= 2 ? { checker: participants[(k + 1) % n] as PeerId } : {}),
    }));
    const round = (this.lastRound[p] as number) + 1;
    this.lastRound[p] = round;
    this.nextOpenStep[p] = (this.nextOpenStep[p] as number) + diloco.innerSteps;
    const tokensMedian = median(workers.map((w) => w.tokensSince[p] ?? 0));
    const maxWeight = Math.max(1, Math.round(diloco.weightCapFactor * Math.max(tokensMedian, 1)));
    const weightCaps = participants.map((peer) => this.seenTokens(this.members.get(peer) as MemberInfo, p));
    const message: RoundOpenMessage = {
      kind: 'round-open',
      fragment: p,
      round,
      codec: diloco.codec,
      participants,
      shards,
      fragmentSize: fragment.size,
      blockSize,
      deadlineMs: this.deadlineMs,
      roomTokens: this.roomTokens,
      baseHash: this.committedHash[p] ?? this.options.replica.fragment(p).hash,
      maxWeight,
      weightCaps,
    };
    const { clock } = this.member;
    const open: OpenRound = {
      fragment: p,
      round,
      participants,
      message,
      openedAt: clock.now(),
      refereed: new Set(),
      excused: new Set(),
      reports: new Map(),
      cancelDeadline: clock.setTimer(2 * this.deadlineMs, () => this.finish(open, 'deadline')),
      // Owners send what they have at their deadline; a shard still unverified a little later has
      // a silent owner or checker: the host takes it over while the round can still commit.
      cancelReferee: clock.setTimer(Math.round(1.25 * this.deadlineMs), () => this.refereeUnverified(open)),
      cancelGrace: null,
    };
    this.inFlight[p] = open;
    this.options.onEvent?.({ event: 'round-opened', fragment: p, round, participants: n });
    void this.member.broadcast(this.everyone(), message);
  }

  /**
   * The most tokens `info` can honestly put behind its contribution to fragment p: the steps its
   * heartbeats showed since it was last named for p, plus H for the steps between this open and
   * its contribution and a heartbeat's lag. A weight claimed beyond it is capped. Notes the step.
   */
  private seenTokens(info: MemberInfo, p: number): number {
    const { train, diloco } = this.config;
    const steps = info.innerStep - (info.stepAtLastRound[p] ?? 0) + diloco.innerSteps;
    info.stepAtLastRound[p] = info.innerStep;
    return Math.max(1, steps * train.batchSize * train.seqLen);
  }

  /** Members whose bench is served (or all, `early`) go back to rounds; true when any did. */
  private liftBenches(early = false): boolean {
    let changed = false;
    for (const info of this.members.values()) {
      if (info.status !== 'excluded' || (info.benchedUntil > this.roundsOpened && !early)) continue;
      info.status = 'synced';
      info.reason = '';
      info.benchedUntil = 0;
      changed = true;
    }
    if (changed) this.broadcastRoster();
    return changed;
  }

  /**
   * A participant failed its round (no contribution, no result, no hash, a wrong aggregate): it
   * sits out the next 2^(misses−1)·P rounds (about one sync of every fragment, doubling), and the
   * roster says why. It stays a member and a replica.
   */
  private bench(peer: PeerId, why: string): void {
    const info = this.members.get(peer);
    if (info?.role !== 'worker') return;
    info.misses++;
    const rounds = 2 ** Math.min(info.misses - 1, 10) * this.inFlight.length;
    info.benchedUntil = this.roundsOpened + rounds;
    info.status = 'excluded';
    info.reason = `${why}; out of the next ${rounds} rounds`;
    this.broadcastRoster();
  }

  /**
   * The participants of a round: synced workers that can all reach each other (ARCHITECTURE.md,
   * "Rounds…"), greedily from their heartbeats' channel lists, best connected first (ties by peer
   * id), so a member that claims to reach nobody leaves itself out, not the others. A worker that
   * has not reported yet counts as reachable. The others train on and follow as replicas.
   */
  private connected(workers: MemberInfo[]): PeerId[] {
    const chosen: MemberInfo[] = [];
    const sees = (a: MemberInfo, b: MemberInfo) => a.reachable === null || a.reachable.has(b.peer);
    const degree = (w: MemberInfo) => workers.filter((o) => o !== w && sees(w, o) && sees(o, w)).length;
    const degrees = new Map(workers.map((w) => [w, degree(w)]));
    const order = [...workers].sort(
      (a, b) =>
        (degrees.get(b) as number) - (degrees.get(a) as number) || (a.peer < b.peer ? -1 : a.peer > b.peer ? 1 : 0),
    );
    let changed = false;
    for (const worker of order) {
      const blocked = chosen.filter((c) => !(sees(c, worker) && sees(worker, c)));
      const reason =
        blocked.length === 0
          ? ''
          : `no channel to ${blocked.map((c) => c.peer).join(', ')}${this.options.unreachableHint ?? ''}`;
      if (reason === '') chosen.push(worker);
      if (worker.reason !== reason) {
        worker.reason = reason;
        changed = true;
      }
    }
    if (changed) this.broadcastRoster();
    // round order is peer-id order, whatever order they were chosen in
    return chosen.map((w) => w.peer).sort();
  }

  /** The host's replica found shard k's owner and checker in disagreement. */
  onDispute(p: number, round: number, shard: number): void {
    const open = this.inFlight[p];
    if (open?.round === round) this.referee(open, shard);
  }

  /**
   * The host aggregates shard k itself (it is trusted): participants resend their kept Δ shard to
   * it (reassign), and its result replaces the owner's and the checker's at every replica.
   */
  private referee(open: OpenRound, shard: number): void {
    const duties = this.options.duties;
    const entry = open.message.shards[shard];
    if (!duties || !entry || open.refereed.has(shard) || this.inFlight[open.fragment] !== open) return;
    open.refereed.add(shard);
    const live = open.participants.filter((p) => this.members.has(p));
    duties.take(open.message, shard, 'referee', this.deadlineMs, live);
    void this.member.broadcast(live, {
      kind: 'reassign',
      fragment: open.fragment,
      round: open.round,
      shard,
      owner: this.member.self,
      previous: entry.owner,
      deadlineMs: this.deadlineMs,
    });
  }

  /** Shards still unverified at the host after the owners' deadline: their aggregator was silent. */
  private refereeUnverified(open: OpenRound): void {
    if (this.inFlight[open.fragment] !== open) return;
    const replica = this.options.replica;
    for (const shard of replica.unverifiedShards(open.fragment, open.round)) {
      const entry = open.message.shards[shard];
      const heard = replica.shardClaims(open.fragment, open.round, shard);
      if (entry && heard.owner === null) this.bench(entry.owner, `sent no result for ${open.fragment}:${open.round}`);
      if (entry?.checker && heard.checker === null) {
        this.bench(entry.checker, `sent no check for ${open.fragment}:${open.round}`);
      }
      this.referee(open, shard);
    }
  }

  /**
   * The referee's result for shard k is in. An owner or checker is benched for a wrong aggregate
   * only when the other of the two reproduced the referee's result exactly and it, from the same
   * contributors, did not: two of three agree, so the third computed wrong. Otherwise (one of them
   * silent, other contributors, or a contributor that sent them different bytes) nobody is blamed:
   * without the contributions' own hashes nobody can tell who lied, and the referee's result stands.
   */
  private judgeShard(p: number, round: number, shard: number, referee: ShardClaim): void {
    const open = this.inFlight[p];
    const entry = open?.round === round ? open.message.shards[shard] : undefined;
    if (!entry) return;
    const heard = this.options.replica.shardClaims(p, round, shard);
    const sameInputs = (claim: ShardClaim) => claim.accepted.join('\n') === referee.accepted.join('\n');
    const right = (claim: ShardClaim | null) => claim !== null && claim.hash === referee.hash;
    const wrong = (claim: ShardClaim | null) => claim !== null && sameInputs(claim) && claim.hash !== referee.hash;
    if (wrong(heard.owner) && right(heard.checker)) this.bench(entry.owner, `wrong aggregate in ${p}:${round}`);
    if (entry.checker && wrong(heard.checker) && right(heard.owner)) {
      this.bench(entry.checker, `wrong check in ${p}:${round}`);
    }
  }

  private onHashReport(from: PeerId, p: number, round: number, hash: string): void {
    const open = this.inFlight[p];
    if (from === this.member.self) {
      // the host's own replica has its tentative state: the round may commit now
      if (open?.round === round) this.maybeFinish(open);
      return;
    }
    if (!open || open.round !== round) {
      // A follower's report that arrives after its round committed still says whether it agrees.
      if (round === this.lastRound[p] && hash === this.committedHash[p]) this.setStatus(from, 'synced');
      else this.member.refuse(from, 'hash-report', 'stale-round', `round ${round} of fragment ${p} is not open`);
      return;
    }
    if (!this.members.has(from)) {
      this.member.refuse(from, 'hash-report', 'not-member', `${from} is not in this room`);
      return;
    }
    if (open.reports.has(from)) {
      this.member.refuse(from, 'hash-report', 'duplicate', `${from} already reported ${p}:${round}`);
      return;
    }
    // A follower's report (not a participant) tells at the commit whether it holds θ_global (a
    // late joiner whose state arrived while a commit overtook its hello becomes synced here).
    open.reports.set(from, hash);
    if (open.participants.includes(from)) this.maybeFinish(open);
  }

  /** A member's status from its hash reports; the roster goes out when it changes. A bench stands. */
  private setStatus(peer: PeerId, status: 'synced' | 'diverged'): void {
    const info = this.members.get(peer);
    if (!info || info.role === 'spectator' || info.status === status || info.status === 'excluded') return;
    info.status = status;
    this.broadcastRoster();
  }

  /** The live participants, and those of them whose hash is the host's. */
  private tally(open: OpenRound, hostHash: string | null) {
    const live = open.participants.filter((p) => this.members.has(p));
    const agreeing = live.filter((p) => hostHash !== null && open.reports.get(p) === hostHash);
    // a strict majority of live participants and the host together, the host among them
    const majority = hostHash !== null && 2 * (agreeing.length + 1) > live.length + 1;
    const quorum = agreeing.length >= this.config.diloco.quorum * open.participants.length;
    return { live, agreeing, commits: majority && quorum };
  }

  /**
   * Commits once the host has its tentative hash and every live participant has reported; once a
   * strict majority agrees with the host, stragglers get a grace period (twice as long as the
   * round took so far, at least 2 s, at most the deadline) rather than the whole deadline.
   */
  private maybeFinish(open: OpenRound): void {
    const hostHash = this.options.replica.tentativeHash(open.fragment, open.round);
    const { live, commits } = this.tally(open, hostHash);
    if (hostHash !== null && live.every((p) => open.reports.has(p))) {
      this.finish(open, 'complete');
      return;
    }
    if (!commits || open.cancelGrace) return;
    const { clock } = this.member;
    // Generous: a silent member costs only this one round (it is benched after it), while an
    // honest one on a busy machine must not be benched for answering a little late.
    const graceMs = Math.min(this.deadlineMs, Math.max(2_000, 2 * (clock.now() - open.openedAt)));
    open.cancelGrace = clock.setTimer(graceMs, () => this.finish(open, 'grace'));
  }

  private finish(open: OpenRound, why: 'complete' | 'grace' | 'deadline'): void {
    if (this.inFlight[open.fragment] !== open) return;
    this.inFlight[open.fragment] = null;
    open.cancelDeadline();
    open.cancelReferee();
    open.cancelGrace?.();
    const { fragment, round } = open;
    const hostHash = this.options.replica.tentativeHash(fragment, round);
    const { live, agreeing, commits } = this.tally(open, hostHash);
    if (commits && hostHash !== null) {
      this.benchMisses(open, live);
      for (const [peer, reported] of open.reports) this.setStatus(peer, reported === hostHash ? 'synced' : 'diverged');
      this.committedRounds++;
      this.committedHash[fragment] = hostHash;
      void this.member.broadcast(this.everyone(), {
        kind: 'commit',
        fragment,
        round,
        hash: hostHash,
        contributors: agreeing,
        roomTokens: this.roomTokens,
      });
      this.options.onEvent?.({
        event: 'round-committed',
        fragment,
        round,
        participants: agreeing.length,
        hash: hostHash,
        contributors: agreeing,
      });
    } else {
      const hashes = new Set(open.reports.values());
      const reason =
        why === 'deadline' && hostHash === null ? 'deadline' : hashes.size > 1 ? 'hash-disagreement' : 'quorum';
      this.abortedRounds++;
      void this.member.broadcast(this.everyone(), {
        kind: 'abort',
        fragment,
        round,
        reason,
        message: `${agreeing.length} of ${open.participants.length} participants agreed with the host`,
      });
      this.options.onEvent?.({ event: 'round-aborted', fragment, round, reason });
    }
    this.options.duties?.endRound(fragment, round);
    this.maybeOpenRounds();
  }

  /**
   * At a commit: a live participant with no hash report, or whose Δ is in no verified shard of the
   * round (it sent nothing, or only refused bytes), missed it.
   */
  private benchMisses(open: OpenRound, live: PeerId[]): void {
    const contributed = new Set(
      this.options.replica.verifiedContributors(open.fragment, open.round).flatMap((peers) => peers ?? []),
    );
    for (const peer of live) {
      if (open.excused.has(peer)) continue;
      if (!open.reports.has(peer)) this.bench(peer, `reported no hash for ${open.fragment}:${open.round}`);
      else if (!contributed.has(peer)) {
        this.bench(peer, `contributed nothing to ${open.fragment}:${open.round}`);
      }
    }
  }
}
