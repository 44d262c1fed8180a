/**
 * The coordinator (it runs in the host, which is also a replica): the roster, heartbeats,
 * opening rounds from the median worker's progress, participants and shard owners, deadlines,
 * commit by hash agreement, owner reassignment, late joiners and leaving peers (docs/design.md,
 * "Rounds in a room of unequal GPUs", "Apply, commit, abort", "The collective").
 *
 * Schedule: fragment p's round opens when the median synced worker reaches the next point of
 * its grid, H·r + ⌊p·H/P⌋ inner steps (staggered as in the paper), and never while p's previous
 * round is open: at most one round in flight per fragment. Points the median passed meanwhile
 * are skipped.
 */
import { type Codec, createCodec, type Fragment, lowRankPayloadSize } from '@shoal/diloco';
import { formatMemory } from '@shoal/model';
import {
  type Capabilities,
  type DataLedger,
  MAX_MEMBERS,
  type PeerId,
  type RoundOpenMessage,
  type RunConfig,
} from '@shoal/protocol';
import { abortReason, aggregateFaults, type Fault, graceMs, roundMisses, tally } from './commit-rule.ts';
import { dataMembers, RoomDataLedger } from './data-ledger.ts';
import { AdaptiveRank } from './low-rank-rule.ts';
import type { Member } from './member.ts';
import { fragmentStages, PipelineGroups, pipelineStageBytes } from './pipeline/groups.ts';
import type { ReplicaState, ShardClaim } from './replica.ts';
import { type MemberInfo, median, Roster } from './roster.ts';
import { chooseParticipants, seenTokens, shardTable, slowWorkers } from './round-plan.ts';
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

/** A worker's steps as the host counted them (the run state keeps them): see roomRunStateSchema. */
export interface MemberSteps {
  /** The worker's own count of its inner steps, as its heartbeat said. */
  innerStep: number;
  /** Its place on the room's schedule. */
  step: number;
}

export class Coordinator {
  /** Who is in the room, and who is benched. */
  readonly roster: Roster;
  /** A dataset room's ledger of the batches drawn from each shard (null in one-text rooms). */
  readonly ledger: RoomDataLedger | null;
  committedRounds = 0;
  abortedRounds = 0;
  /**
   * No new rounds while set (a dashboard before Start, or paused): members are still welcomed,
   * rounds in flight still finish. Clearing it does not open rounds until the next heartbeat.
   */
  paused = false;
  /** Tokens of members that left, and of the run before a resume (the room's total keeps them). */
  private departedTokens = 0;
  /** The room's tokens never show less (a resumed host's kept view: carryTokens). */
  private tokenFloor = 0;
  /** The room's step (step()): it never goes back, and a resumed run's starts where it was. */
  private stepFloor = 0;
  /** The workers a resumed run state counted, until each comes back (onHello) or the next save. */
  private readonly resumedSteps = new Map<PeerId, MemberSteps>();
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
  /** The run's codec: its block size is the grid shard boundaries fall on. */
  private readonly codec: Codec;
  /** Each fragment's rank, in a low-rank room. */
  private readonly ranks: AdaptiveRank | null;
  /** A pipeline-parallel room's replica groups (docs/pipeline.md), else null. */
  readonly groups: PipelineGroups | null;
  /** Per fragment, the pipeline stage that holds it. */
  private readonly stageOfFragment: number[];
  /** Per pipeline stage, the fragments it holds. */
  private readonly stageFragments: number[][];
  /** Pipeline workers' stages by the state they said they hold (placed there when a slot is free). */
  private readonly heldStage = new Map<PeerId, number>();
  /** Per pipeline stage, the memory a volunteer needs to hold it (docs/pipeline.md). */
  private readonly stageBytes: number[];

