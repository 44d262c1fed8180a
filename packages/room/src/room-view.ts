/**
 * The room view of a host (@shoal/protocol's RoomViewUpdate: what the dashboard shows and what
 * the watch link gets), recorded from its Host: the round timeline from the coordinator's events
 * and the host replica's result shards, the peers' rows from the coordinator's members, and
 * chart points sampled when the caller says (a timer in `shoal host` or the dashboard).
 *
 * The wire figure (metrics.wire: the codec and each fragment's rank, in words too) is defined
 * here once, for the dashboard, the watch page and `shoal host` alike.
 *
 * Byte figures count from the recorder's start, or, for a resumed run, from its last chart point
 * (`continueFrom`) and the kept view's counters (`kept`). They add up what each counter grew by,
 * the host's own and every member's, so they never go back: not when members leave (a stopped
 * room), not when a counter restarts (the host's page reloaded). A resumed run's recorder also
 * goes on from its kept rounds, each peer's committed rounds and the best validation loss, so
 * nothing a page shows goes back when a host reloads.
 *
 * Every room figure a page shows is defined here once: the room's step (Coordinator.step), each
 * fragment's next round and its estimated time, the validation loss's trend, and each peer's
 * share of the room's tokens.
 *
 * A pipeline-parallel room's view adds each worker's place (group, stage, the blocks its stage
 * holds) and a `pipeline` section: the run's S, M, schedule and activation dtype, each stage's
 * blocks and memory, and the coordinator's groups (per stage the member or null, complete or
 * waiting for which stages). `pipelineGroupsOf` derives the groups from members' places, so the
 * dashboard (from the coordinator) and a volunteer (from its roster) show the same table.
 * The protocol's schema carries them, so the watch link shows the same groups.
 *
 *   const recorder = new RoomViewRecorder({ host, roomId, hostKind: 'cli' });
 *   // Host.create({ …, onEvent: (event) => recorder.onEvent(event) })
 *   setInterval(() => { recorder.sample(); signal.publish(recorder.update()); }, 2000);
 */

import { type StageSpec, splitStages, stagePlan } from '@shoal/model';
import {
  appendThinned,
  MAX_VIEW_PEERS,
  MAX_VIEW_POINTS,
  MAX_VIEW_ROUNDS,
  type PeerId,
  type PipelineSlot,
  ROOM_VIEW_VERSION,
  type RoomEnd,
  type RoomStatus,
  type RoomViewEvalTrend,
  type RoomViewGroup,
  type RoomViewMetrics,
  type RoomViewNextRound,
  type RoomViewPeer,
  type RoomViewPipeline,
  type RoomViewPlace,
  type RoomViewPoint,
  type RoomViewRound,
  type RoomViewUpdate,
  type RoomViewWire,
  type RunConfig,
} from '@shoal/protocol';
import type { CoordinatorEvent, Host } from '@shoal/swarm';
import { type MemberInfo, median, stepsPerSecondNow } from '@shoal/swarm';

export type { RoomViewGroup, RoomViewPipeline, RoomViewPlace, RoomViewStage } from '@shoal/protocol';

/** A peer's row (the protocol's, with its pipeline place when it has one). */
export type RoomViewPeerRow = RoomViewPeer;

/** The view a recorder makes: the protocol's RoomViewUpdate, a pipeline room's fields included. */
export type RoomView = RoomViewUpdate;

/** A slot with the blocks its stage holds (`split`: splitStages of the run). */
export function placeOf(slot: PipelineSlot, split: readonly StageSpec[]): RoomViewPlace {
  const spec = split[slot.stage];
  if (!spec) throw new RangeError(`stage ${slot.stage} of a ${split.length}-stage pipeline`);
  return { ...slot, firstBlock: spec.firstBlock, endBlock: spec.endBlock };
}

/**
 * The replica groups of a room of `stages` stages from its members' places (the coordinator's
 * slots, or a roster's `pipeline` fields): per group, who holds each stage, lowest id first. A
 * member whose place names an older version of its group than another member's is left out, as
 * its stages would (it is being moved).
 */
