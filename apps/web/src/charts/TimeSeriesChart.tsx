/**
 * One uPlot line chart as a React component. The uPlot instance is created once per structure
 * (series, units, axis kind, color scheme) and fed with setData on every update, since the
 * dashboard updates every second; it follows its container's width (ResizeObserver) and is
 * destroyed on unmount.
 *
 * Interaction: drag across the plot to zoom into an x range (live updates then keep that range),
 * double-click to go back to following the whole run.
 */
import { type ReactNode, useEffect, useRef, useState } from 'react';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import './charts.css';
import { formatDuration, formatQuantity, formatSi } from './format.ts';
import { isolatedIndices } from './gaps.ts';
import { type ChartColumns, hasValues, PEER_PALETTE, type SeriesSpec, type XAxisKind } from './series.ts';

export interface TimeSeriesChartProps {
  title: string;
  /** The y values' unit: shown beside the title, in the legend and on byte axes ('B/s' → "1.2 MB/s"). */
  units: string;
  /** 'tokens': an SI number axis (1.2M); 'time': seconds since the run started, shown as m:ss. */
  xAxis: XAxisKind;
  /** The x axis' label; default "tokens" or "time". */
  xLabel?: string;
  /** The y axis' label, drawn beside its ticks; default none (the units are in the title). */
  yLabel?: string;
  /**
   * uPlot's AlignedData: x ascending, then one column per entry of `series`: null breaks a line
   * (a gap), undefined is a value not measured there (the line joins across it).
   */
  data: ChartColumns;
  series: SeriesSpec[];
  /** Height of the plot (axes included, legend not) in px; default 220. */
  height?: number;
  /** A logarithmic y axis (base 10); zeros and negatives must be null. */
  logY?: boolean;
  /** Start the y axis at 0 (rates, counts). */
  zeroBased?: boolean;
  /** Formats a y value for the legend; default: SI prefix and `units`. */
  formatY?: (value: number) => string;
  /** Shown beside the title (e.g. a ratio). */
  subtitle?: ReactNode;
  /** Shown over the plot while no series has a value; default "waiting for data". */
  emptyText?: string;
  className?: string;
  testId?: string;
}

const DEFAULT_HEIGHT = 220;
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
function isZoomed(self: uPlot): boolean {
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

/** Re-renders when the page switches between light and dark, so the canvas picks up new colors. */
function useColorScheme(): number {
  const [version, setVersion] = useState(0);
  useEffect(() => {
    const query = globalThis.matchMedia?.('(prefers-color-scheme: dark)');
    if (!query) return;
    const onChange = () => setVersion((v) => v + 1);
    query.addEventListener('change', onChange);
    return () => query.removeEventListener('change', onChange);
  }, []);
  return version;
}

export function TimeSeriesChart(props: TimeSeriesChartProps) {
  const { title, units, xAxis, data, series, height = DEFAULT_HEIGHT, logY = false, zeroBased = false } = props;
  const xLabel = props.xLabel ?? (xAxis === 'tokens' ? 'tokens' : 'time');
  const yLabel = props.yLabel;
  const plotRef = useRef<HTMLDivElement>(null);
  const chartRef = useRef<uPlot | null>(null);
  const appliedData = useRef<ChartColumns | null>(null);
  const zoomed = useRef(false);
  // Callbacks inside uPlot read the latest props, so changing a formatter never rebuilds the chart.
  const latest = useRef(props);
  latest.current = props;
  const scheme = useColorScheme();

  // What requires a new uPlot instance; everything else goes through setData / setSize.
  const structure = JSON.stringify({ series, units, xAxis, xLabel, yLabel, logY, zeroBased });

  // biome-ignore lint/correctness/useExhaustiveDependencies: `structure` and `scheme` stand for what the build reads; data and height go through their own effects.
  useEffect(() => {
    const target = plotRef.current;
    if (!target) return;
    const specs = JSON.parse(structure) as { series: SeriesSpec[] };
    const color = (spec: SeriesSpec, i: number) =>
      cssColor(target, spec.color ?? PEER_PALETTE[i % PEER_PALETTE.length] ?? '#888888');
    const muted = cssColor(target, '--chart-muted');
    const grid = cssColor(target, '--chart-grid');

    const formatX = (v: number) => (xAxis === 'tokens' ? formatSi(v) : formatDuration(v));
    const formatLegendY = (v: number) => latest.current.formatY?.(v) ?? formatQuantity(v, units);
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

    const options: uPlot.Options = {
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
        ...specs.series.map((spec, i) => lineSeries(spec, color(spec, i), formatLegendY)),
      ],
      legend: { live: true },
      cursor: { drag: { x: true, y: false }, points: { size: 6 } },
      hooks: {
        setScale: [
          (u, key) => {
            if (key === 'x') zoomed.current = isZoomed(u);
          },
        ],
      },
    };
    const current = latest.current.data;
    const chart = new uPlot(options, current as uPlot.AlignedData, target);
    chartRef.current = chart;
    appliedData.current = current;
    zoomed.current = false;
    return () => {
      chart.destroy();
      if (chartRef.current === chart) chartRef.current = null;
    };
  }, [structure, scheme]);

  useEffect(() => {
    const chart = chartRef.current;
    if (!chart || appliedData.current === data) return;
    // Each chart redraws in a task of its own: four charts redrawn in the commit that brought
    // their data made one long task on a busy machine; one at a time, each stays short.
    const task = setTimeout(() => {
      if (chartRef.current !== chart) return;
      appliedData.current = data;
      if (data[0].length === 0) zoomed.current = false;
      chart.setData(data as uPlot.AlignedData, !zoomed.current);
    }, 0);
    return () => clearTimeout(task);
  }, [data]);

  useEffect(() => {
    const chart = chartRef.current;
    if (chart && chart.height !== height) chart.setSize({ width: chart.width, height });
  }, [height]);

  useEffect(() => {
    const target = plotRef.current;
    if (!target || typeof ResizeObserver === 'undefined') return;
    let frame = 0;
    const observer = new ResizeObserver(() => {
      cancelAnimationFrame(frame);
      frame = requestAnimationFrame(() => {
        const chart = chartRef.current;
        const width = Math.floor(target.clientWidth);
        if (chart && width > 0 && Math.abs(width - chart.width) >= 1) chart.setSize({ width, height: chart.height });
      });
    });
    observer.observe(target);
    return () => {
      cancelAnimationFrame(frame);
      observer.disconnect();
    };
  }, []);

  const empty = !hasValues(data);
  return (
    <figure
      className={`shoal-chart${props.className ? ` ${props.className}` : ''}`}
      aria-label={title}
      data-testid={props.testId}
      data-empty={empty || undefined}
      style={{ margin: 0 }}
    >
      <figcaption className="shoal-chart-title">
        {title} {units && <small>{units}</small>} {props.subtitle && <small>{props.subtitle}</small>}
      </figcaption>
      <div className="shoal-chart-plot">
        {/* uPlot owns this element's children; React owns its siblings. */}
        <div ref={plotRef} />
        {empty && (
          <div className="shoal-chart-empty" style={{ height, bottom: 'auto' }}>
            <span>{props.emptyText ?? 'waiting for data'}</span>
          </div>
        )}
      </div>
    </figure>
  );
}
