/**
 * The coordinator (it runs in the host, which is also a replica): the roster and heartbeats, who
 * comes and goes (hello, leave, a failed link, late joiners), and the schedule: it opens rounds
 * from the median worker's progress, with their participants and shard owners (docs/design.md,
 * "Rounds in a room of unequal GPUs", "Apply, commit, abort", "The collective"). The rounds in
 * flight, their commit by hash agreement and the host's refereeing are the RoundReferee's; the
 * room's tokens and step are RoomProgress's; a pipeline-parallel room's groups are
 * PipelinePlacement's.
 *
 * Schedule: fragment p's round opens when the median synced worker reaches the next point of
 * its grid, H·r + ⌊p·H/P⌋ inner steps (staggered as in the paper), and never while p's previous
 * round is open: at most one round in flight per fragment. Points the median passed meanwhile
 * are skipped.
 */
import { type Codec, createCodec, type Fragment, lowRankPayloadSize } from '@shoal/diloco';
import type { Capabilities, PeerId, RoundOpenMessage, RunConfig } from '@shoal/protocol';
import type { CoordinatorOptions } from './coordinator-options.ts';
import { dataMembers, RoomDataLedger } from './data-ledger.ts';
import { AdaptiveRank } from './low-rank-rule.ts';
import type { Member } from './member.ts';
import type { PipelineGroups } from './pipeline/groups.ts';
import { PipelinePlacement } from './pipeline/placement.ts';
import { type MemberSteps, RoomProgress } from './room-progress.ts';
import { type MemberInfo, median, Roster } from './roster.ts';
import { chooseParticipants, seenTokens, shardTable, slowWorkers, stepTimes } from './round-plan.ts';
import { RoundReferee } from './round-referee.ts';

export type { CoordinatorEvent, CoordinatorOptions } from './coordinator-options.ts';

export class Coordinator {
  /** Who is in the room, and who is benched. */
  readonly roster: Roster;
  /** A dataset room's ledger of the batches drawn from each shard (null in one-text rooms). */
  readonly ledger: RoomDataLedger | null;
  /**
   * No new rounds while set (a dashboard before Start, or paused): members are still welcomed,
   * rounds in flight still finish. Clearing it does not open rounds until the next heartbeat.
   */
  paused = false;
  private readonly lastRound: number[];
  private readonly nextOpenStep: number[];
  private readonly config: RunConfig;
  private readonly member: Member;
  private readonly deadlineMs: number;
  /** The run's codec: its block size is the grid shard boundaries fall on. */
  private readonly codec: Codec;
  /** Each fragment's rank, in a low-rank room. */
  private readonly ranks: AdaptiveRank | null;
  /** A pipeline-parallel room's groups and stages (docs/pipeline.md), else null. */
  private readonly placement: PipelinePlacement | null;
  /** The rounds in flight, until each commits or aborts. */
  private readonly referee: RoundReferee;
  /** The room's tokens and step. */
  private readonly progress: RoomProgress;