export function pipelineGroupsOf(
  members: Iterable<{ peer: PeerId; pipeline?: PipelineSlot | null }>,
  stages: number,
): RoomViewGroup[] {
  const placed = [...members].flatMap(({ peer, pipeline }) => (pipeline ? [{ peer, slot: pipeline }] : []));
  const versions = new Map<number, number>();
  for (const { slot } of placed) versions.set(slot.group, Math.max(versions.get(slot.group) ?? 0, slot.version));
  return [...versions]
    .sort(([a], [b]) => a - b)
    .map(([id, version]) => {
      const members: (PeerId | null)[] = new Array(stages).fill(null);
      for (const { peer, slot } of placed) {
        if (slot.group === id && slot.version === version && slot.stage < stages) members[slot.stage] = peer;
      }
      const waitingFor = members.flatMap((peer, stage) => (peer === null ? [stage] : []));
      return { id, version, members, complete: waitingFor.length === 0, waitingFor };
    });
}

/**
 * Inner steps of the whole room: its tokens ÷ tokens per step. This is NOT the room's place on the
 * learning-rate schedule: each worker runs the schedule on its own inner steps, so with M workers
 * this grows M times as fast. It sizes a checkpoint (how much training went into it).
 */
export function scheduleStep(config: RunConfig, roomTokens: number): number {
  const { batchSize, seqLen } = config.train;
  return Math.floor(roomTokens / (batchSize * seqLen));
}

/** Evaluations in a row above the best that make a rising validation loss, and by how much (1%). */
export const RISING_EVALS = 3;
export const RISING_MARGIN = 0.01;

/** One evaluation of θ_global: its loss and the room's step. */
export interface Evaluation {
  loss: number;
  step: number;
}

/**
 * The validation loss's trend from the best evaluation so far and the latest ones (newest last,
 * at least RISING_EVALS of them kept): rising when the last RISING_EVALS are each above the best
 * by more than RISING_MARGIN (the model may be overfitting its text), once the room has trained
 * on as many tokens as its text holds (`pastOnePass`): before that a rise is an early evaluation's
 * noise, not overfitting. Null before any evaluation.
 */
export function evalTrendOf(
  best: Evaluation | null,
  recent: readonly Evaluation[],
  pastOnePass = true,
): RoomViewEvalTrend | null {
  const latest = recent.at(-1);
  if (!best || !latest) return null;
  const last = recent.slice(-RISING_EVALS);
  const rising =
    pastOnePass && last.length === RISING_EVALS && last.every((e) => e.loss > best.loss * (1 + RISING_MARGIN));
  return { best: best.loss, bestStep: best.step, latest: latest.loss, rising };
}

/**
 * A fragment's countdown: the room's steps to its next round's opening, and that many step times
 * (null while no speed is known). An open round, or one already due, is 0 steps away.
 */
export function nextRoundOf(
  next: { fragment: number; round: number; open: boolean; atStep: number },
  roomStep: number,
  stepMs: number | null,
): RoomViewNextRound {
  const steps = next.open ? 0 : Math.max(0, next.atStep - roomStep);
  return {
    fragment: next.fragment,
    round: next.round,
    open: next.open,
    steps,
    etaMs: stepMs === null ? null : steps * stepMs,
  };
}

/** What a resumed recorder goes on from (the view the server kept for the room's watch links). */
export interface KeptView {
  rounds?: RoomViewRound[];
  /** Committed rounds each peer contributed to. */
  contributed?: Record<PeerId, number>;
  /** The validation loss's best, at which room step. */
  bestEval?: Evaluation | null;
  /** The room's step it showed: a resumed view never shows a smaller one. */
  step?: number;
  /** Each peer's bytes sent as its heartbeat last said: counted already (RoomViewPoint.bytes). */
  bytes?: Record<PeerId, number>;
  /** The host's own mesh counters it showed: the next host's go on from them. */
  hostBytes?: { sent: number; received: number };
}

