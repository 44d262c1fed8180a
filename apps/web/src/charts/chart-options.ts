/**
 * The uPlot options of a TimeSeriesChart: its axes (SI, byte or duration ticks; decade ticks on a
 * log axis; axes as wide as their labels), its y scale, its lines (gaps at null, markers at values
 * no line reaches) and its legend, which shows the latest values while no cursor is over the plot.
 */
import type uPlot from 'uplot';
import { formatDuration, formatQuantity, formatSi } from './format.ts';
import { isolatedIndices } from './gaps.ts';
import { PEER_PALETTE, type SeriesSpec, type XAxisKind } from './series.ts';

/** What a chart's uPlot instance is built from: a change of any of it builds a new one. */
export interface ChartStructure {
  series: SeriesSpec[];
  units: string;
  xAxis: XAxisKind;
  xLabel: string;
  yLabel?: string;
  logY: boolean;
  zeroBased: boolean;
}

/** Below this the container is hidden or not laid out yet: draw at a sensible width meanwhile. */
const FALLBACK_WIDTH = 320;

/** Units whose axis ticks read better with the unit on them ("10 MB" rather than "10M"). */
const UNIT_TICKS = new Set(['B', 'B/s']);

function cssColor(element: Element, color: string): string {
  if (!color.startsWith('--')) return color;
  const value = getComputedStyle(element).getPropertyValue(color).trim();
  return value || '#888888';
}

function lastNonNull(column: ArrayLike<number | null | undefined> | undefined): number | null {
  if (!column) return null;
  for (let i = column.length - 1; i >= 0; i--) {
    const value = column[i];
    if (value !== null && value !== undefined) return value;
  }
  return null;
}

/** An axis as wide as its longest tick label (uPlot's axis-autosize recipe). */
function axisSize(self: uPlot, values: string[] | null, axisIdx: number, cycleNum: number): number {
  const axis = self.axes[axisIdx] as uPlot.Axis & { _size?: number; font?: [string, number, number] | string };
  if (cycleNum > 1 && axis._size !== undefined) return axis._size; // converge instead of oscillating
  let size = (axis.ticks?.size ?? 10) + (axis.gap ?? 5);
  const longest = (values ?? []).reduce((a, b) => (b && b.length > a.length ? b : a), '');
  if (longest) {
    self.ctx.font = Array.isArray(axis.font) ? axis.font[0] : (axis.font ?? '12px sans-serif');
    size += self.ctx.measureText(longest).width / (globalThis.devicePixelRatio || 1);
  }
  return Math.ceil(size) + 4;
}

/**
 * Ticks of a log axis: whole decades, thinned to one per ~28 px of plot height; within a single
 * decade, 1, 2 and 5 times it (uPlot's default draws every mantissa, a dense grid).
 */
function decadeSplits(self: uPlot, _axisIdx: number, min: number, max: number): number[] {
  if (!(min > 0 && max > 0)) return [];
  const low = Math.ceil(Math.log10(min) - 1e-9);
  const high = Math.floor(Math.log10(max) + 1e-9);
  const room = Math.max(2, Math.floor(self.bbox.height / (globalThis.devicePixelRatio || 1) / 28));
  const step = Math.max(1, Math.ceil((high - low + 1) / room));
  const splits: number[] = [];
  for (let e = low; e <= high; e += step) splits.push(10 ** e);
  if (splits.length >= 2) return splits;
  const fine: number[] = [];
  for (let e = Math.floor(Math.log10(min)); e <= Math.ceil(Math.log10(max)); e++)
    for (const m of [1, 2, 5]) if (m * 10 ** e >= min && m * 10 ** e <= max) fine.push(m * 10 ** e);
  return fine;
}

/** Whether the x scale shows less than the whole data: the user zoomed in. */
export function isZoomed(self: uPlot): boolean {
  const xs = self.data[0];
  const { min, max } = self.scales.x ?? {};
  if (!xs || xs.length < 2 || min == null || max == null) return false;
  const first = xs[0] as number;
  const last = xs[xs.length - 1] as number;
  const slack = (last - first) * 1e-6;
  return min > first + slack || max < last - slack;
}

/**
 * One y series' uPlot options. A null cell is a gap, with no line across it (undefined cells, values
 * not measured there, are joined across); a marker at every value where the spec asks, elsewhere
 * at a value no line reaches, which would otherwise not show at all.
 */
