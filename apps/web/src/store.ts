/**
 * The app's state: one zustand store built from typed slices with `zustand/vanilla`, so the
 * network layer (signaling, mesh) and the room worker's messages update it without React; React
 * only subscribes. `snapshot()` is what `window.shoal.getState()` returns.
 */
import type { AdapterReport, SelfTestResult } from '@shoal/gpu';
import {
  appendThinned,
  type RoomEnd,
  type RoomStatus,
  type RoomSummary,
  type RoomViewEvalTrend,
  type RoomViewNextRound,
  type RoomViewPoint,
  roomSummaryOf,
} from '@shoal/protocol';
import type { RoomView } from '@shoal/room';
import { createStore, type StateCreator } from 'zustand/vanilla';
import type { CheckpointInfo, DatasetInfo, VolunteerStats } from './runtime/messages.ts';
import { type OwnPoint, ownPointOf } from './ui/own-series.ts';

export type GpuStatus =
  | { kind: 'checking' }
  | { kind: 'ready'; adapter: AdapterReport }
  | { kind: 'unavailable'; reason: string };

export interface GpuSlice {
  gpu: GpuStatus;
  selfTest: SelfTestResult | null;
  setGpu(status: GpuStatus): void;
  setSelfTest(result: SelfTestResult): void;
}

export type Role = 'visitor' | 'host' | 'volunteer' | 'watcher';

export interface SessionSlice {
  role: Role;
  roomId: string | null;
  joinUrl: string | null;
  watchUrl: string | null;
  /** What the page is doing, in words ("creating the room…", "training"). */
  phase: string;
  /** The last error a person should see; null when all is well. */
  error: string | null;
  /**
   * The page's link to the Shoal server: 'reconnecting' while it tries again (training goes on with
   * the peers already connected), 'lost' once it gave up. The header shows it (ConnectionBanner).
   */
  connection: 'connected' | 'reconnecting' | 'lost';
  /** The host's room status (the host's own, or as relayed to volunteers and watchers). */
  status: RoomStatus | null;
  /** The room's text, on the dashboard (a volunteer's is in its stats). */
  dataset: DatasetInfo | null;
  setSession(patch: Partial<Omit<SessionSlice, 'setSession'>>): void;
}

export interface ViewSlice {
  /**
   * The latest room view (its `points` left empty; the series is `points`). The host's own
   * recorder's carries a pipeline room's fields; a watcher's (through the server) does not.
   */
  view: Omit<RoomView, 'points'> | null;
  points: RoomViewPoint[];
  /** Epoch ms when the latest view arrived: the countdowns tick from it. */
  viewAt: number | null;
  /** The room's schedule step as the host's worker said with its view (the same as view.metrics.step). */
  roomStep: number | null;
  /** Applies an update: its points are appended (thinned), or replace the series when `replace`. */
  applyView(update: RoomView, options?: { replace?: boolean; roomStep?: number }): void;
}

/** What the host relays to every volunteer with each view: defined once, in @shoal/protocol. */
export type { RoomSummary } from '@shoal/protocol';
export { MAX_SUMMARY_PEERS } from '@shoal/protocol';

/** The summary relayed to volunteers: the room view's figures, the same numbers (one definition). */
export const summaryOf: (view: Omit<RoomView, 'points'>) => RoomSummary = roomSummaryOf;

export interface VolunteerSlice {
  volunteer: VolunteerStats | null;
  /** The volunteer's own loss and speed over time (its page's chart), thinned like the room's points. */
  ownPoints: OwnPoint[];
  summary: RoomSummary | null;
  /** shardBudgetMib: a dataset room's shard cache, MiB; null: 4 × the dataset's largest shard. */
  settings: { paused: boolean; dutyCycle: number; pauseWhenHidden: boolean; shardBudgetMib: number | null };
  setVolunteer(stats: VolunteerStats): void;
  setSummary(summary: RoomSummary): void;
  setSettings(patch: Partial<VolunteerSlice['settings']>): void;
}

export interface CheckpointSlice {
  checkpoint: CheckpointInfo | null;
  resumedFrom: CheckpointInfo | null;
  setCheckpoint(checkpoint: CheckpointInfo, resumed?: boolean): void;
}

export type ShoalState = GpuSlice & SessionSlice & ViewSlice & VolunteerSlice & CheckpointSlice;
type Slice<T> = StateCreator<ShoalState, [], [], T>;

const gpuSlice: Slice<GpuSlice> = (set) => ({
  gpu: { kind: 'checking' },
  selfTest: null,
  setGpu: (gpu) => set({ gpu }),
  setSelfTest: (selfTest) => set({ selfTest }),
});

const sessionSlice: Slice<SessionSlice> = (set) => ({
  role: 'visitor',
  roomId: null,
  joinUrl: null,
  watchUrl: null,
  phase: '',
  error: null,
  connection: 'connected',
  status: null,
  dataset: null,
  setSession: (patch) => set(patch),
});