/** What a recorder goes on from, read off a kept view (a round that was open then never ends). */
export function keptOf(view: Pick<RoomView, 'rounds' | 'peers' | 'metrics'>): KeptView {
  const trend = view.metrics.evalTrend;
  return {
    rounds: view.rounds.map((round) =>
      round.outcome === 'open'
        ? { ...round, outcome: 'aborted', detail: 'the host went away', endedAt: round.endedAt ?? round.openedAt }
        : round,
    ),
    contributed: Object.fromEntries(view.peers.map((peer) => [peer.peer, peer.roundsContributed])),
    bestEval: trend ? { loss: trend.best, step: trend.bestStep } : null,
    step: view.metrics.step,
    bytes: Object.fromEntries(view.peers.map((peer) => [peer.peer, peer.bytesSent])),
    hostBytes: { sent: view.metrics.bytesSent, received: view.metrics.bytesReceived },
  };
}

export interface RoomViewRecorderOptions {
  host: Host;
  roomId: string;
  hostKind: RoomViewUpdate['hostKind'];
  /** Epoch ms when the run started; default now(). The view's times are ms since then. */
  startedAt?: number;
  /** Epoch ms; default Date.now. */
  now?: () => number;
  /**
   * A resumed run's last chart point (the server keeps the history for watch links): the fp32 and
   * data-parallel comparisons go on from its counts instead of from zero. Pass the run's original
   * `startedAt` with it, so the time axis goes on too.
   */
  continueFrom?: RoomViewPoint | null;
  /** A resumed run's rounds, peers' committed rounds and best evaluation. */
  kept?: KeptView | null;
  /** The tokens of the room's training text (a rising loss is overfitting past them); null: not known. */
  textTokens?: number | null;
}

/**
 * Bytes a ring all-reduce of `values` fp32 numbers among n peers sends in all: each peer sends
 * 2(n − 1)/n of the vector (reduce-scatter, then all-gather), n peers together 2(n − 1)·values·4.
 */
export function ringAllReduceBytes(values: number, n: number): number {
  return n < 2 ? 0 : 2 * (n - 1) * values * 4;
}

/**
 * How a room's rounds travel, in words: 'fp4 (dense)'; 'fp4, low-rank r 8' (a fixed rank);
 * 'fp4, low-rank r 8 / 4 (adaptive, ≤ 8)' (each fragment's rank, shown once when they agree;
 * 'dense' for a fragment whose latest round was dense (rank 0), '–' for one with no round yet);
 * ' · one-step delay' added under overlapRounds 1.
 */
export function wireLabel(codec: string, ranks: readonly (number | null)[], diloco: RunConfig['diloco']): string {
  const { lowRank, overlapRounds } = diloco;
  let text = `${codec} (dense)`;
  if (lowRank) {
    const shown = new Set(ranks).size === 1 ? ranks.slice(0, 1) : ranks;
    const word = (rank: number | null) => (rank === null ? '–' : rank === 0 ? 'dense' : String(rank));
    const ranksText = ranks.every((rank) => rank === null) ? '' : ` r ${shown.map(word).join(' / ')}`;
    const rule = lowRank.target > 0 ? ` (adaptive, ≤ ${lowRank.rank})` : '';
    text = `${codec}, low-rank${ranksText}${rule}`;
  }
  return overlapRounds === 1 ? `${text} · one-step delay` : text;
}

/** Text fields of the view are at most 500 characters (a long "no channel to …" reason is cut). */
const clip = (text: string) => (text.length > 500 ? `${text.slice(0, 499)}…` : text);

export class RoomViewRecorder {
  readonly startedAt: number;
  private readonly host: Host;
  private readonly roomId: string;
  private readonly hostKind: RoomViewUpdate['hostKind'];
  private readonly now: () => number;
  private status: RoomStatus = 'waiting';
  private endedBy: RoomEnd | null = null;
  private evalLoss: number | null = null;
  /** The best evaluation so far, and the latest ones (the trend). */
  private bestEval: Evaluation | null = null;
  private recentEvals: Evaluation[] = [];
  /**
   * Per peer, the room's tokens when it was first seen less its own then: its share counts from
   * there, over the same window as the room's.
   */
  private readonly shareBase = new Map<PeerId, number>();
  /** The latest round's quantiser, and each fragment's rank in its latest round (0: dense; null: none yet). */
  private codec: string;
  private readonly ranks: (number | null)[];
  /** The most recent MAX_VIEW_ROUNDS rounds, oldest first. */
  private readonly rounds: RoomViewRound[] = [];
  /** Committed rounds each peer contributed to (kept after it leaves, should it come back). */
  private readonly contributed = new Map<PeerId, number>();
  /** Every point, thinned (snapshot), and those since the last update(). */
  private history: RoomViewPoint[] = [];
  private pending: RoomViewPoint[] = [];
  private fp32Bytes = 0;
  private dpBytes = 0;
  /** The room's bytes sent (RoomViewPoint.bytes): what each counter grew by, added up. */
  private sentBytes = 0;
  /** Each counter's last reading, by peer (the host's own under its id). */
  private readonly sentSeen = new Map<PeerId, number>();
  /** The host's own counters before this recorder's host (a reloaded page's). */
  private readonly hostBytes: { sent: number; received: number };
  private readonly textTokens: number | null;
  /** The room's tokens already counted into dpBytes. */
  private dpTokens: number;
  /** N: every parameter of the model (the fragments cover them all). */
  private readonly parameters: number;
  /** A pipeline room's split (splitStages), with each stage's memory; empty otherwise. */
  private readonly split: StageSpec[];
  private readonly stageBytes: number[];
  private readonly unsubscribe: () => void;

