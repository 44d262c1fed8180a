/**
 * The room's chart points (RoomViewPoint, packages/protocol/src/room-view.ts) as columns for
 * uPlot: one x column (tokens or seconds since the run started) and one column per series, with
 * `null` where a series has no value. Pure functions, no DOM: the dashboard and the watch page
 * call them on every update, the tests in Node.
 */
import { bitsPerByte } from '@shoal/data';
import type { RoomViewPoint } from '@shoal/protocol';

/** What the x axis counts: the room's tokens trained, or seconds since the run started. */
export type XAxisKind = 'tokens' | 'time';

/** uPlot's AlignedData, kept DOM-free: x ascending, then one column per series. */
export type ChartColumns = [x: number[], ...series: (number | null)[][]];

export interface SeriesSpec {
  label: string;
  /** A CSS color, or a custom property name (`--chart-fg`) read from the page when the chart is drawn. */
  color?: string;
  /** Canvas line dash in px, e.g. [6, 4]. */
  dash?: number[];
  /** Line width in px; default 1.5. */
  width?: number;
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
 * Indices of `points` in ascending x (stable): uPlot needs x sorted. Time always ascends; the
 * token count can step back (a resumed room), so it is checked rather than assumed.
 */
function ascendingOrder(points: readonly RoomViewPoint[], xAxis: XAxisKind): number[] {
  const indices = points.map((_, i) => i);
  const xs = points.map((p) => xOf(p, xAxis));
  const sorted = xs.every((x, i) => i === 0 || x >= (xs[i - 1] as number));
  return sorted ? indices : indices.sort((a, b) => (xs[a] as number) - (xs[b] as number) || a - b);
}

/** Builds columns from per-point values, in ascending x. */
function columns(
  points: readonly RoomViewPoint[],
  xAxis: XAxisKind,
  values: ((point: RoomViewPoint, index: number) => number | null)[],
): ChartColumns {
  const order = ascendingOrder(points, xAxis);
  const x = order.map((i) => xOf(points[i] as RoomViewPoint, xAxis));
  const ys = values.map((value) => order.map((i) => finiteOrNull(value(points[i] as RoomViewPoint, i))));
  return [x, ...ys];
}

function finiteOrNull(value: number | null | undefined): number | null {
  return value !== null && value !== undefined && Number.isFinite(value) ? value : null;
}

function peerSeries(points: readonly RoomViewPoint[], options: SeriesOptions) {
  const peers = choosePeers(points, options.maxPeers ?? DEFAULT_MAX_PEERS);
  const labels = peerLabels(peers.map((p) => p.id));
  return peers.map((p, j) => ({
    id: p.id,
    spec: { label: labels[j] as string, color: PEER_PALETTE[p.index % PEER_PALETTE.length], width: 1 },
  }));
}

/** A loss in nats per byte-token in bits per byte; null stays null. */
function lossInBits(nats: number | null | undefined): number | null {
  return nats === null || nats === undefined ? null : bitsPerByte(nats);
}

/**
 * Loss: the host's validation loss on θ_global (the line that matters), the mean of the workers'
 * training losses, then each volunteer's training loss. The points carry nats per byte-token;
 * the columns are bits per byte (docs/bits-per-byte.md).
 */
export function lossSeries(
  points: readonly RoomViewPoint[],
  xAxis: XAxisKind,
  options: SeriesOptions = {},
): ChartSeries {
  const peers = peerSeries(points, options);
  return {
    data: columns(points, xAxis, [
      (p) => lossInBits(p.evalLoss),
      (p) => lossInBits(p.trainLoss),
      ...peers.map(
        ({ id }) =>
          (p: RoomViewPoint) =>
            lossInBits(p.peers[id]?.loss),
      ),
    ]),
    series: [
      { label: 'validation (θ_global)', color: CHART_FG, width: 2.5 },
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
 * `windowMs` (at least the previous point; 0 = successive points only). null for the first point,
 * where time does not advance, and across a drop in the counter (a member that left takes its
 * bytes with it), which starts the window afresh.
 */
export function byteRates(points: readonly RoomViewPoint[], windowMs = 0): (number | null)[] {
  const rates: (number | null)[] = [];
  let start = 0; // the window's first point
  let resetAt = 0; // the first point after the latest drop in the counter
  points.forEach((point, i) => {
    if (i > 0 && point.bytes < (points[i - 1] as RoomViewPoint).bytes) resetAt = i;
    start = Math.max(start, resetAt);
    // Move the start up while the point after it still covers the window.
    while (start + 1 < i && point.t - (points[start + 1] as RoomViewPoint).t >= windowMs) start++;
    const from = points[start] as RoomViewPoint;
    const dt = (point.t - from.t) / 1000;
    rates.push(start < i && dt > 0 ? (point.bytes - from.bytes) / dt : null);
  });
  return rates;
}

/** Bandwidth: the room's bytes/s on the mesh (see byteRates). */
export function bandwidthRateSeries(points: readonly RoomViewPoint[], xAxis: XAxisKind, windowMs = 0): ChartSeries {
  const rates = byteRates(points, windowMs);
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