export function lineSeries(spec: SeriesSpec, stroke: string, formatLegendY: (value: number) => string): uPlot.Series {
  return {
    label: spec.label,
    stroke,
    width: spec.width ?? 1.5,
    ...(spec.dash ? { dash: spec.dash } : {}),
    spanGaps: false,
    points: spec.points
      ? { show: true }
      : {
          filter: (u: uPlot, s: number, show: boolean) => {
            if (show) return null; // uPlot draws every point anyway
            const lone = isolatedIndices(u.data[s] ?? []);
            return lone.length > 0 ? lone : null;
          },
        },
    // With no cursor over the plot, the legend shows the latest value.
    value: (u, v, s, idx) => {
      const y = idx === null ? lastNonNull(u.data[s]) : v;
      return y === null || y === undefined ? '—' : formatLegendY(y);
    },
  };
}

/**
 * The options of a chart of `structure` drawn into `target` (its colors read from its CSS
 * variables): `formatY` formats a legend value where the chart's props give a formatter (read at
 * each call), `onXScale` hears every change of the x scale.
 */
export function chartOptions(
  target: HTMLElement,
  structure: ChartStructure,
  height: number,
  formatY: (value: number) => string | undefined,
  onXScale: (u: uPlot) => void,
): uPlot.Options {
  const { units, xAxis, xLabel, yLabel, logY, zeroBased } = structure;
  const color = (spec: SeriesSpec, i: number) =>
    cssColor(target, spec.color ?? PEER_PALETTE[i % PEER_PALETTE.length] ?? '#888888');
  const muted = cssColor(target, '--chart-muted');
  const grid = cssColor(target, '--chart-grid');

  const formatX = (v: number) => (xAxis === 'tokens' ? formatSi(v) : formatDuration(v));
  const formatLegendY = (v: number) => formatY(v) ?? formatQuantity(v, units);
  const formatTickY = (v: number) => (UNIT_TICKS.has(units) ? formatQuantity(v, units, 2) : formatSi(v, 3));
  const axisStyle = {
    stroke: muted,
    grid: { stroke: grid, width: 1 },
    ticks: { stroke: grid, width: 1, size: 5 },
    labelFont: '12px system-ui, sans-serif',
    font: '11px system-ui, sans-serif',
  };
  const yScale: uPlot.Scale = logY
    ? { distr: 3, log: 10 }
    : zeroBased
      ? { range: (_u, _min, max) => [0, max !== null && max > 0 ? max * 1.08 : 1] }
      : {};

  return {
    width: Math.max(target.clientWidth, 0) || FALLBACK_WIDTH,
    height,
    scales: { x: { time: false }, y: yScale },
    axes: [
      {
        ...axisStyle,
        label: xLabel,
        size: 30,
        labelSize: 18,
        labelGap: 0,
        values: (_u, splits) => splits.map((v) => (v === null || v === undefined ? '' : formatX(v))),
      },
      {
        // The units are in the title and on the ticks; a rotated label only where one is asked for.
        ...axisStyle,
        ...(yLabel ? { label: yLabel, labelSize: 18, labelGap: 0 } : {}),
        size: axisSize,
        // uPlot's own log filter would hide the labels of decades that are not adjacent.
        ...(logY ? { splits: decadeSplits, filter: (_u: uPlot, splits: number[]) => splits } : {}),
        values: (_u, splits) => splits.map((v) => (v === null || v === undefined ? '' : formatTickY(v))),
      },
    ],
    series: [
      {
        label: xLabel,
        // With no cursor over the plot, the legend shows the latest values.
        value: (u, v, _s, idx) => {
          const x = idx === null ? lastNonNull(u.data[0]) : v;
          return x === null ? '—' : xAxis === 'tokens' ? `${formatSi(x)} tokens` : formatDuration(x);
        },
      },
      ...structure.series.map((spec, i) => lineSeries(spec, color(spec, i), formatLegendY)),
    ],
    legend: { live: true },
    cursor: { drag: { x: true, y: false }, points: { size: 6 } },
    hooks: {
      setScale: [
        (u, key) => {
          if (key === 'x') onXScale(u);
        },
      ],
    },
  };
}
