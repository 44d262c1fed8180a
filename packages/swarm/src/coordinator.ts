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
  type RunConfig,
  shardRanges,
} from '@shoal/protocol';
import type { Member } from './member.ts';
import type { ReplicaState } from './replica.ts';

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
  /** The peers it has an open channel to (heartbeats); null until its first heartbeat. */
  reachable: Set<PeerId> | null;
  /** Its contributions that shard owners refused, by reason, as its heartbeats report them. */
  rejected: Record<string, number>;
}

interface OpenRound {
  fragment: number;
  round: number;
  participants: PeerId[];
  owners: PeerId[];
  reports: Map<PeerId, string>;
  cancelDeadline: () => void;
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
    member.onPeerDown((peer, reason) => this.removeMember(peer, reason));
  }

  /** The room's total tokens trained (the inner schedule's position). */
  get roomTokens(): number {
    const tokensPerStep = this.config.train.batchSize * this.config.train.seqLen;
    let total = this.departedTokens;
    for (const info of this.members.values()) total += info.innerStep * tokensPerStep;
    return total;
  }

  /** The median synced worker's inner step. */
  get medianStep(): number {
    return median(this.syncedWorkers().map((info) => info.innerStep));
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
      existing.status = status;
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
        reachable: null,
        rejected: {},
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
      for (const [shard, owner] of round.owners.entries()) {
        const live = round.participants.filter((p) => this.members.has(p));
        if (owner !== peer || live.length === 0) continue;
        const next = live[shard % live.length] as PeerId;
        round.owners[shard] = next;
        void this.member.broadcast(live, {
          kind: 'reassign',
          fragment: round.fragment,
          round: round.round,
          shard,
          owner: next,
          previous: peer,
          deadlineMs: this.deadlineMs,
        });
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

  /** Whether fragment p has a round in flight. */
  isInFlight(p: number): boolean {
    return this.inFlight[p] !== null;
  }

  /** Opens every fragment's round that the median worker's progress calls for. */
  maybeOpenRounds(): void {
    if (this.paused) return;
    const workers = this.syncedWorkers();
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
    const participants = this.connected(workers);
    const ranges = shardRanges(fragment.size, blockSize, participants.length);
    const owners = ranges.map((_, k) => participants[k] as PeerId);
    const round = (this.lastRound[p] as number) + 1;
    this.lastRound[p] = round;
    this.nextOpenStep[p] = (this.nextOpenStep[p] as number) + diloco.innerSteps;
    const tokensMedian = median(workers.map((w) => w.tokensSince[p] ?? 0));
    const maxWeight = Math.max(1, Math.round(diloco.weightCapFactor * Math.max(tokensMedian, 1)));
    const open: OpenRound = {
      fragment: p,
      round,
      participants,
      owners,
      reports: new Map(),
      cancelDeadline: this.member.clock.setTimer(2 * this.deadlineMs, () => this.finish(open, 'deadline')),
    };
    this.inFlight[p] = open;
    this.options.onEvent?.({ event: 'round-opened', fragment: p, round, participants: participants.length });
    void this.member.broadcast(this.everyone(), {
      kind: 'round-open',
      fragment: p,
      round,
      codec: diloco.codec,
      participants,
      shards: ranges.map((r, k) => ({ ...r, owner: owners[k] as PeerId })),
      fragmentSize: fragment.size,
      blockSize,
      deadlineMs: this.deadlineMs,
      roomTokens: this.roomTokens,
      baseHash: this.committedHash[p] ?? this.options.replica.fragment(p).hash,
      maxWeight,
    });
  }

  /**
   * The participants of a round: synced workers that can all reach each other (ARCHITECTURE.md,
   * "Rounds…"), greedily in peer-id order from their heartbeats' channel lists. A worker that has
   * not reported yet counts as reachable. The others train on and follow as replicas.
   */
  private connected(workers: MemberInfo[]): PeerId[] {
    const chosen: MemberInfo[] = [];
    const sees = (a: MemberInfo, b: MemberInfo) => a.reachable === null || a.reachable.has(b.peer);
    let changed = false;
    for (const worker of [...workers].sort((a, b) => (a.peer < b.peer ? -1 : a.peer > b.peer ? 1 : 0))) {
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
    return chosen.map((w) => w.peer);
  }

  private onHashReport(from: PeerId, p: number, round: number, hash: string): void {
    const open = this.inFlight[p];
    if (from === this.member.self) return; // the host's own replica: checked at commit
    if (!open || open.round !== round) {
      // A follower's report that arrives after its round committed still says whether it agrees.
      if (round === this.lastRound[p] && hash === this.committedHash[p]) this.setStatus(from, 'synced');
      else this.member.refuse(from, 'hash-report', 'stale-round', `round ${round} of fragment ${p} is not open`);
      return;
    }
    if (!open.participants.includes(from)) {
      // A replica that follows the round: its hash tells at the commit whether it holds θ_global
      // (a late joiner whose state arrived while a commit overtook its hello becomes synced here).
      if (this.members.has(from)) open.reports.set(from, hash);
      return;
    }
    open.reports.set(from, hash);
    this.maybeFinish(open);
  }

  /** A member's status from its hash reports; the roster goes out when it changes. */
  private setStatus(peer: PeerId, status: 'synced' | 'diverged'): void {
    const info = this.members.get(peer);
    if (!info || info.role === 'spectator' || info.status === status) return;
    info.status = status;
    this.broadcastRoster();
  }

  /** Commits once every live participant has reported, if a quorum agrees. */
  private maybeFinish(open: OpenRound): void {
    const live = open.participants.filter((p) => this.members.has(p));
    if (live.some((p) => !open.reports.has(p))) return;
    this.finish(open, 'complete');
  }

  private finish(open: OpenRound, why: 'complete' | 'deadline'): void {
    if (this.inFlight[open.fragment] !== open) return;
    this.inFlight[open.fragment] = null;
    open.cancelDeadline();
    const tally = new Map<string, PeerId[]>();
    for (const peer of open.participants) {
      const hash = open.reports.get(peer);
      if (hash) tally.set(hash, [...(tally.get(hash) ?? []), peer]);
    }
    const [hash, agreeing] = [...tally.entries()].sort((a, b) => b[1].length - a[1].length)[0] ?? ['', []];
    const { fragment, round } = open;
    if (agreeing.length > 0 && agreeing.length >= this.config.diloco.quorum * open.participants.length) {
      for (const [peer, reported] of open.reports) this.setStatus(peer, reported === hash ? 'synced' : 'diverged');
      this.committedRounds++;
      this.committedHash[fragment] = hash;
      void this.member.broadcast(this.everyone(), {
        kind: 'commit',
        fragment,
        round,
        hash,
        contributors: agreeing,
        roomTokens: this.roomTokens,
      });
      this.options.onEvent?.({
        event: 'round-committed',
        fragment,
        round,
        participants: agreeing.length,
        hash,
        contributors: agreeing,
      });
    } else {
      const reason = why === 'deadline' ? 'deadline' : tally.size > 1 ? 'hash-disagreement' : 'quorum';
      this.abortedRounds++;
      void this.member.broadcast(this.everyone(), {
        kind: 'abort',
        fragment,
        round,
        reason,
        message: `${agreeing.length} of ${open.participants.length} participants agreed`,
      });
      this.options.onEvent?.({ event: 'round-aborted', fragment, round, reason });
    }
    this.maybeOpenRounds();
  }
}