  constructor(private readonly options: CoordinatorOptions) {
    const { config, member, fragments } = options;
    this.config = config;
    this.member = member;
    this.deadlineMs = options.deadlineMs ?? 60_000;
    this.codec = createCodec(config.diloco.codec, { blockSize: config.diloco.codecBlockSize });
    this.ranks = config.diloco.lowRank ? new AdaptiveRank(fragments.length, config.diloco.lowRank) : null;
    this.groups = config.pipeline ? new PipelineGroups(config.pipeline.stages) : null;
    const { diloco, pipeline, model } = config;
    this.stageOfFragment = pipeline
      ? fragmentStages(model, diloco.fragments, diloco.fragmentMode, pipeline.stages)
      : [];
    this.stageBytes = pipeline ? pipelineStageBytes(config) : [];
    this.stageFragments = this.stageBytes.map((_, s) =>
      this.stageOfFragment.flatMap((stage, p) => (stage === s ? [p] : [])),
    );
    this.roster = new Roster(
      member.self,
      fragments.length,
      (roster) => {
        void member.broadcast(this.members.keys(), roster);
      },
      (peer) => this.groups?.slot(peer) ?? null,
      () => this.ledger?.message(),
    );
    const { innerSteps: H, fragments: P } = config.diloco;
    const { resume } = options;
    const { dataset } = config.data;
    this.ledger = dataset ? new RoomDataLedger(dataset, config, resume?.data) : null;
    this.lastRound = fragments.map((_, p) => resume?.fragments[p]?.round ?? 0);
    this.departedTokens = resume?.roomTokens ?? 0;
    this.committedRounds = resume?.committedRounds ?? 0;
    this.abortedRounds = resume?.abortedRounds ?? 0;
    this.committedHash = fragments.map(() => null);
    this.inFlight = fragments.map(() => null);
    this.nextOpenStep = fragments.map((_, p) => H + Math.floor((p * H) / P));
    for (const [peer, steps] of Object.entries(resume?.members ?? {})) this.resumedSteps.set(peer, steps);
    this.carryStep(resume?.step ?? 0);
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
      this.roster.heartbeat(info, message, member.clock.now());
      if (this.ledger && message.data && info.role === 'worker') {
        this.ledger.note(from, message.data, dataMembers([...this.members.values()]));
      }
      // a pipeline room places a worker once its heartbeat says which channels it has, and joins
      // up incomplete groups that complete each other once their channels are there
      if (info.role === 'worker' && this.groups) {
        const placed = !this.groups.slot(from) && this.place(from, info.capabilities);
        const reformed = !this.groups.complete(from) && this.groups.reform(this.linked).length > 0;
        if (placed || reformed) this.roster.broadcast();
      }
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

  /** The room's members, by peer. */
  get members(): ReadonlyMap<PeerId, MemberInfo> {
    return this.roster.members;
  }

  /** The room's total tokens trained. */
  get roomTokens(): number {
    let total = this.departedTokens;
    for (const info of this.members.values()) total += info.innerStep * this.tokensPerStep;
    return Math.max(total, this.tokenFloor);
  }

  /**
   * Tokens one worker's inner step adds to the room: a batch, or in a pipeline-parallel room a
   * batch over S, since a group's S stages train the same batch.
   */
  get tokensPerStep(): number {
    const { train, pipeline } = this.config;
    return (train.batchSize * train.seqLen) / (pipeline?.stages ?? 1);
  }

  /**
   * Each fragment's next round on the schedule: its number, whether a round of it is in flight,
   * and the median worker's step it opens at (the room view's countdown).
   */
  get nextRounds(): { fragment: number; round: number; open: boolean; atStep: number }[] {
    return this.nextOpenStep.map((atStep, fragment) => ({
      fragment,
      round: (this.lastRound[fragment] as number) + 1,
      open: this.inFlight[fragment] !== null,
      atStep,
    }));
  }

  /**
   * The room's tokens never show less than `tokens`: a resumed host whose kept view saw tokens
   * trained after its checkpoint. The workers that come back are credited with their steps since
   * the save (onHello), which count those tokens again, so this is a floor, not an addition.
   */
  carryTokens(tokens: number): void {
    if (Number.isFinite(tokens)) this.tokenFloor = Math.max(this.tokenFloor, tokens);
  }

  /**
   * The room's step goes on from at least `step` (a resumed run's saved step, or its kept view's
   * when that is later): each fragment's next round is the first on its grid after it.
   */
  carryStep(step: number): void {
    if (!Number.isFinite(step) || step <= this.stepFloor) return;
    this.stepFloor = step;
    const H = this.config.diloco.innerSteps;
    for (const [p, next] of this.nextOpenStep.entries()) {
      let at = next;
      while (at <= step) at += H;
      this.nextOpenStep[p] = at;
    }
  }

  /** The median synced worker's inner step, on the room's schedule. */
  get medianStep(): number {
    return median(this.syncedWorkers().map((info) => info.scheduleOffset + info.innerStep));
  }

  /**
   * The room's step: where its workers are on the learning-rate schedule (the median synced
   * worker's schedule step, which a newcomer starts from), never going back: not when a worker
   * far ahead leaves, not across a host's restart. Rounds open by it, every page shows it, and
   * the schedule ends when it reaches the total steps.
   */
  step(): number {
    this.stepFloor = Math.max(this.stepFloor, this.medianStep);
    return this.stepFloor;
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
      const claim = this.members.get(owner)?.waitingFor.find((w) => w.fragment === p && w.round === open.round);
      for (const peer of claim?.peers ?? []) if (participants.has(peer)) peers.add(peer);
    }
    return { round: open.round, peers: [...peers].sort() };
  }

