/**
 * A volunteer's own progress over time, for its page's chart: one point per stats report while it
 * trains (or is paused: its speed then reads 0), and the chart's columns from them, x in seconds
 * since its first point. Pure.
 */
import { bitsPerByte } from '@shoal/data';
import type { ChartColumns } from '../charts/series.ts';
import type { VolunteerStats } from '../runtime/messages.ts';

export interface OwnPoint {
  /** Epoch ms of the report. */
  at: number;
  /** Its last training loss, nats. */
  loss: number | null;
  /** What it trains now: 0 unless training. */
  tokensPerSecond: number;
}

/** The report's point; null before training started (connecting, waiting for Start). */
export function ownPointOf(stats: VolunteerStats, at: number): OwnPoint | null {
  if (stats.phase === 'connecting' || stats.phase === 'waiting') return null;
  return {
    at,
    loss: stats.loss,
    tokensPerSecond: stats.phase === 'training' ? stats.tokensPerSecond : 0,
  };
}

/** The loss (bits per byte) and speed columns, x in seconds since the first point. */
export function ownColumns(points: readonly OwnPoint[]): { loss: ChartColumns; speed: ChartColumns } {
  const start = points[0]?.at ?? 0;
  const x = points.map((point) => (point.at - start) / 1000);
  return {
    loss: [x, points.map((point) => (point.loss === null ? undefined : bitsPerByte(point.loss)))],
    speed: [x, points.map((point) => point.tokensPerSecond)],
  };
}
