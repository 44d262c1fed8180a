/**
 * One uPlot line chart as a React component. The uPlot instance is created once per structure
 * (series, units, axis kind, color scheme) and fed with setData on every update, since the
 * dashboard updates every second; it follows its container's width (ResizeObserver) and is
 * destroyed on unmount.
 *
 * Interaction: drag across the plot to zoom into an x range (live updates then keep that range),
 * double-click to go back to following the whole run.
 */
import { type ReactNode, type RefObject, useEffect, useRef, useState } from 'react';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import './charts.css';
import { type ChartStructure, chartOptions, isZoomed } from './chart-options.ts';
import { type ChartColumns, hasValues, type SeriesSpec, type XAxisKind } from './series.ts';

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

/** Follows the width of the plot's container: the chart is resized to it, once per animation frame. */
function useFollowWidth(plotRef: RefObject<HTMLDivElement | null>, chartRef: RefObject<uPlot | null>) {
  // biome-ignore lint/correctness/useExhaustiveDependencies: the refs' objects are stable; the chart is read when the observer fires.
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
    const options = chartOptions(
      target,
      JSON.parse(structure) as ChartStructure,
      height,
      (v) => latest.current.formatY?.(v),
      (u) => {
        zoomed.current = isZoomed(u);
      },
    );
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

  useFollowWidth(plotRef, chartRef);

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
