import { type RoomViewUpdate, roomViewUpdateSchema } from '@shoal/protocol';
import { createRunConfig } from '@shoal/room/run-config';
import { describe, expect, it } from 'vitest';
import { roomSummarySchema, summaryMessage } from './session/room-link.ts';
import { createShoalStore, metricsOf, ownPartOf, roomFiguresOf, summaryOf } from './store.ts';

const update = (tokens: number, points: number): RoomViewUpdate => ({
  version: 1,
  roomId: 'room',
  status: 'running',
  config: createRunConfig(),
  startedAt: 1_000,
  hostKind: 'dashboard',
  metrics: {
    step: 3,
    tokens,
    trainLoss: 4,
    evalLoss: 4.5,
    tokensPerSecond: 100,
    bytesSent: 10,
    bytesReceived: 20,
    roundsCommitted: 2,
    roundsAborted: 0,
    fragments: [{ round: 1, hash: 'ab'.repeat(8) }],
  },
  peers: [],
  rounds: [],
  points: Array.from({ length: points }, (_, i) => ({
    t: i,
    tokens: i,
    step: i,
    trainLoss: null,
    evalLoss: null,
    tokensPerSecond: 0,
    bytes: 0,
    fp32Bytes: 0,
    dpBytes: 0,
    peers: {},
  })),
});