  /**
   * Each worker's steps for the run state: those in the room, then those a resumed run state
   * counted that have not come back yet (they may still), MAX_MEMBERS in all.
   */
  memberSteps(): Record<PeerId, MemberSteps> {
    const steps = new Map<PeerId, MemberSteps>();
    for (const info of this.members.values()) {
      if (info.role !== 'worker') continue;
      steps.set(info.peer, { innerStep: info.baseStep + info.innerStep, step: info.scheduleOffset + info.innerStep });
    }
    for (const [peer, saved] of this.resumedSteps) {
      if (steps.size >= MAX_MEMBERS) break;
      if (!steps.has(peer)) steps.set(peer, saved);
    }
    return Object.fromEntries([...steps].slice(0, MAX_MEMBERS));
  }

  syncedWorkers(): MemberInfo[] {
    return this.roster.syncedWorkers();
  }

  /** Every member that holds θ_global or is fetching it, and the host itself. */
  private everyone(): PeerId[] {
    return [this.member.self, ...this.members.keys()];
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
    // every fragment, or in a pipeline room one stage's (a stage worker follows its own)
    const current = (p: number) =>
      holds.find((h) => h.fragment === p)?.hash === this.options.replica.fragments[p]?.hash;
    const sets = [this.options.replica.fragments.map((_, p) => p), ...this.stageFragments];
    const held = sets.findIndex((set) => set.every(current));
    const holdsCurrent = held >= 0;
    // a stage worker that comes back (a restarted host) is placed in the stage whose state it holds
    if (held > 0) this.heldStage.set(from, held - 1);
    const status: MemberInfo['status'] = role === 'spectator' ? 'synced' : fresh || holdsCurrent ? 'synced' : 'syncing';
    // what it must show it holds before rounds name it again (a pipeline stage follows only its
    // stage's fragments, which are not known here: one agreeing report does for it)
    const behind = new Set(
      status === 'syncing' && this.stageFragments.length === 0
        ? this.options.replica.fragments.flatMap((_, p) => (current(p) ? [] : [p]))
        : [],
    );
    if (existing) {
      existing.behind = behind;
      // a hello does not lift a bench: the member stays out of rounds until it has served it
      if (existing.status !== 'excluded') existing.status = status;
      // a participant that found itself behind cannot contribute to its rounds in flight: that is
      // no miss of its own
      if (status === 'syncing') for (const open of this.inFlight) open?.excused.add(from);
      existing.capabilities = capabilities;
    } else {
      // A worker the resumed run state counted, back with at least the steps it had then: its
      // steps since the save count, and it keeps its place. Anyone else starts at the room's step.
      const resumed = role === 'worker' ? this.resumedSteps.get(from) : undefined;
      this.resumedSteps.delete(from);
      const credited = resumed !== undefined && ownStep >= resumed.innerStep;
      const newcomer = {
        peer: from,
        role,
        status,
        capabilities,
        baseStep: credited ? resumed.innerStep : ownStep,
        behind,
        scheduleOffset: credited ? resumed.step : this.step(),
      };
      this.roster.add(newcomer, this.member.clock.now());
      this.options.onEvent?.({ event: 'peer-joined', peer: from });
    }
    void this.member.send(from, {
      kind: 'welcome',
      config: this.config,
      fragments: this.options.replica.fragments.map((f, fragment) => ({ fragment, round: f.round, hash: f.hash })),
      roomTokens: this.roomTokens,
      stateFrom: status === 'syncing' ? this.member.self : null,
    });
    this.roster.broadcast();
    this.maybeOpenRounds();
  }

  private removeMember(peer: PeerId, reason: string): void {
    const info = this.members.get(peer);
    if (!info) return;
    this.roster.members.delete(peer);
    this.groups?.remove(peer, this.linked);
    this.heldStage.delete(peer);
    this.departedTokens += info.innerStep * this.tokensPerStep;
    this.options.onEvent?.({ event: 'peer-left', peer, reason });
    for (const round of this.inFlight) {
      if (!round?.participants.includes(peer)) continue;
      // a shard whose owner or checker is gone can no longer be checked: the host takes it over
      for (const [shard, entry] of round.message.shards.entries()) {
        if (entry.owner === peer || entry.checker === peer) this.referee(round, shard);
      }
      this.maybeFinish(round);
    }
    this.roster.broadcast();
    this.maybeOpenRounds();
  }