  constructor(options: RoomViewRecorderOptions) {
    this.host = options.host;
    this.roomId = options.roomId;
    this.hostKind = options.hostKind;
    this.now = options.now ?? Date.now;
    this.startedAt = options.startedAt ?? this.now();
    this.parameters = this.host.fragments.reduce((sum, fragment) => sum + fragment.size, 0);
    this.codec = this.host.config.diloco.codec;
    this.ranks = this.host.fragments.map(() => null);
    const { model, train, pipeline } = this.host.config;
    this.split = pipeline ? splitStages(model.nLayer, pipeline.stages) : [];
    this.stageBytes = pipeline
      ? stagePlan(model, train.batchSize, train.seqLen, pipeline.stages, pipeline.micros, pipeline.schedule).stageBytes
      : [];
    const { kept } = options;
    if (kept?.rounds) this.rounds.push(...kept.rounds.slice(-MAX_VIEW_ROUNDS).map((round) => ({ ...round })));
    for (const [peer, count] of Object.entries(kept?.contributed ?? {})) this.contributed.set(peer, count);
    this.bestEval = kept?.bestEval ?? null;
    this.fp32Bytes = options.continueFrom?.fp32Bytes ?? 0;
    this.dpBytes = options.continueFrom?.dpBytes ?? 0;
    this.sentBytes = options.continueFrom?.bytes ?? 0;
    for (const [peer, bytes] of Object.entries(kept?.bytes ?? {})) this.sentSeen.set(peer, bytes);
    this.hostBytes = kept?.hostBytes ?? { sent: 0, received: 0 };
    this.textTokens = options.textTokens ?? null;
    this.dpTokens = this.host.coordinator.roomTokens;
    this.unsubscribe = this.host.replica.onResultShard((p, round, received, total) => {
      const entry = this.round(p, round);
      if (entry?.outcome !== 'open') return;
      const t = this.elapsed();
      entry.reducedAt ??= t; // the first result: the owners have reduced
      if (received === total) entry.gatheredAt ??= t;
    });
  }

  /** Forward the Host's onEvent here. */
  onEvent(event: CoordinatorEvent): void {
    switch (event.event) {
      case 'round-opened': {
        const { fragment, round, participants, codec, rank } = event;
        this.codec = codec;
        // 0: a dense round (a low-rank room's first, or where no rank meets the target)
        if (fragment < this.ranks.length) this.ranks[fragment] = rank ?? 0;
        this.rounds.push({
          fragment,
          round,
          participants,
          openedAt: this.elapsed(),
          reducedAt: null,
          gatheredAt: null,
          endedAt: null,
          outcome: 'open',
          detail: '',
          codec,
          rank,
        });
        if (this.rounds.length > MAX_VIEW_ROUNDS) this.rounds.shift();
        return;
      }
      case 'round-committed': {
        const entry = this.end(event.fragment, event.round, 'committed', event.hash.slice(0, 16));
        // fp32 DiLoCo would have all-reduced the fragment among the round's named participants.
        const size = this.host.fragments[event.fragment]?.size ?? 0;
        this.fp32Bytes += ringAllReduceBytes(size, entry?.participants ?? event.participants);
        for (const peer of event.contributors) this.contributed.set(peer, (this.contributed.get(peer) ?? 0) + 1);
        return;
      }
      case 'round-aborted':
        this.end(event.fragment, event.round, 'aborted', event.reason);
        return;
      case 'peer-joined': {
        const info = this.host.coordinator.members.get(event.peer);
        if (info) this.shareBaseOf(info);
        return;
      }
      case 'peer-left':
        // a peer that comes back counts its share afresh (its steps count from its new hello)
        this.shareBase.delete(event.peer);
        return;
      default:
        return; // peers joining show in the members table
    }
  }

