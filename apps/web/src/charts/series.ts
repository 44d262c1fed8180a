/**
 * The room's chart points (RoomViewPoint, packages/protocol/src/room-view.ts) as columns for
 * uPlot: one x column (tokens or seconds since the run started) and one column per series, with
 * `null` where a series has no value (the line breaks) and `undefined` where a reading is carried
 * forward (not drawn, joined across). A gap in time (gaps.ts) is a row of nulls between the points
 * on either side. Pure functions, no DOM: the dashboard and the watch page call them on every
 * update, the tests in Node.
 */
import { bitsPerByte } from '@shoal/data';
import type { RoomViewPoint } from '@shoal/protocol';
import { COUNTER_SETTLE_MS, counterBreaks, measuredOnly, timeGaps } from './gaps.ts';

/** What the x axis counts: the room's tokens trained, or seconds since the run started. */
export type XAxisKind = 'tokens' | 'time';

/** A column's cell: a value, null (none: the line breaks), undefined (not measured here: joined across). */
export type ChartValue = number | null | undefined;

/** uPlot's AlignedData, kept DOM-free: x ascending, then one column per series. */
export type ChartColumns = [x: number[], ...series: ChartValue[][]];

export interface SeriesSpec {
  label: string;
  /** A CSS color, or a custom property name (`--chart-fg`) read from the page when the chart is drawn. */
  color?: string;
  /** Canvas line dash in px, e.g. [6, 4]. */
  dash?: number[];
  /** Line width in px; default 1.5. */
  width?: number;
  /** A marker at every value: a series of sparse measurements (validation loss), each one shown. */
  points?: boolean;
}

export interface ChartSeries {
  data: ChartColumns;
  series: SeriesSpec[];
}

/**
 * Colors of the volunteers' series, by the order a peer was first seen, so one volunteer keeps
 * its color in every chart. Mid-tone (Tableau 10), readable on dark and light backgrounds.
 */
export const PEER_PALETTE = [
  '#4e79a7',
  '#f28e2b',
  '#e15759',
  '#76b7b2',
  '#59a14f',
  '#edc948',
  '#b07aa1',
  '#ff9da7',
  '#9c755f',
  '#bab0ac',
] as const;

/** The custom properties TimeSeriesChart resolves (charts.css defines them with fallbacks). */
export const CHART_FG = '--chart-fg';
export const CHART_MUTED = '--chart-muted';
export const CHART_ACCENT = '--chart-accent';

/** Per-volunteer series beyond this are left out of a chart (the room's totals still count them). */
export const DEFAULT_MAX_PEERS = 12;

const DASHED = [6, 4];

export interface SeriesOptions {
  /** Most per-volunteer series to draw; default DEFAULT_MAX_PEERS. */
  maxPeers?: number;
}

/** Every peer id in `points`, in the order first seen (ids new in one point sorted): stable as points arrive. */
export function peerOrder(points: readonly RoomViewPoint[]): string[] {
  const seen = new Set<string>();
  for (const point of points) {
    const fresh = Object.keys(point.peers)
      .filter((id) => !seen.has(id))
      .sort();
    for (const id of fresh) seen.add(id);
  }
  return [...seen];
}

/**
 * The peers to draw when there are more than `max`: those in the latest point first, then the
 * most recently seen; returned in first-seen order, each with its first-seen index (its color).
 */
export function choosePeers(points: readonly RoomViewPoint[], max: number): { id: string; index: number }[] {
  const order = peerOrder(points);
  const all = order.map((id, index) => ({ id, index }));
  if (order.length <= max) return all;
  const lastSeen = new Map<string, number>();
  points.forEach((point, i) => {
    for (const id of Object.keys(point.peers)) lastSeen.set(id, i);
  });
  const chosen = new Set(
    [...all]
      .sort((a, b) => (lastSeen.get(b.id) ?? -1) - (lastSeen.get(a.id) ?? -1) || a.index - b.index)
      .slice(0, Math.max(0, max))
      .map((p) => p.id),
  );
  return all.filter((p) => chosen.has(p.id));
}

/**
 * Short labels for peer ids: the shortest prefix of at least 6 characters that tells them apart
 * (ids are up to 128 characters; a legend has room for about 8).
 */
export function peerLabels(ids: readonly string[]): string[] {
  for (const length of [6, 8, 12, 16]) {
    const labels = ids.map((id) => (id.length > length ? `${id.slice(0, length)}…` : id));
    if (new Set(labels).size === labels.length) return labels;
  }
  return [...ids];
}