const viewSlice: Slice<ViewSlice> = (set) => ({
  view: null,
  points: [],
  viewAt: null,
  roomStep: null,
  applyView: (update, options = {}) =>
    set((state) => {
      const { points, ...view } = update;
      return {
        view,
        viewAt: Date.now(),
        points: options.replace ? appendThinned([], points) : appendThinned(state.points, points),
        status: view.status,
        roomStep: options.roomStep ?? state.roomStep,
      };
    }),
});

const volunteerSlice: Slice<VolunteerSlice> = (set) => ({
  volunteer: null,
  ownPoints: [],
  summary: null,
  settings: { paused: false, dutyCycle: 1, pauseWhenHidden: false, shardBudgetMib: null },
  setVolunteer: (volunteer) =>
    set((state) => {
      const point = ownPointOf(volunteer, Date.now());
      return { volunteer, ownPoints: point ? appendThinned(state.ownPoints, [point]) : state.ownPoints };
    }),
  setSummary: (summary) => set({ summary, status: summary.status, viewAt: Date.now() }),
  setSettings: (patch) => set((state) => ({ settings: { ...state.settings, ...patch } })),
});

const checkpointSlice: Slice<CheckpointSlice> = (set) => ({
  checkpoint: null,
  resumedFrom: null,
  setCheckpoint: (checkpoint, resumed = false) =>
    set(resumed ? { checkpoint, resumedFrom: checkpoint } : { checkpoint }),
});

export function createShoalStore() {
  return createStore<ShoalState>()((...a) => ({
    ...gpuSlice(...a),
    ...sessionSlice(...a),
    ...viewSlice(...a),
    ...volunteerSlice(...a),
    ...checkpointSlice(...a),
  }));
}

export const store = createShoalStore();

export interface ShoalMetrics {
  step: number | null;
  tokens: number | null;
  trainLoss: number | null;
  evalLoss: number | null;
  tokensPerSecond: number | null;
  bytesSent: number | null;
  bytesReceived: number | null;
  roundsCommitted: number | null;
}

/**
 * The room's figures, the same on every page: the dashboard's and the watch page's from the room
 * view, the volunteer page's from the host's summary of that view (summaryOf). Null fields: not
 * known yet.
 */
export interface RoomFigures {
  status: RoomStatus | null;
  /**
   * The room's step: the median volunteer's place on the learning-rate schedule, never going back
   * (the coordinator keeps it, across host reloads too).
   */
  step: number | null;
  tokens: number | null;
  roundsCommitted: number | null;
  evalLoss: number | null;
  tokensPerSecond: number | null;
  nextRounds: RoomViewNextRound[];
  evalTrend: RoomViewEvalTrend | null;
  endedBy: RoomEnd | null;
  /** The schedule's total steps (from the run config; null where the page has none). */
  totalSteps: number | null;
  /** The median volunteer's ms per step, as measured now; null before any speed is known. */
  stepMs: number | null;
  /** The volunteers in the room (the host excluded); null where the page does not know. */
  volunteers: number | null;
  /** Epoch ms of the figures: a countdown's estimate was made then. */
  at: number | null;
}

const NO_ROUNDS: RoomViewNextRound[] = [];

/**
 * The median volunteer's ms per step from a round's countdown (etaMs is its steps at that
 * speed): the volunteer page's summary carries the countdowns, not the speed itself.
 */
export function stepMsOfRounds(rounds: readonly RoomViewNextRound[]): number | null {
  const counted = rounds.find((next) => !next.open && next.steps > 0 && next.etaMs !== null);
  return counted?.etaMs == null ? null : counted.etaMs / counted.steps;
}

export function roomFiguresOf(state: ShoalState): RoomFigures {
  // the view's own fields where the page has it (summaryOf's are the same values; reading them
  // here keeps each array's identity, so a subscribed component re-renders only when they change)
  const view = state.role === 'volunteer' ? null : state.view;
  const summary: Partial<RoomSummary> | null = view
    ? {
        ...view.metrics,
        status: view.status,
        nextRounds: view.metrics.nextRounds,
        evalTrend: view.metrics.evalTrend ?? null,
        endedBy: view.endedBy,
      }
    : state.role === 'volunteer'
      ? state.summary
      : null;
  const config = state.view?.config ?? state.volunteer?.config ?? null;
  const status = summary?.status ?? state.status;
  // a paused or stopped room trains nothing now, whatever its last heartbeats measured
  const still = status === 'paused' || status === 'stopped';
  return {
    status,
    step: summary?.step ?? state.checkpoint?.step ?? null,
    tokens: summary?.tokens ?? state.checkpoint?.tokens ?? null,
    roundsCommitted: summary?.roundsCommitted ?? null,
    evalLoss: summary?.evalLoss ?? null,
    tokensPerSecond: still ? 0 : (summary?.tokensPerSecond ?? null),
    nextRounds: summary?.nextRounds ?? NO_ROUNDS,
    evalTrend: summary?.evalTrend ?? null,
    endedBy: summary?.endedBy ?? null,
    totalSteps: config?.train.totalSteps ?? null,
    // an older host's summary carries no stepMs: its countdowns do
    stepMs: summary?.stepMs !== undefined ? summary.stepMs : stepMsOfRounds(summary?.nextRounds ?? NO_ROUNDS),
    volunteers: view ? volunteerCountOf(state) : (state.summary?.peers?.length ?? null),
    at: state.viewAt,
  };
}