describe('the store (slices without React)', () => {
  it('metrics are null until known', () => {
    const store = createShoalStore();
    expect(metricsOf(store.getState())).toEqual({
      step: null,
      tokens: null,
      trainLoss: null,
      evalLoss: null,
      tokensPerSecond: null,
      bytesSent: null,
      bytesReceived: null,
      roundsCommitted: null,
    });
  });

  it('room views append their points, a watcher’s first view replaces them, the step is the view’s', () => {
    expect(roomViewUpdateSchema.safeParse(update(1, 1)).success).toBe(true);
    const store = createShoalStore();
    store.getState().setSession({ role: 'host' });
    store.getState().applyView(update(100, 3), { roomStep: 3 });
    store.getState().applyView(update(200, 2));
    expect(store.getState().points).toHaveLength(5);
    expect(metricsOf(store.getState())).toMatchObject({ step: 3, tokens: 200, evalLoss: 4.5, roundsCommitted: 2 });
    store.getState().applyView(update(300, 1), { replace: true });
    expect(store.getState().points).toHaveLength(1);
    expect(store.getState().status).toBe('running');
  });

  it('a volunteer leads with its own numbers and the room’s evaluation', () => {
    const store = createShoalStore();
    store.getState().setSession({ role: 'volunteer' });
    store.getState().setSummary({ status: 'running', step: 40, tokens: 5_000, evalLoss: 3.2, roundsCommitted: 6 });
    store.getState().setVolunteer(stats());
    store.getState().setVolunteer({ ...stats(), phase: 'paused' });
    // its own series: a point per report while it trains or is paused (then at 0 tok/s)
    expect(store.getState().ownPoints.map((p) => p.tokensPerSecond)).toEqual([50, 0]);
    store.getState().setVolunteer(stats());
    expect(metricsOf(store.getState())).toEqual({
      step: 12,
      tokens: 1_500,
      trainLoss: 3.5,
      evalLoss: 3.2,
      tokensPerSecond: 50,
      bytesSent: 1_000,
      bytesReceived: 2_000,
      roundsCommitted: 6,
    });
  });

  it('shows the same room figures on the dashboard, the watch page and the volunteer page', () => {
    const view: RoomViewUpdate = {
      ...update(5_120, 2),
      status: 'stopped',
      endedBy: 'schedule',
      metrics: {
        ...update(5_120, 0).metrics,
        step: 20,
        stepMs: 150,
        nextRounds: [
          { fragment: 0, round: 3, open: false, steps: 12, etaMs: 1_800 },
          { fragment: 1, round: 2, open: true, steps: 0, etaMs: 0 },
        ],
        evalTrend: { best: 2.09, bestStep: 400, latest: 2.35, rising: true },
      },
      peers: [peer('v1', 1, 4), peer('v2', undefined, 0), { ...peer('host', undefined, 0), role: 'spectator' }],
    };
    expect(roomViewUpdateSchema.safeParse(view).success).toBe(true);
    const host = createShoalStore();
    host.getState().setSession({ role: 'host' });
    host.getState().applyView(view, { roomStep: 20 });
    const watcher = createShoalStore();
    watcher.getState().setSession({ role: 'watcher' });
    watcher.getState().applyView(view, { replace: true });
    // the volunteer's copy crosses the wire: relayed, then validated as any input from the network
    const volunteer = createShoalStore();
    volunteer.getState().setSession({ role: 'volunteer' });
    const relayed = roomSummarySchema.parse(JSON.parse(JSON.stringify(summaryMessage(summaryOf(view)))));
    const { type: _, ...summary } = relayed;
    volunteer.getState().setSummary(summary);
    volunteer.getState().setVolunteer({ ...stats(), peer: 'v1', tokens: 99_999 });

    const figures = [host, watcher, volunteer].map((s) => {
      const { at: _at, ...rest } = roomFiguresOf(s.getState());
      return rest;
    });
    expect(figures[0]).toEqual({
      status: 'stopped',
      step: 20,
      tokens: 5_120,
      roundsCommitted: 2,
      evalLoss: 4.5,
      // a stopped room trains nothing now, whatever its last heartbeats measured
      tokensPerSecond: 0,
      nextRounds: view.metrics.nextRounds,
      evalTrend: view.metrics.evalTrend,
      endedBy: 'schedule',
      totalSteps: view.config.train.totalSteps,
      stepMs: 150,
      volunteers: 2,
    });
    expect(figures[1]).toEqual(figures[0]);
    // the volunteer's step time comes from the countdowns (1,800 ms for 12 steps), the same 150 ms
    // the volunteer's config arrives with its welcome (here: none yet)
    expect(figures[2]).toEqual({ ...figures[0], totalSteps: null });
    // its share is the host's count (1: alone since it joined), not its tokens ÷ the room's whole run
    expect(ownPartOf(volunteer.getState())).toEqual({ share: 1, rounds: 4 });
    volunteer.getState().setVolunteer({ ...stats(), peer: 'v2' });
    expect(ownPartOf(volunteer.getState())).toEqual({ share: null, rounds: 0 });
    volunteer.getState().setVolunteer({ ...stats(), peer: 'nobody' });
    expect(ownPartOf(volunteer.getState())).toBeNull();
  });

  it('refuses a relayed summary that does not hold together', () => {
    const good = summaryMessage(summaryOf(update(100, 0)));
    expect(roomSummarySchema.safeParse(good).success).toBe(true);
    expect(roomSummarySchema.safeParse({ ...good, peers: [['v1', 1.5, 0]] }).success).toBe(false);
    expect(roomSummarySchema.safeParse({ ...good, endedBy: 'nobody' }).success).toBe(false);
    const many = Array.from({ length: 129 }, (_, i) => [`v${i}`, 0, 0]);
    expect(roomSummarySchema.safeParse({ ...good, peers: many }).success).toBe(false);
    // an older host's summary (no optional fields) still reads
    const { nextRounds: _n, evalTrend: _e, peers: _p, tokensPerSecond: _t, ...old } = good;
    expect(roomSummarySchema.safeParse(old).success).toBe(true);
  });
});

function peer(id: string, share: number | undefined, rounds: number): RoomViewUpdate['peers'][number] {
  return {
    peer: id,
    role: 'worker',
    status: 'synced',
    reason: '',
    backend: 'cpu',
    adapter: 'test',
    tokensPerSecond: 50,
    innerStep: 10,
    loss: 3,
    lastSeenMs: 100,
    roundsContributed: rounds,
    rejected: {},
    bytesSent: 0,
    bytesReceived: 0,
    ...(share === undefined ? {} : { share }),
  };
}

function stats() {
  return {
    peer: 'v1',
    backend: 'cpu' as const,
    adapter: 'CPU',
    phase: 'training' as const,
    innerStep: 12,
    tokens: 1_500,
    loss: 3.5,
    tokensPerSecond: 50,
    contributions: 3,
    merges: 2,
    roundsCommitted: 5,
    bytesSent: 1_000,
    bytesReceived: 2_000,
    dutyCycle: 1,
    busyFraction: 0.9,
    memoryBytes: 1 << 20,
    config: null,
    dataset: null,
    pipeline: null,
    shards: null,
    leftOut: '',
  };
}