  constructor(private readonly options: CoordinatorOptions) {
    const { config, member, fragments } = options;
    this.config = config;
    this.member = member;
    this.deadlineMs = options.deadlineMs ?? 60_000;
    this.codec = createCodec(config.diloco.codec, { blockSize: config.diloco.codecBlockSize });
    this.ranks = config.diloco.lowRank ? new AdaptiveRank(fragments.length, config.diloco.lowRank) : null;
    this.roster = new Roster(
      member.self,
      fragments.length,
      (roster) => {
        void member.broadcast(this.members.keys(), roster);
      },
      (peer) => this.groups?.slot(peer) ?? null,
      () => this.ledger?.message(),
    );
    this.placement = config.pipeline ? new PipelinePlacement(config, config.pipeline, this.roster) : null;
    const { innerSteps: H, fragments: P } = config.diloco;
    const { resume } = options;
    const { dataset } = config.data;
    this.ledger = dataset ? new RoomDataLedger(dataset, config, resume?.data) : null;
    this.progress = new RoomProgress(config, this.roster, resume);
    this.referee = new RoundReferee(
      {
        config,
        member,
        replica: options.replica,
        roster: this.roster,
        codec: this.codec,
        deadlineMs: this.deadlineMs,
        duties: options.duties,
        onEvent: options.onEvent,
        lastRound: (p) => this.lastRound[p] as number,
        everyone: () => this.everyone(),
        roomTokens: () => this.roomTokens,
        ended: () => this.maybeOpenRounds(),
      },
      fragments.length,
      resume,
    );
    this.lastRound = fragments.map((_, p) => resume?.fragments[p]?.round ?? 0);
    this.nextOpenStep = fragments.map((_, p) => H + Math.floor((p * H) / P));
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
      // a pipeline room places a worker once its heartbeat says which channels it has
      if (info.role === 'worker' && this.placement?.heartbeat(from, info.capabilities)) this.roster.broadcast();
      this.maybeOpenRounds();
    });
    member.on('hash-report', (from, message) =>
      this.referee.onHashReport(from, message.fragment, message.round, message.hash),
    );
    member.on('leave', (from, message) => this.removeMember(from, message.reason || 'left'));
    options.duties?.onFinished((job) => {
      if (job.role !== 'referee') return;
      this.referee.judgeShard(job.fragment, job.round, job.shard, { hash: job.resultHash, accepted: job.accepted });
    });
    member.onPeerDown((peer, reason) => this.removeMember(peer, reason));
  }

  /** A pipeline-parallel room's replica groups (docs/pipeline.md), else null. */
  get groups(): PipelineGroups | null {
    return this.placement?.groups ?? null;
  }

  /** Rounds committed in the room (a resumed run's count on from the saved one). */
  get committedRounds(): number {
    return this.referee.committedRounds;
  }

  set committedRounds(count: number) {
    this.referee.committedRounds = count;
  }

  /** Rounds aborted in the room (a resumed run's count on from the saved one). */
  get abortedRounds(): number {
    return this.referee.abortedRounds;
  }

  set abortedRounds(count: number) {
    this.referee.abortedRounds = count;
  }

  /** The room's members, by peer. */
  get members(): ReadonlyMap<PeerId, MemberInfo> {
    return this.roster.members;
  }

  /** The room's total tokens trained. */
  get roomTokens(): number {
    return this.progress.roomTokens;
  }

  /**
   * Tokens one worker's inner step adds to the room: a batch, or in a pipeline-parallel room a
   * batch over S, since a group's S stages train the same batch.
   */
  get tokensPerStep(): number {
    return this.progress.tokensPerStep;
  }

  /**
   * Each fragment's next round on the schedule: its number, whether a round of it is in flight,
   * and the median worker's step it opens at (the room view's countdown).
   */
  get nextRounds(): { fragment: number; round: number; open: boolean; atStep: number }[] {
    return this.nextOpenStep.map((atStep, fragment) => ({
      fragment,
      round: (this.lastRound[fragment] as number) + 1,
      open: this.referee.isInFlight(fragment),
      atStep,
    }));
  }

  /**
   * The room's tokens never show less than `tokens`: a resumed host whose kept view saw tokens
   * trained after its checkpoint. The workers that come back are credited with their steps since
   * the save (onHello), which count those tokens again, so this is a floor, not an addition.
   */
  carryTokens(tokens: number): void {
    this.progress.carryTokens(tokens);
  }

  /**
   * The room's step goes on from at least `step` (a resumed run's saved step, or its kept view's
   * when that is later): each fragment's next round is the first on its grid after it.
   */
  carryStep(step: number): void {
    if (!this.progress.carryStep(step)) return;
    const H = this.config.diloco.innerSteps;
    for (const [p, next] of this.nextOpenStep.entries()) {
      let at = next;
      while (at <= step) at += H;
      this.nextOpenStep[p] = at;
    }
  }

  /** The median synced worker's inner step, on the room's schedule. */
  get medianStep(): number {
    return this.progress.medianStep;
  }

  /**
   * The room's step: where its workers are on the learning-rate schedule (the median synced
   * worker's schedule step, which a newcomer starts from), never going back: not when a worker
   * far ahead leaves, not across a host's restart. Rounds open by it, every page shows it, and
   * the schedule ends when it reaches the total steps.
   */
  step(): number {
    return this.progress.step();
  }

  /**
   * Whom fragment p's round in flight waits for: the participants whose contribution a shard's
   * owner still waits for, as the owners' heartbeats say (only a named owner's word counts, and
   * only of the round's participants). Null when no round of p is in flight.
   */
  waitingFor(p: number): { round: number; peers: PeerId[] } | null {
    return this.referee.waitingFor(p);
  }

  /**
   * Each worker's steps for the run state: those in the room, then those a resumed run state
   * counted that have not come back yet (they may still), MAX_MEMBERS in all.
   */
  memberSteps(): Record<PeerId, MemberSteps> {
    return this.progress.memberSteps();
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
    const { replica } = this.options;
    const fresh = replica.fragments.every((f) => f.round === 0);
    const existing = this.members.get(from);
    // every fragment, or in a pipeline room one stage's (a stage worker follows its own); a stage
    // worker that comes back (a restarted host) is placed in the stage whose state it holds
    const current = (p: number) => holds.find((h) => h.fragment === p)?.hash === replica.fragments[p]?.hash;
    const holdsCurrent = replica.fragments.every((_, p) => current(p)) || !!this.placement?.noteHeld(from, current);
    const status: MemberInfo['status'] = role === 'spectator' ? 'synced' : fresh || holdsCurrent ? 'synced' : 'syncing';
    // what it must show it holds before rounds name it again (a pipeline stage follows only its
    // stage's fragments, which are not known here: one agreeing report does for it)
    const behind = new Set(
      status === 'syncing' && !this.placement ? replica.fragments.flatMap((_, p) => (current(p) ? [] : [p])) : [],
    );
    if (existing) {
      existing.behind = behind;
      // a hello does not lift a bench: the member stays out of rounds until it has served it
      if (existing.status !== 'excluded') existing.status = status;
      // a participant that found itself behind cannot contribute to its rounds in flight: that is
      // no miss of its own
      if (status === 'syncing') this.referee.excuse(from);
      existing.capabilities = capabilities;
    } else {
      const { baseStep, scheduleOffset } = this.progress.arrive(from, role, ownStep);
      this.roster.add(
        { peer: from, role, status, capabilities, baseStep, behind, scheduleOffset },
        this.member.clock.now(),
      );
      this.options.onEvent?.({ event: 'peer-joined', peer: from });
    }
    void this.member.send(from, {
      kind: 'welcome',
      config: this.config,
      fragments: replica.fragments.map((f, fragment) => ({ fragment, round: f.round, hash: f.hash })),
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
    this.placement?.remove(peer);
    this.progress.depart(info);
    this.options.onEvent?.({ event: 'peer-left', peer, reason });
    this.referee.left(peer);
    this.roster.broadcast();
    this.maybeOpenRounds();
  }

  /**
   * Opens a round of fragment p now if none is in flight, whatever the schedule says (the
   * simulator's final sync before evaluation). False when it could not.
   */
  openNow(p: number): boolean {
    const workers = this.holders(p, this.syncedWorkers());
    if (workers.length === 0 || this.referee.isInFlight(p)) return false;
    this.open(p, workers);
    return true;
  }

  /**
   * Stops the coordinator: no new rounds, and the timers of rounds in flight are cancelled (a
   * stopping `shoal host` must not wait out a round's deadline). Rounds in flight stay uncommitted.
   */
  close(): void {
    this.paused = true;
    this.referee.close();
    this.options.duties?.clear();
  }

  /** Whether fragment p has a round in flight. */
  isInFlight(p: number): boolean {
    return this.referee.isInFlight(p);
  }

  /** The host's replica found shard k's owner and checker in disagreement. */
  onDispute(p: number, round: number, shard: number): void {
    this.referee.onDispute(p, round, shard);
  }

  /**
   * The workers that train fragment p: all of them, or in a pipeline-parallel room the holders of
   * its stage in complete groups (a round synchronises one stage across the replicas).
   */
  private holders(p: number, workers: MemberInfo[]): MemberInfo[] {
    return this.placement ? this.placement.holders(p, workers) : workers;
  }

  /** Opens every fragment's round that the room's step calls for. */
  maybeOpenRounds(): void {
    if (this.paused) return;
    let workers = this.syncedWorkers();
    // every worker benched: nobody is left to train with, so the benches end now
    if (workers.length === 0 && this.roster.liftBenches(true)) workers = this.syncedWorkers();
    if (workers.length === 0) return;
    const step = this.step();
    for (let p = 0; p < this.nextOpenStep.length; p++) {
      if (this.referee.isInFlight(p) || step < (this.nextOpenStep[p] as number)) continue;
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
    const slow = this.placement ? new Map<PeerId, string>() : slowWorkers(workers);
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
      baseHash: this.referee.baseHash(p),
      maxWeight,
      weightCaps,
      ...(stepMs ? { stepMs } : {}),
      ...(lowRank ? { lowRank } : {}),
    };
    this.referee.watch(message);
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
}
