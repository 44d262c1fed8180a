/**
 * The room's charts, for the host dashboard and the watch page: loss in bits per byte (the latest
 * validation figure, with its nats, beside the title), throughput, bandwidth and cumulative bytes
 * against Shoal's baselines, over tokens or run time, in a grid that is one column wide on a
 * phone. The bandwidth chart names how the rounds travel (the codec, the rank in use) in the room
 * view's own words.
 */
import type { RoomViewPoint } from '@shoal/protocol';
import { useId, useMemo, useState } from 'react';
import { BITS_PER_BYTE, formatLoss, formatSi } from './format.ts';
import {
  bandwidthRateSeries,
  cumulativeBytesSeries,
  latestEvalLoss,
  lossSeries,
  savings,
  throughputSeries,
  type XAxisKind,
} from './series.ts';
import { TimeSeriesChart } from './TimeSeriesChart.tsx';

export interface RoomChartsProps {
  /** The room's chart points, oldest first (RoomViewUpdate.points, accumulated). */
  points: readonly RoomViewPoint[];
  /**
   * How the rounds travel, shown beside the bandwidth chart's title: the room view's
   * `metrics.wire.label` ('fp4, low-rank r 8 / 4 (adaptive, ≤ 8)'); absent in older views.
   */
  wire?: string;
  /** Tokens or run time on x. Left out, the charts keep their own choice (tokens at first). */
  xAxis?: XAxisKind;
  /** Called when the toggle is used; pair it with `xAxis` to control the choice from a store. */
  onXAxisChange?: (xAxis: XAxisKind) => void;
  /** Most per-volunteer lines per chart; default 12. */
  maxPeers?: number;
  /** Bytes/s averaged over this trailing window; default 5000 ms (rounds send in bursts). */
  rateWindowMs?: number;
  /** Plot height in px; default 220. */
  chartHeight?: number;
}

const X_AXES: { value: XAxisKind; label: string }[] = [
  { value: 'tokens', label: 'tokens' },
  { value: 'time', label: 'time' },
];

function ratio(value: number | null): string | null {
  return value === null ? null : `${formatSi(value, 2)}×`;
}

export function RoomCharts({
  points,
  wire,
  xAxis: controlled,
  onXAxisChange,
  maxPeers,
  rateWindowMs = 5000,
  chartHeight,
}: RoomChartsProps) {
  const labelId = useId();
  const [own, setOwn] = useState<XAxisKind>('tokens');
  const xAxis = controlled ?? own;
  const choose = (value: XAxisKind) => {
    setOwn(value);
    onXAxisChange?.(value);
  };
  const options = useMemo(() => (maxPeers === undefined ? {} : { maxPeers }), [maxPeers]);
  const loss = useMemo(() => lossSeries(points, xAxis, options), [points, xAxis, options]);
  const evalLoss = latestEvalLoss(points);
  const throughput = useMemo(() => throughputSeries(points, xAxis, options), [points, xAxis, options]);
  const rate = useMemo(() => bandwidthRateSeries(points, xAxis, rateWindowMs), [points, xAxis, rateWindowMs]);
  const cumulative = useMemo(() => cumulativeBytesSeries(points, xAxis), [points, xAxis]);
  const saved = useMemo(() => savings(points), [points]);
  const fp32 = ratio(saved.fp32);
  const dp = ratio(saved.dp);
  const bytesNote =
    fp32 || dp
      ? [fp32 && `${fp32} less than fp32 DiLoCo`, dp && `${dp} less than data-parallel`].filter(Boolean).join(' · ')
      : undefined;

  return (
    <section className="shoal-room-charts" data-testid="room-charts">
      <div className="shoal-charts-toolbar">
        <span className="muted" id={labelId}>
          x axis
        </span>
        <fieldset className="shoal-charts-toggle" aria-labelledby={labelId}>
          {X_AXES.map(({ value, label }) => (
            <button key={value} type="button" aria-pressed={xAxis === value} onClick={() => choose(value)}>
              {label}
            </button>
          ))}
        </fieldset>
      </div>
      <div className="shoal-charts">
        <TimeSeriesChart
          title="Loss"
          units={BITS_PER_BYTE}
          yLabel={BITS_PER_BYTE}
          subtitle={evalLoss !== null && <span data-testid="chart-loss-latest">validation {formatLoss(evalLoss)}</span>}
          xAxis={xAxis}
          data={loss.data}
          series={loss.series}
          height={chartHeight}
          testId="chart-loss"
        />
        <TimeSeriesChart
          title="Throughput"
          units="tok/s"
          xAxis={xAxis}
          data={throughput.data}
          series={throughput.series}
          height={chartHeight}
          zeroBased
          testId="chart-throughput"
        />
        <TimeSeriesChart
          title="Bandwidth"
          units="B/s"
          xAxis={xAxis}
          data={rate.data}
          series={rate.series}
          height={chartHeight}
          zeroBased
          subtitle={wire && <span data-testid="wire-label">{wire}</span>}
          testId="chart-bandwidth"
        />
        <TimeSeriesChart
          title="Bytes sent"
          units="B"
          xAxis={xAxis}
          data={cumulative.data}
          series={cumulative.series}
          height={chartHeight}
          logY
          subtitle={bytesNote}
          testId="chart-bytes"
        />
      </div>
    </section>
  );
}