  /** The room's status, and when stopped, why (the host, or the schedule's end). */
  setStatus(status: RoomStatus, endedBy: RoomEnd = 'host'): void {
    this.status = status;
    this.endedBy = status === 'stopped' ? endedBy : null;
  }

  /** The host's latest validation loss of θ_global (null: none yet, or not finite), at the room's step now. */
  setEvalLoss(loss: number | null): void {
    this.evalLoss = loss !== null && Number.isFinite(loss) ? loss : null;
    if (this.evalLoss === null) return;
    const evaluation = { loss: this.evalLoss, step: this.step() };
    if (!this.bestEval || evaluation.loss < this.bestEval.loss) this.bestEval = evaluation;
    this.recentEvals = [...this.recentEvals, evaluation].slice(-RISING_EVALS);
  }

  /** The room's step (Coordinator.step): every page shows this one. */
  step(): number {
    return this.host.coordinator.step();
  }

  /** Records one chart point now. */
  sample(): void {
    const { coordinator, config } = this.host;
    const figures = this.figures();
    const tokens = coordinator.roomTokens;
    for (const worker of figures.workers) this.shareBaseOf(worker);
    // Data-parallel on the same room: one synchronous step of the n current workers is n inner
    // steps of ours and a ring all-reduce of all N gradients among them. So the inner steps trained
    // since the last sample, divided by n, are synchronous steps at today's n; summing per sample
    // follows n as workers come and go (to the sampling period's grain).
    const n = figures.workers.length;
    const tokensPerStep = config.train.batchSize * config.train.seqLen;
    if (n > 0 && tokens > this.dpTokens) {
      const steps = (tokens - this.dpTokens) / tokensPerStep / n;
      this.dpBytes += steps * ringAllReduceBytes(this.parameters, n);
    }
    this.dpTokens = tokens;
    const point: RoomViewPoint = {
      t: this.elapsed(),
      tokens,
      step: this.step(),
      trainLoss: figures.trainLoss,
      evalLoss: this.evalLoss,
      tokensPerSecond: figures.tokensPerSecond,
      bytes: this.countSent(),
      fp32Bytes: this.fp32Bytes,
      dpBytes: this.dpBytes,
      peers: Object.fromEntries(
        figures.workers.map((w) => [w.peer, { loss: w.loss, tokensPerSecond: this.tokensPerSecondOf(w) }] as const),
      ),
    };
    this.history = appendThinned(this.history, [point]);
    this.pending = appendThinned(this.pending, [point], MAX_VIEW_POINTS);
  }

  /** The view with the points recorded since the previous update(): what a host publishes. */
  update(): RoomView {
    const view = this.view(this.pending);
    this.pending = [];
    return view;
  }

  /** The view with every point kept (thinned): for a local UI. */
  snapshot(): RoomView {
    return this.view(this.history);
  }

  /** Stops listening to the host's replica. */
  close(): void {
    this.unsubscribe();
  }

  /** The room's figures now: what a page's tiles show (and `shoal host` prints). */
  metrics(): RoomViewMetrics {
    const { coordinator, member } = this.host;
    const figures = this.figures();
    const stepMs = this.stepMs(figures.workers);
    const step = this.step();
    return {
      step,
      tokens: coordinator.roomTokens,
      trainLoss: figures.trainLoss,
      evalLoss: this.evalLoss,
      tokensPerSecond: figures.tokensPerSecond,
      bytesSent: this.hostBytes.sent + member.bytesSent,
      bytesReceived: this.hostBytes.received + member.bytesReceived,
      roundsCommitted: coordinator.committedRounds,
      roundsAborted: coordinator.abortedRounds,
      fragments: this.host
        .fragmentStates()
        .slice(0, 256)
        .map(({ round, hash }) => ({ round, hash })),
      wire: this.wire(),
      stepMs,
      nextRounds: coordinator.nextRounds.slice(0, 256).map((next) => nextRoundOf(next, step, stepMs)),
      evalTrend: evalTrendOf(
        this.bestEval,
        this.recentEvals,
        this.textTokens === null || coordinator.roomTokens >= this.textTokens,
      ),
    };
  }