  /**
   * Opens a round of fragment p now if none is in flight, whatever the schedule says (the
   * simulator's final sync before evaluation). False when it could not.
   */
  openNow(p: number): boolean {
    const workers = this.holders(p, this.syncedWorkers());
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

  /**
   * A pipeline room: the worker's slot in a group whose members it has channels to (its heartbeat
   * says, the others' may predate it), in a stage its memory holds. True when placed; one whose
   * memory holds no stage stays a replica that does not train, and the roster says why.
   */
  private place(peer: PeerId, capabilities: Capabilities): boolean {
    if (!this.groups) return false;
    const memory = capabilities.memoryBytes;
    const fits = (stage: number) => memory === undefined || (this.stageBytes[stage] as number) <= memory;
    if (this.groups.add(peer, fits, this.linked, this.heldStage.get(peer))) return true;
    const smallest = Math.min(...this.stageBytes);
    this.roster.setReasons(
      new Map([
        [
          peer,
          `its ${formatMemory(memory ?? 0)} holds no pipeline stage (the smallest needs ${formatMemory(smallest)})`,
        ],
      ]),
    );
    return false;
  }

  /**
   * The workers that train fragment p: all of them, or in a pipeline-parallel room the holders of
   * its stage in complete groups (a round synchronises one stage across the replicas).
   */
  /** Whether a's last heartbeat lists a channel to b (true before a's first heartbeat). */
  private readonly linked = (a: PeerId, b: PeerId): boolean => this.members.get(a)?.reachable?.has(b) ?? true;

  private holders(p: number, workers: MemberInfo[]): MemberInfo[] {
    const groups = this.groups;
    if (!groups) return workers;
    const stage = this.stageOfFragment[p];
    return workers.filter((w) => groups.slot(w.peer)?.stage === stage && groups.complete(w.peer));
  }

  /** Opens every fragment's round that the room's step calls for. */
  maybeOpenRounds(): void {
    if (this.paused) return;
    let workers = this.syncedWorkers();
    // every worker benched: nobody is left to train with, so the benches end now
    if (workers.length === 0 && this.roster.liftBenches(true)) workers = this.syncedWorkers();
    if (workers.length === 0) return;
    const step = this.step();
    for (let p = 0; p < this.inFlight.length; p++) {
      if (this.inFlight[p] || step < (this.nextOpenStep[p] as number)) continue;
      const holders = this.holders(p, workers);
      if (holders.length > 0) this.open(p, holders);
    }
  }

  private open(p: number, workers: MemberInfo[]): void {
    const { diloco } = this.config;
    const fragment = this.options.fragments[p] as Fragment;
    this.roster.roundOpened();
    // The others train on and follow as replicas; the roster says why they were left out.
    // a pipeline room's groups are its structure: a slow stage is waited for, not left out
    const slow = this.groups ? new Map<PeerId, string>() : slowWorkers(workers);
    const { participants, reasons } = chooseParticipants(
      workers.filter((w) => !slow.has(w.peer)),
      this.options.unreachableHint,
    );
    this.roster.setReasons(new Map([...reasons, ...slow]));
    const n = participants.length;
    const round = (this.lastRound[p] as number) + 1;
    this.lastRound[p] = round;
    // The next round of p is H steps on, on the grid; grid points the room has already passed are
    // skipped: a round carries all the training since the last one, and rounds opened back to back
    // to catch up would carry none, so their outer steps would apply momentum alone.
    const H = diloco.innerSteps;
    let next = (this.nextOpenStep[p] as number) + H;
    const step = this.step();
    while (next <= step) next += H;
    this.nextOpenStep[p] = next;
    const tokensMedian = median(workers.map((w) => w.tokensSince[p] ?? 0));
    const maxWeight = Math.max(1, Math.round(diloco.weightCapFactor * Math.max(tokensMedian, 1)));
    const weightCaps = participants.map((peer) => seenTokens(this.members.get(peer) as MemberInfo, p, this.config));
    const infos = participants.map((peer) => this.members.get(peer) as MemberInfo);
    const stepMs = stepTimes(infos, this.config);
    // a low-rank round: its rank from the participants' reports of p's last round
    this.ranks?.observe(
      p,
      infos.map((info) => info.lowRankErrors[p] ?? []),
    );
    const lowRank = this.ranks?.spec(p, round);
    const payloadValues = lowRank ? lowRankPayloadSize(fragment.tensors, lowRank) : fragment.size;
    const message: RoundOpenMessage = {
      kind: 'round-open',
      fragment: p,
      round,
      codec: this.codec.name,
      participants,
      shards: shardTable(payloadValues, this.codec, participants),
      fragmentSize: payloadValues,
      blockSize: this.codec.blockSize,
      deadlineMs: this.deadlineMs,
      roomTokens: this.roomTokens,
      baseHash: this.committedHash[p] ?? this.options.replica.fragment(p).hash,
      maxWeight,
      weightCaps,
      ...(stepMs ? { stepMs } : {}),
      ...(lowRank ? { lowRank } : {}),
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
    this.options.onEvent?.({
      event: 'round-opened',
      fragment: p,
      round,
      participants: n,
      codec: this.codec.name,
      rank: lowRank?.rank ?? null,
      payloadValues,
    });
    void this.member.broadcast(this.everyone(), message);
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
    duties.take(open.message, this.codec, shard, 'referee', this.deadlineMs, live);
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
      if (entry && heard.owner === null)
        this.roster.bench(entry.owner, `sent no result for ${open.fragment}:${open.round}`);
      if (entry?.checker && heard.checker === null) {
        this.roster.bench(entry.checker, `sent no check for ${open.fragment}:${open.round}`);
      }
      this.referee(open, shard);
    }
  }

  /** The referee's result for shard k is in: an owner or checker that computed wrong is benched. */
  private judgeShard(p: number, round: number, shard: number, referee: ShardClaim): void {
    const open = this.inFlight[p];
    const entry = open?.round === round ? open.message.shards[shard] : undefined;
    if (!entry) return;
    const heard = this.options.replica.shardClaims(p, round, shard);
    this.benchAll(aggregateFaults(`${p}:${round}`, entry, heard, referee));
  }

  private benchAll(faults: Fault[]): void {
    for (const { peer, why } of faults) this.roster.bench(peer, why);
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
      if (round === this.lastRound[p] && hash === this.committedHash[p]) this.holds(from, p);
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

  /** `peer` reported fragment p's committed hash: synced once it has for every fragment it was behind on. */
  private holds(peer: PeerId, p: number): void {
    const info = this.members.get(peer);
    info?.behind?.delete(p);
    if (!info?.behind?.size) this.roster.setStatus(peer, 'synced');
  }

  private tally(open: OpenRound, hostHash: string | null) {
    const isLive = (peer: PeerId) => this.members.has(peer);
    return tally(open.participants, isLive, open.reports, hostHash, this.config.diloco.quorum);
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
    const grace = graceMs(this.deadlineMs, clock.now() - open.openedAt);
    open.cancelGrace = clock.setTimer(grace, () => this.finish(open, 'grace'));
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
      const contributors = new Set(
        this.options.replica.verifiedContributors(fragment, round).flatMap((peers) => peers ?? []),
      );
      this.benchAll(roundMisses(`${fragment}:${round}`, live, open.excused, open.reports, contributors));
      for (const [peer, reported] of open.reports) {
        if (reported === hostHash) this.holds(peer, fragment);
        else this.roster.setStatus(peer, 'diverged');
      }
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
      const reason = abortReason(why, hostHash, open.reports);
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
}

/**
 * Each participant's time per inner step, ms: the step time its heartbeats claim (tokens per
 * second), but never more than this coordinator measured between its heartbeats (a member cannot
 * pass for slower than it is, to stretch everyone's merges); one that claimed nothing takes the
 * median of the others'. Undefined when none did.
 */
export function stepTimes(infos: MemberInfo[], config: RunConfig): number[] | undefined {
  const tokensPerStep = config.train.batchSize * config.train.seqLen;
  const claimed = infos.map(({ tokensPerSecond: t }) => (Number.isFinite(t) && t > 0 ? (tokensPerStep * 1000) / t : 0));
  const known = claimed.filter((ms) => ms > 0);
  if (known.length === 0) return undefined;
  const typical = median(known);
  return claimed.map((ms, i) => {
    const measured = (infos[i] as MemberInfo).measuredStepMs;
    const bounded = measured > 0 ? Math.min(ms || typical, measured) : ms || typical;
    return Math.min(3_600_000, Math.max(1e-3, bounded));
  });
}
