import { type RoomViewUpdate, roomViewUpdateSchema } from '@shoal/protocol';
import { createRunConfig } from '@shoal/swarm/config';
import { describe, expect, it } from 'vitest';
import { createShoalStore, metricsOf } from './store.ts';

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

  it('room views append their points, a watcher’s first view replaces them, the room step wins', () => {
    expect(roomViewUpdateSchema.safeParse(update(1, 1)).success).toBe(true);
    const store = createShoalStore();
    store.getState().setSession({ role: 'host' });
    store.getState().applyView(update(100, 3), { roomStep: 7 });
    store.getState().applyView(update(200, 2));
    expect(store.getState().points).toHaveLength(5);
    expect(metricsOf(store.getState())).toMatchObject({ step: 7, tokens: 200, evalLoss: 4.5, roundsCommitted: 2 });
    store.getState().applyView(update(300, 1), { replace: true });
    expect(store.getState().points).toHaveLength(1);
    expect(store.getState().status).toBe('running');
  });

  it('a volunteer leads with its own numbers and the room’s evaluation', () => {
    const store = createShoalStore();
    store.getState().setSession({ role: 'volunteer' });
    store.getState().setSummary({ status: 'running', step: 40, tokens: 5_000, evalLoss: 3.2, roundsCommitted: 6 });
    store.getState().setVolunteer({
      backend: 'cpu',
      adapter: 'CPU',
      phase: 'training',
      innerStep: 12,
      tokens: 1_500,
      loss: 3.5,
      tokensPerSecond: 50,
      contributions: 3,
      merges: 2,
      roundsCommitted: 5,
      bytesSent: 1_000,
      bytesReceived: 2_000,
      config: null,
      dataset: null,
      pipeline: null,
    });
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
});
