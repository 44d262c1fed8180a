/**
 * The app's state: one zustand store built from typed slices with `zustand/vanilla`, so the
 * network layer (signaling, mesh) and the room worker's messages update it without React; React
 * only subscribes. `snapshot()` is what `window.shoal.getState()` returns.
 */
import type { AdapterReport, SelfTestResult } from '@shoal/gpu';
import { appendThinned, type RoomStatus, type RoomViewPoint } from '@shoal/protocol';
import type { RoomView } from '@shoal/swarm';
import { createStore, type StateCreator } from 'zustand/vanilla';
import type { CheckpointInfo, DatasetInfo, VolunteerStats } from './runtime/messages.ts';

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
  /** The room's schedule step (tokens ÷ tokens per step), from the host. */
  roomStep: number | null;
  /** Applies an update: its points are appended (thinned), or replace the series when `replace`. */
  applyView(update: RoomView, options?: { replace?: boolean; roomStep?: number }): void;
}

/** What the host relays to every volunteer (signaling relay) with each view. */
export interface RoomSummary {
  status: RoomStatus;
  step: number;
  tokens: number;
  evalLoss: number | null;
  roundsCommitted: number;
}

export interface VolunteerSlice {
  volunteer: VolunteerStats | null;
  summary: RoomSummary | null;
  settings: { paused: boolean; dutyCycle: number; pauseWhenHidden: boolean };
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
  status: null,
  dataset: null,
  setSession: (patch) => set(patch),
});

const viewSlice: Slice<ViewSlice> = (set) => ({
  view: null,
  points: [],
  roomStep: null,
  applyView: (update, options = {}) =>
    set((state) => {
      const { points, ...view } = update;
      return {
        view,
        points: options.replace ? appendThinned([], points) : appendThinned(state.points, points),
        status: view.status,
        roomStep: options.roomStep ?? state.roomStep,
      };
    }),
});

const volunteerSlice: Slice<VolunteerSlice> = (set) => ({
  volunteer: null,
  summary: null,
  settings: { paused: false, dutyCycle: 1, pauseWhenHidden: false },
  setVolunteer: (volunteer) => set({ volunteer }),
  setSummary: (summary) => set({ summary, status: summary.status }),
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

/** The numbers the page leads with: the room's (host, watcher) or this volunteer's own. */
export function metricsOf(state: ShoalState): ShoalMetrics {
  if (state.role === 'volunteer') {
    const own = state.volunteer;
    return {
      step: own?.innerStep ?? null,
      tokens: own?.tokens ?? null,
      trainLoss: own?.loss ?? null,
      evalLoss: state.summary?.evalLoss ?? null,
      tokensPerSecond: own?.tokensPerSecond ?? null,
      bytesSent: own?.bytesSent ?? null,
      bytesReceived: own?.bytesReceived ?? null,
      roundsCommitted: state.summary?.roundsCommitted ?? own?.roundsCommitted ?? null,
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
  return {
    step: state.roomStep ?? metrics.step,
    tokens: metrics.tokens,
    trainLoss: metrics.trainLoss,
    evalLoss: metrics.evalLoss,
    tokensPerSecond: metrics.tokensPerSecond,
    bytesSent: metrics.bytesSent,
    bytesReceived: metrics.bytesReceived,
    roundsCommitted: metrics.roundsCommitted,
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
    /** The volunteers (the host excluded). */
    peers: (view?.peers ?? []).filter((peer) => peer.role === 'worker'),
    /** A pipeline room's settings, split and groups (the host's view only); null otherwise. */
    pipeline: view?.pipeline ?? null,
    metrics: metricsOf(state),
    fragments: view?.metrics.fragments ?? state.checkpoint?.fragments ?? null,
    rounds: view?.rounds ?? [],
    startedAt: view?.startedAt ?? null,
    points: state.points.length,
    checkpoint: state.checkpoint,
    resumedFrom: state.resumedFrom,
    volunteer: state.volunteer,
    /** The room's text: name, bytes, fingerprint, source ('server' | 'host'), bytes received. */
    dataset: state.dataset ?? state.volunteer?.dataset ?? null,
    gpu: state.gpu,
    selfTest: state.selfTest,
  });
}