  private view(points: RoomViewPoint[]): RoomView {
    const { coordinator, member } = this.host;
    const metrics = this.metrics();
    const clock = member.clock.now(); // lastSeen is on the member's clock, not the epoch
    const pipeline = this.pipeline();
    return {
      version: ROOM_VIEW_VERSION,
      roomId: this.roomId,
      status: this.status,
      config: this.host.config,
      startedAt: this.startedAt,
      hostKind: this.hostKind,
      metrics,
      peers: [...coordinator.members.values()].slice(0, MAX_VIEW_PEERS).map((info) => this.peerRow(info, clock)),
      rounds: this.rounds.map((entry) => this.roundRow(entry)),
      points: [...points],
      ...(pipeline ? { pipeline } : {}),
      ...(this.status === 'stopped' && this.endedBy ? { endedBy: this.endedBy } : {}),
    };
  }

  /**
   * The median synced worker's ms per inner step now (tokensPerSecondOf; a step is a batch of
   * batchSize × seqLen tokens, as coordinator.ts's stepTimes counts it); null while none trains:
   * before any report, paused, stalled.
   */
  private stepMs(workers: MemberInfo[]): number | null {
    const tokensPerStep = this.host.config.train.batchSize * this.host.config.train.seqLen;
    const synced = new Set(this.host.coordinator.syncedWorkers().map((w) => w.peer));
    const times = workers
      .filter((w) => synced.has(w.peer))
      .map((w) => this.tokensPerSecondOf(w))
      .filter((speed) => speed > 0)
      .map((speed) => (tokensPerStep * 1000) / speed);
    return times.length === 0 ? null : median(times);
  }

  /**
   * A worker's tokens/s now: the steps its heartbeats showed lately (stepsPerSecondNow), so a
   * worker stalled, paused or gone silent drops to 0; its own report until those span enough time.
   */
  private tokensPerSecondOf(info: MemberInfo): number {
    const { train } = this.host.config;
    const steps = stepsPerSecondNow(info, this.host.member.clock.now());
    if (steps !== null) return steps * train.batchSize * train.seqLen;
    return Number.isFinite(info.tokensPerSecond) ? info.tokensPerSecond : 0;
  }

  /**
   * Where a peer's share counts from: the room's tokens when it joined (peer-joined), or when the
   * recorder first saw it, less its own tokens then (its steps count from its hello).
   */
  private shareBaseOf(info: MemberInfo): number {
    let base = this.shareBase.get(info.peer);
    if (base === undefined) {
      base = this.host.coordinator.roomTokens - info.innerStep * this.host.coordinator.tokensPerStep;
      this.shareBase.set(info.peer, base);
    }
    return base;
  }

  /** A peer's tokens ÷ the room's, both since it joined; undefined before either moved. */
  private share(info: MemberInfo): number | undefined {
    if (info.role !== 'worker') return undefined;
    const own = info.innerStep * this.host.coordinator.tokensPerStep;
    const window = this.host.coordinator.roomTokens - this.shareBaseOf(info);
    return window > 0 ? Math.min(1, Math.max(0, own / window)) : undefined;
  }

  /** A pipeline room's section: the run's settings, the split, the coordinator's groups; else null. */
  private pipeline(): RoomViewPipeline | null {
    const { config, coordinator } = this.host;
    const groups = coordinator.groups;
    if (!config.pipeline || !groups) return null;
    const workers = [...coordinator.members.values()].filter((m) => m.role === 'worker');
    const places = workers.map(({ peer }) => ({ peer, pipeline: groups.slot(peer) }));
    return {
      ...config.pipeline,
      split: this.split.map((spec) => ({
        stage: spec.index,
        firstBlock: spec.firstBlock,
        endBlock: spec.endBlock,
        embeds: spec.embeds,
        head: spec.head,
        memoryBytes: this.stageBytes[spec.index] ?? 0,
      })),
      groups: pipelineGroupsOf(places, config.pipeline.stages),
      unplaced: places.filter((p) => p.pipeline === null).map((p) => p.peer),
    };
  }