/** The x value of a point: tokens, or seconds since the run started. */
export function xOf(point: RoomViewPoint, xAxis: XAxisKind): number {
  return xAxis === 'tokens' ? point.tokens : point.t / 1000;
}

/**
 * Indices of `xs` in ascending order (stable): uPlot needs x sorted. Time always ascends; the
 * token count can step back (a resumed room), so it is checked rather than assumed.
 */
function ascendingOrder(xs: readonly number[]): number[] {
  const indices = xs.map((_, i) => i);
  const sorted = xs.every((x, i) => i === 0 || x >= (xs[i - 1] as number));
  return sorted ? indices : indices.sort((a, b) => (xs[a] as number) - (xs[b] as number) || a - b);
}

/**
 * Builds columns from per-point values (index: the point's in `points`), in ascending x. Where
 * time has a gap between two points, a row of nulls halfway between them breaks every line.
 */
function columns(
  points: readonly RoomViewPoint[],
  xAxis: XAxisKind,
  values: ((point: RoomViewPoint, index: number) => ChartValue)[],
): ChartColumns {
  const gaps = timeGaps(points);
  const xs: number[] = [];
  const cells: ChartValue[][] = values.map(() => []);
  points.forEach((point, i) => {
    const x = xOf(point, xAxis);
    if (gaps[i]) {
      xs.push((xOf(points[i - 1] as RoomViewPoint, xAxis) + x) / 2);
      for (const column of cells) column.push(null);
    }
    xs.push(x);
    values.forEach((value, j) => {
      cells[j]?.push(cell(value(point, i)));
    });
  });
  const order = ascendingOrder(xs);
  return [order.map((k) => xs[k] as number), ...cells.map((column) => order.map((k) => column[k]))];
}

/** A value as a cell: non-finite numbers are null; undefined (carried forward) stays. */
function cell(value: ChartValue): ChartValue {
  return value === undefined || value === null || Number.isFinite(value) ? value : null;
}

function peerSeries(points: readonly RoomViewPoint[], options: SeriesOptions) {
  const peers = choosePeers(points, options.maxPeers ?? DEFAULT_MAX_PEERS);
  const labels = peerLabels(peers.map((p) => p.id));
  return peers.map((p, j) => ({
    id: p.id,
    spec: { label: labels[j] as string, color: PEER_PALETTE[p.index % PEER_PALETTE.length], width: 1 },
  }));
}

/** A loss in nats per byte-token in bits per byte; null and undefined stay. */
function lossInBits(nats: ChartValue): ChartValue {
  return nats === null || nats === undefined ? nats : bitsPerByte(nats);
}

/**
 * Loss: the host's validation loss on θ_global (the line that matters), the mean of the workers'
 * training losses, then each volunteer's training loss. The points carry nats per byte-token;
 * the columns are bits per byte (docs/bits-per-byte.md).
 *
 * Each point repeats the latest loss until a new one is measured, so only the points where a loss
 * changed are its measurements (measuredOnly): the validation loss is a point per evaluation, the
 * lines join measurements, and nothing is drawn flat at a value nobody measured again. A worker
 * absent from a point has no value there (null: its line breaks).
 */
export function lossSeries(
  points: readonly RoomViewPoint[],
  xAxis: XAxisKind,
  options: SeriesOptions = {},
): ChartSeries {
  const peers = peerSeries(points, options);
  const measured = (loss: (p: RoomViewPoint) => number | null | undefined) => {
    const values = measuredOnly(points.map((p) => loss(p) ?? null));
    return (_: RoomViewPoint, i: number) => lossInBits(values[i]);
  };
  return {
    data: columns(points, xAxis, [
      measured((p) => p.evalLoss),
      measured((p) => p.trainLoss),
      ...peers.map(({ id }) => measured((p) => p.peers[id]?.loss)),
    ]),
    series: [
      { label: 'validation (θ_global)', color: CHART_FG, width: 2.5, points: true },
      { label: 'train (mean)', color: CHART_MUTED, dash: DASHED, width: 1.5 },
      ...peers.map((p) => p.spec),
    ],
  };
}

/** The latest validation loss in `points`, in nats (as the points carry it); null before the first. */
export function latestEvalLoss(points: readonly RoomViewPoint[]): number | null {
  for (let i = points.length - 1; i >= 0; i--) {
    const loss = points[i]?.evalLoss;
    if (loss !== null && loss !== undefined && Number.isFinite(loss)) return loss;
  }
  return null;
}

