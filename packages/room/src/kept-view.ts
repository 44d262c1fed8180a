/**
 * What a resumed room-view recorder goes on from: the view the server kept for the room's watch
 * links, read back into its rounds, each peer's committed rounds and bytes, the best evaluation,
 * the room's step and the host's own counters, so nothing a page shows goes back when a host
 * reloads.
 */

import type { PeerId, RoomViewRound, RoomViewUpdate } from '@shoal/protocol';
import type { Evaluation } from './room-figures.ts';

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
export function keptOf(view: Pick<RoomViewUpdate, 'rounds' | 'peers' | 'metrics'>): KeptView {
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