/** The volunteers in the room view (the host excluded). */
export function volunteerCountOf(state: Pick<ShoalState, 'view'>): number {
  return (state.view?.peers ?? []).filter((peer) => peer.role === 'worker').length;
}

/**
 * A volunteer's own part as the host counts it: its share of the room's tokens since it joined
 * (1 when alone) and the committed rounds it contributed to; null before the host's summary names it.
 */
export function ownPartOf(state: ShoalState): { share: number | null; rounds: number } | null {
  const self = state.volunteer?.peer;
  const row = self ? state.summary?.peers?.find(([peer]) => peer === self) : undefined;
  return row ? { share: row[1], rounds: row[2] } : null;
}

/** The volunteer page's phase once the person pressed Leave (volunteer-session.ts sets it). */
export const LEFT_PHASE = 'left the room';

/** The numbers the page leads with: the room's (host, watcher) or this volunteer's own. */
export function metricsOf(state: ShoalState): ShoalMetrics {
  if (state.role === 'volunteer') {
    const own = state.volunteer;
    return {
      step: own?.innerStep ?? null,
      tokens: own?.tokens ?? null,
      trainLoss: own?.loss ?? null,
      evalLoss: roomFiguresOf(state).evalLoss,
      // what it trains now: nothing while paused, stopped or after Leave, whatever it measured last
      tokensPerSecond: own ? (own.phase === 'training' && state.phase !== LEFT_PHASE ? own.tokensPerSecond : 0) : null,
      bytesSent: own?.bytesSent ?? null,
      bytesReceived: own?.bytesReceived ?? null,
      roundsCommitted: roomFiguresOf(state).roundsCommitted ?? own?.roundsCommitted ?? null,
    };
  }
  const metrics = state.view?.metrics;
  if (!metrics) {
    return {
      step: state.checkpoint?.step ?? null,
      tokens: state.checkpoint?.tokens ?? null,
      trainLoss: null,
      evalLoss: null,
      tokensPerSecond: null,
      bytesSent: null,
      bytesReceived: null,
      roundsCommitted: null,
    };
  }
  const room = roomFiguresOf(state);
  return {
    step: room.step,
    tokens: room.tokens,
    trainLoss: metrics.trainLoss,
    evalLoss: room.evalLoss,
    tokensPerSecond: room.tokensPerSecond,
    bytesSent: metrics.bytesSent,
    bytesReceived: metrics.bytesReceived,
    roundsCommitted: room.roundsCommitted,
  };
}

/** A plain-data snapshot for tests and debugging: `window.shoal.getState()`. */
export function snapshot() {
  const state = store.getState();
  const view = state.view;
  return structuredClone({
    role: state.role,
    roomId: state.roomId,
    joinUrl: state.joinUrl,
    watchUrl: state.watchUrl,
    status: state.status,
    phase: state.phase,
    error: state.error,
    connection: state.connection,
    /** The volunteers (the host excluded). */
    peers: (view?.peers ?? []).filter((peer) => peer.role === 'worker'),
    /** A pipeline room's settings, split and groups (the host's view only); null otherwise. */
    pipeline: view?.pipeline ?? null,
    metrics: metricsOf(state),
    /** The room's figures as this page shows them (the same on the dashboard, watch and volunteer pages). */
    room: roomFiguresOf(state),
    fragments: view?.metrics.fragments ?? state.checkpoint?.fragments ?? null,
    rounds: view?.rounds ?? [],
    startedAt: view?.startedAt ?? null,
    points: state.points.length,
    /** The room's bytes sent as its last chart point says (the Bytes sent chart); null before one. */
    roomBytes: state.points.at(-1)?.bytes ?? null,
    checkpoint: state.checkpoint,
    resumedFrom: state.resumedFrom,
    volunteer: state.volunteer,
    /** The room's text: name, bytes, fingerprint, source ('server' | 'host'), bytes received. */
    dataset: state.dataset ?? state.volunteer?.dataset ?? null,
    gpu: state.gpu,
    selfTest: state.selfTest,
  });
}
