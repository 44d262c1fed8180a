/**
 * The room view of a host (@shoal/protocol's RoomViewUpdate: what the dashboard shows and what
 * the watch link gets), recorded from its Host: the round timeline from the coordinator's events
 * and the host replica's result shards, the peers' rows from the coordinator's members, and
 * chart points sampled when the caller says (a timer in `shoal host` or the dashboard).
 *
 * Its figures come from room-figures.ts and its byte figures from room-bytes.ts; the room's step
 * (Coordinator.step) and each peer's share of the room's tokens are defined here. A resumed run's
 * recorder goes on from its last chart point and the kept view (kept-view.ts).
 *
 * A pipeline-parallel room's view adds each worker's place (group, stage, the blocks its stage
 * holds) and a `pipeline` section: the run's S, M, schedule and activation dtype, each stage's
 * blocks and memory, and the coordinator's groups (per stage the member or null, complete or
 * waiting for which stages; pipelineGroupsOf). The protocol's schema carries them, so the watch
 * link shows the same groups.
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
  ROOM_VIEW_VERSION,
  type RoomEnd,
  type RoomStatus,
  type RoomViewMetrics,
  type RoomViewPeer,
  type RoomViewPipeline,
  type RoomViewPoint,
  type RoomViewRound,
  type RoomViewUpdate,
  type RoomViewWire,
} from '@shoal/protocol';
import type { CoordinatorEvent, Host } from '@shoal/swarm';
import { type MemberInfo, median, stepsPerSecondNow } from '@shoal/swarm';
import type { KeptView } from './kept-view.ts';
import { RoomBytes } from './room-bytes.ts';
import { clipViewText, EvalLosses, nextRoundOf, pipelineViewOf, placeOf, wireLabel } from './room-figures.ts';

export type { RoomViewGroup, RoomViewPipeline, RoomViewPlace, RoomViewStage } from '@shoal/protocol';

/** A peer's row (the protocol's, with its pipeline place when it has one). */
export type RoomViewPeerRow = RoomViewPeer;

/** The view a recorder makes: the protocol's RoomViewUpdate, a pipeline room's fields included. */
export type RoomView = RoomViewUpdate;

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

export class RoomViewRecorder {
  readonly startedAt: number;
  private readonly host: Host;
  private readonly roomId: string;
  private readonly hostKind: RoomViewUpdate['hostKind'];
  private readonly now: () => number;
  private status: RoomStatus = 'waiting';
  private endedBy: RoomEnd | null = null;
  /** The validation losses: the latest, the best so far and the latest ones (the trend). */
  private readonly evals: EvalLosses;
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
  /** The room's bytes sent, and what fp32 DiLoCo and data-parallel training would have sent. */
  private readonly bytes: RoomBytes;
  /** The host's own counters before this recorder's host (a reloaded page's). */
  private readonly hostBytes: { sent: number; received: number };
  private readonly textTokens: number | null;
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
    this.evals = new EvalLosses(kept?.bestEval ?? null);
    // N: every parameter of the model (the fragments cover them all)
    const parameters = this.host.fragments.reduce((sum, fragment) => sum + fragment.size, 0);
    this.bytes = new RoomBytes(parameters, this.host.coordinator.roomTokens, options.continueFrom, kept?.bytes);
    this.hostBytes = kept?.hostBytes ?? { sent: 0, received: 0 };
    this.textTokens = options.textTokens ?? null;
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
        this.bytes.committed(size, entry?.participants ?? event.participants);
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
    this.evals.record(loss, () => this.step());
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
    this.bytes.trained(tokens, figures.workers.length, config.train.batchSize * config.train.seqLen);
    const point: RoomViewPoint = {
      t: this.elapsed(),
      tokens,
      step: this.step(),
      trainLoss: figures.trainLoss,
      evalLoss: this.evals.latest,
      tokensPerSecond: figures.tokensPerSecond,
      bytes: this.countSent(),
      fp32Bytes: this.bytes.fp32Bytes,
      dpBytes: this.bytes.dpBytes,
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
      evalLoss: this.evals.latest,
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
      evalTrend: this.evals.trend(this.textTokens === null || coordinator.roomTokens >= this.textTokens),
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
   * batchSize × seqLen tokens, as round-plan.ts's stepTimes counts it); null while none trains:
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
    return pipelineViewOf(config.pipeline, this.split, this.stageBytes, places);
  }

  private wire(): RoomViewWire {
    const ranks = this.ranks.slice(0, 256);
    return { codec: this.codec, ranks, label: clipViewText(wireLabel(this.codec, ranks, this.host.config.diloco)) };
  }

  private peerRow(info: MemberInfo, clock: number): RoomViewPeerRow {
    const slot = this.host.coordinator.groups?.slot(info.peer) ?? null;
    const share = this.share(info);
    return {
      peer: info.peer,
      role: info.role,
      status: info.status,
      reason: clipViewText(info.reason),
      backend: info.capabilities.backend,
      adapter: clipViewText(info.capabilities.adapter),
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
   * The room's bytes sent (RoomBytes.countSent): the host's own counter and what every member's
   * heartbeat says it sent. A member is read from its first heartbeat on (before it, its row holds
   * no counter: a returning member's would look restarted).
   */
  private countSent(): number {
    const { member, coordinator } = this.host;
    const readings: [PeerId, number][] = [[member.self, member.bytesSent]];
    for (const info of coordinator.members.values()) {
      if (info.progress.length > 0) readings.push([info.peer, info.bytesSent]);
    }
    return this.bytes.countSent(readings);
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
    entry.detail = clipViewText(detail);
    return entry;
  }

  private elapsed(): number {
    return Math.max(0, this.now() - this.startedAt);
  }
}
