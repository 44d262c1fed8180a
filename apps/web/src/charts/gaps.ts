/**
 * What the room's chart points do not show as a line: stretches with no samples (a server outage,
 * a host reload), readings carried forward from an earlier measurement, and the samples where a
 * cumulative counter cannot give a rate. Pure functions over points in time order (oldest first);
 * series.ts builds the columns from them.
 *
 * In uPlot's columns (series `spanGaps: false`) `null` breaks a line and `undefined` is a value
 * not measured there, which the line joins across: a gap is a row of nulls, a carried reading is
 * undefined.
 */
import type { RoomViewPoint } from '@shoal/protocol';

/** An interval more than this many times the spacing around it is a gap: no line across it. */
export const GAP_FACTOR = 4;

/**
 * Intervals on each side whose median is "the spacing around" an interval. Local rather than the
 * whole run's: the history is thinned (appendThinned), so older points lie 2, 4, 8… times apart.
 */
const GAP_NEIGHBOURS = 8;

/**
 * After a break in a cumulative counter, how long before it is trusted for a rate, ms. A member
 * enters the room's byte count at its hello with 0 and with its whole counter at its first
 * heartbeat (heartbeatMs, 1 s by default), which the next sample (about 1 s later) sees: one jump
 * that is no traffic of that interval, and after a host's reload every member makes one.
 */
export const COUNTER_SETTLE_MS = 3000;

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1
    ? (sorted[mid] as number)
    : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

/**
 * gaps[i]: no line between points[i − 1] and points[i]. An interval is a gap when it is more than
 * GAP_FACTOR × the median of the intervals around it (up to GAP_NEIGHBOURS on each side), or when
 * time goes back. gaps[0] is false.
 */
export function timeGaps(points: readonly Pick<RoomViewPoint, 't'>[]): boolean[] {
  const intervals = points.map((point, i) => (i === 0 ? 0 : point.t - (points[i - 1] as RoomViewPoint).t));
  return intervals.map((interval, i) => {
    if (i === 0) return false;
    if (interval < 0) return true;
    const around: number[] = [];
    const last = Math.min(intervals.length - 1, i + GAP_NEIGHBOURS);
    for (let j = Math.max(1, i - GAP_NEIGHBOURS); j <= last; j++) if (j !== i) around.push(intervals[j] as number);
    if (around.length === 0) return false;
    const spacing = median(around);
    return spacing > 0 && interval > GAP_FACTOR * spacing;
  });
}

/**
 * Readings as measurements: a value equal to the one before it is the same reading carried
 * forward (each point repeats the latest validation loss until the next evaluation, a worker's
 * last loss until its next step), so it becomes undefined: not drawn, joined across. The first
 * value, and one after a null, is a measurement; null stays null.
 */
export function measuredOnly(values: readonly (number | null)[]): (number | null | undefined)[] {
  return values.map((value, i) => (value !== null && i > 0 && values[i - 1] === value ? undefined : value));
}

/** Whether points `a` and `b` name the same workers. */
function samePeers(a: RoomViewPoint, b: RoomViewPoint): boolean {
  const ids = Object.keys(a.peers);
  return ids.length === Object.keys(b.peers).length && ids.every((id) => id in b.peers);
}

/** Whether a worker in both points reports a loss in `b` and had none in `a`: its first heartbeat since it said hello. */
function firstReport(a: RoomViewPoint, b: RoomViewPoint): boolean {
  return Object.entries(b.peers).some(([id, peer]) => peer.loss !== null && a.peers[id]?.loss === null);
}

/**
 * breaks[i]: the room's byte counter is not continuous from points[i − 1] to points[i], so no
 * rate spans that interval. The counter breaks where it goes back, across a time gap, where the
 * workers change (a member's counter enters or leaves the sum whole), and where a worker reports
 * for the first time since its hello. breaks[0] is true: the counters enter the sum there.
 */
export function counterBreaks(points: readonly RoomViewPoint[], gaps = timeGaps(points)): boolean[] {
  return points.map((point, i) => {
    const before = points[i - 1];
    if (!before) return true;
    return gaps[i] === true || point.bytes < before.bytes || !samePeers(before, point) || firstReport(before, point);
  });
}

/**
 * Indices of the values in `column` that no line reaches: a number whose nearest defined
 * neighbours (undefined is joined across) are null or missing. They are drawn as points instead.
 */
export function isolatedIndices(column: ArrayLike<number | null | undefined>): number[] {
  const isolated: number[] = [];
  let previous: number | null | undefined; // the last value that was not undefined
  for (let i = 0; i < column.length; i++) {
    const value = column[i];
    if (value === undefined) continue;
    if (value !== null && (previous === null || previous === undefined)) {
      let next: number | null | undefined;
      for (let j = i + 1; j < column.length && next === undefined; j++) next = column[j];
      if (next === null || next === undefined) isolated.push(i);
    }
    previous = value;
  }
  return isolated;
}
