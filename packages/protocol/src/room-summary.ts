/**
 * What a host relays to every volunteer (a signaling relay) with each view it publishes: a
 * projection of the room view (roomSummaryOf), so the volunteer page shows the same room figures
 * as the dashboard and the watch page, whoever hosts (the dashboard or `shoal host`). Validated
 * like any input from the network; the fields after roundsCommitted are absent from an older
 * host's summaries.
 */
import { z } from 'zod';
import {
  type RoomViewUpdate,
  roomEndSchema,
  roomStatusSchema,
  roomViewEvalTrendSchema,
  roomViewNextRoundSchema,
} from './room-view.ts';

/** Volunteers a summary names (a relay frame is at most 16 KiB; 128 rows are about 5 KiB). */
export const MAX_SUMMARY_PEERS = 128;
/** Open rounds a summary names the waits of, and peers per round (at most about 2 KiB). */
export const MAX_SUMMARY_WAITS = 8;

export const roomSummaryMessageSchema = z.object({
  type: z.literal('room-summary'),
  status: roomStatusSchema,
  step: z.int().min(0),
  tokens: z.number().min(0),
  evalLoss: z.number().nullable(),
  roundsCommitted: z.int().min(0),
  tokensPerSecond: z.number().min(0).optional(),
  /** The median volunteer's ms per step now (the view's stepMs); null before any speed is known. */
  stepMs: z.number().min(0).nullable().optional(),
  nextRounds: z.array(roomViewNextRoundSchema).max(64).optional(),
  evalTrend: roomViewEvalTrendSchema.nullable().optional(),
  endedBy: roomEndSchema.optional(),
  /** Per volunteer: [peer, its share of the room's tokens or null, its committed rounds]. */
  peers: z
    .array(z.tuple([z.string().min(1).max(128), z.number().min(0).max(1).nullable(), z.int().min(0)]))
    .max(MAX_SUMMARY_PEERS)
    .optional(),
  /** The open rounds that wait for someone: whom (the room view's round rows' waitingFor). */
  waiting: z
    .array(
      z.object({
        fragment: z.int().min(0),
        round: z.int().min(0),
        peers: z.array(z.string().min(1).max(128)).max(MAX_SUMMARY_WAITS),
      }),
    )
    .max(MAX_SUMMARY_WAITS)
    .optional(),
});
export type RoomSummaryMessage = z.infer<typeof roomSummaryMessageSchema>;
export type RoomSummary = Omit<RoomSummaryMessage, 'type'>;

/** The summary of a room view: the same numbers, one definition. */
export function roomSummaryOf(view: Omit<RoomViewUpdate, 'points'>): RoomSummary {
  const { metrics } = view;
  return {
    status: view.status,
    step: metrics.step,
    tokens: metrics.tokens,
    evalLoss: metrics.evalLoss,
    roundsCommitted: metrics.roundsCommitted,
    tokensPerSecond: metrics.tokensPerSecond,
    stepMs: metrics.stepMs ?? null,
    nextRounds: (metrics.nextRounds ?? []).slice(0, 64),
    evalTrend: metrics.evalTrend ?? null,
    ...(view.endedBy ? { endedBy: view.endedBy } : {}),
    peers: view.peers
      .filter((peer) => peer.role === 'worker')
      .slice(0, MAX_SUMMARY_PEERS)
      .map((peer) => [peer.peer, peer.share ?? null, peer.roundsContributed]),
    waiting: view.rounds
      .filter((round) => round.outcome === 'open' && (round.waitingFor?.length ?? 0) > 0)
      .slice(-MAX_SUMMARY_WAITS)
      .map(({ fragment, round, waitingFor }) => ({
        fragment,
        round,
        peers: (waitingFor ?? []).slice(0, MAX_SUMMARY_WAITS),
      })),
  };
}

export function roomSummaryMessage(summary: RoomSummary): RoomSummaryMessage {
  return { type: 'room-summary', ...summary };
}