/** Throughput: the room's tokens/s, then each volunteer's. */
export function throughputSeries(
  points: readonly RoomViewPoint[],
  xAxis: XAxisKind,
  options: SeriesOptions = {},
): ChartSeries {
  const peers = peerSeries(points, options);
  return {
    data: columns(points, xAxis, [
      (p) => p.tokensPerSecond,
      ...peers.map(
        ({ id }) =>
          (p: RoomViewPoint) =>
            p.peers[id]?.tokensPerSecond ?? null,
      ),
    ]),
    series: [{ label: 'room', color: CHART_FG, width: 2 }, ...peers.map((p) => p.spec)],
  };
}

/**
 * Bytes/s the room sends, per point in `points`' own (time) order: Δbytes / Δt over the trailing
 * `windowMs` (at least the previous point; 0 = successive points only), only ever between points
 * the counter runs continuously between. At a break in the counter (counterBreaks: it went back,
 * a time gap, a worker came or went or reported for the first time) the rates stop, and start
 * again from the first point `settleMs` after it, once the members' counters are all in. null
 * where there is no rate: those points, and where time does not advance. Nothing is clamped: a
 * rate is never negative because no interval it spans has the counter going back.
 */
export function byteRates(
  points: readonly RoomViewPoint[],
  windowMs = 0,
  settleMs = COUNTER_SETTLE_MS,
): (number | null)[] {
  const breaks = counterBreaks(points);
  const rates: (number | null)[] = [];
  let brokeAt = 0; // time of the latest break
  let start = -1; // the window's first point; -1 while the counter settles
  points.forEach((point, i) => {
    if (breaks[i]) {
      brokeAt = point.t;
      start = -1;
    }
    if (start < 0) {
      if (point.t - brokeAt >= settleMs) start = i; // the rates count from here
      rates.push(null);
      return;
    }
    // Move the start up while the point after it still covers the window.
    while (start + 1 < i && point.t - (points[start + 1] as RoomViewPoint).t >= windowMs) start++;
    const from = points[start] as RoomViewPoint;
    const dt = (point.t - from.t) / 1000;
    rates.push(dt > 0 ? (point.bytes - from.bytes) / dt : null);
  });
  return rates;
}

/** Bandwidth: the room's bytes/s on the mesh (see byteRates). */
export function bandwidthRateSeries(
  points: readonly RoomViewPoint[],
  xAxis: XAxisKind,
  windowMs = 0,
  settleMs = COUNTER_SETTLE_MS,
): ChartSeries {
  const rates = byteRates(points, windowMs, settleMs);
  return {
    data: columns(points, xAxis, [(_, i) => rates[i] ?? null]),
    series: [{ label: 'sent', color: CHART_ACCENT, width: 2 }],
  };
}

/**
 * Cumulative bytes: what the room sent, what fp32 DiLoCo and what data-parallel training would
 * have sent. Meant for a log y axis, so zeros (nothing yet) are gaps.
 */
export function cumulativeBytesSeries(points: readonly RoomViewPoint[], xAxis: XAxisKind): ChartSeries {
  const positive = (value: number) => (value > 0 ? value : null);
  return {
    data: columns(points, xAxis, [(p) => positive(p.bytes), (p) => positive(p.fp32Bytes), (p) => positive(p.dpBytes)]),
    series: [
      { label: 'Shoal', color: CHART_FG, width: 2 },
      { label: 'fp32 DiLoCo', color: PEER_PALETTE[1], dash: DASHED },
      { label: 'data-parallel', color: PEER_PALETTE[2], dash: DASHED },
    ],
  };
}

/** How many times fewer bytes the room sent than fp32 DiLoCo and data-parallel would have (latest point). */
export function savings(points: readonly RoomViewPoint[]): { fp32: number | null; dp: number | null } {
  const last = points[points.length - 1];
  if (!last || !(last.bytes > 0)) return { fp32: null, dp: null };
  const ratio = (other: number) => (other > 0 ? other / last.bytes : null);
  return { fp32: ratio(last.fp32Bytes), dp: ratio(last.dpBytes) };
}

/** True when some series has a value to draw (else the chart shows "waiting for data"). */
export function hasValues(data: ChartColumns): boolean {
  return data.slice(1).some((column) => column.some((v) => v !== null && v !== undefined));
}
