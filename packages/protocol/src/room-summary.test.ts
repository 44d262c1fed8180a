import { describe, expect, it } from 'vitest';
import { MAX_SUMMARY_WAITS, roomSummaryMessage, roomSummaryMessageSchema, roomSummaryOf } from './room-summary.ts';
import type { RoomViewRound, RoomViewUpdate } from './room-view.ts';

const round = (fragment: number, n: number, outcome: RoomViewRound['outcome'], waitingFor?: string[]) =>
  ({
    fragment,
    round: n,
    participants: 3,
    openedAt: 0,
    reducedAt: null,
    gatheredAt: null,
    endedAt: null,
    outcome,
    detail: '',
    ...(waitingFor ? { waitingFor } : {}),
  }) as RoomViewRound;

const view = (rounds: RoomViewRound[]) =>
  ({
    status: 'running',
    metrics: { step: 1, tokens: 2, evalLoss: null, roundsCommitted: 0, tokensPerSecond: 0 },
    peers: [],
    rounds,
  }) as unknown as RoomViewUpdate;

describe('the room summary', () => {
  it('names the open rounds that wait for someone, and whom, within its bounds', () => {
    const many = Array.from({ length: 20 }, (_, i) => `peer-${i}`);
    const summary = roomSummaryOf(
      view([
        round(0, 3, 'committed', ['old']),
        round(0, 4, 'open', ['w2']),
        round(1, 4, 'open'),
        round(1, 5, 'open', many),
      ]),
    );
    expect(summary.waiting).toEqual([
      { fragment: 0, round: 4, peers: ['w2'] },
      { fragment: 1, round: 5, peers: many.slice(0, MAX_SUMMARY_WAITS) },
    ]);
    expect(roomSummaryMessageSchema.parse(JSON.parse(JSON.stringify(roomSummaryMessage(summary))))).toMatchObject({
      waiting: summary.waiting,
    });
    expect(roomSummaryOf(view([round(0, 1, 'open')])).waiting).toEqual([]);
  });
});