  private wire(): RoomViewWire {
    const ranks = this.ranks.slice(0, 256);
    return { codec: this.codec, ranks, label: clip(wireLabel(this.codec, ranks, this.host.config.diloco)) };
  }

  private peerRow(info: MemberInfo, clock: number): RoomViewPeerRow {
    const slot = this.host.coordinator.groups?.slot(info.peer) ?? null;
    const share = this.share(info);
    return {
      peer: info.peer,
      role: info.role,
      status: info.status,
      reason: clip(info.reason),
      backend: info.capabilities.backend,
      adapter: clip(info.capabilities.adapter),
      tokensPerSecond: this.tokensPerSecondOf(info),
      // its own count, as its heartbeat says (MemberInfo counts from its hello)
      innerStep: info.baseStep + info.innerStep,
      loss: info.loss,
      lastSeenMs: Math.max(0, clock - info.lastSeen),
      roundsContributed: this.contributed.get(info.peer) ?? 0,
      rejected: { ...info.rejected },
      bytesSent: info.bytesSent,
      bytesReceived: info.bytesReceived,
      ...(share === undefined ? {} : { share }),
      ...(slot ? { pipeline: placeOf(slot, this.split) } : {}),
    };
  }

  /**
   * The workers, the mean of their last losses and the room's speed: the sum of theirs, over S in
   * a pipeline-parallel room (a group's stages each report the group's tokens).
   */
  private figures(): { workers: MemberInfo[]; trainLoss: number | null; tokensPerSecond: number } {
    const workers = [...this.host.coordinator.members.values()].filter((m) => m.role === 'worker');
    const losses = workers.map((w) => w.loss).filter((loss): loss is number => loss !== null);
    return {
      workers,
      trainLoss: losses.length === 0 ? null : losses.reduce((a, b) => a + b, 0) / losses.length,
      tokensPerSecond:
        workers.reduce((sum, w) => sum + this.tokensPerSecondOf(w), 0) / (this.host.config.pipeline?.stages ?? 1),
    };
  }

  /**
   * The room's bytes sent: the host's own counter and what every member's heartbeat says it sent,
   * each counted by what it grew since its last reading (a counter that went back restarted: all
   * of it is new), so members that leave keep their part. A member is read from its first
   * heartbeat on (before it, its row holds no counter: a returning member's would look restarted).
   */
  private countSent(): number {
    const { member, coordinator } = this.host;
    const readings: [PeerId, number][] = [[member.self, member.bytesSent]];
    for (const info of coordinator.members.values()) {
      if (info.progress.length > 0) readings.push([info.peer, info.bytesSent]);
    }
    for (const [peer, bytes] of readings) {
      const last = this.sentSeen.get(peer);
      this.sentBytes += last === undefined || bytes < last ? bytes : bytes - last;
      this.sentSeen.set(peer, bytes);
    }
    return this.sentBytes;
  }

  /** A round's row: an open one names whom it waits for (Coordinator.waitingFor). */
  private roundRow(entry: RoomViewRound): RoomViewRound {
    const { waitingFor: _, ...row } = entry;
    if (entry.outcome !== 'open') return row;
    const waiting = this.host.coordinator.waitingFor(entry.fragment);
    if (waiting?.round !== entry.round || waiting.peers.length === 0) return row;
    return { ...row, waitingFor: waiting.peers.slice(0, 256) };
  }

  private round(fragment: number, round: number): RoomViewRound | undefined {
    return this.rounds.findLast((entry) => entry.fragment === fragment && entry.round === round);
  }

  private end(fragment: number, round: number, outcome: 'committed' | 'aborted', detail: string) {
    const entry = this.round(fragment, round);
    if (!entry) return undefined;
    entry.endedAt = this.elapsed();
    entry.outcome = outcome;
    entry.detail = clip(detail);
    return entry;
  }

  private elapsed(): number {
    return Math.max(0, this.now() - this.startedAt);
  }
}
