/**
 * What the volunteer page shows of the volunteer's own machine and progress: how much of its
 * processor Shoal uses (the duty cycle asked for and the share of time a step was measured in
 * progress), the memory Shoal holds for the room, and its own loss and speed over time.
 */
import { useDeferredValue, useMemo } from 'react';
import { useStore } from 'zustand';
import { useShallow } from 'zustand/shallow';
import { BITS_PER_BYTE } from '../charts/format.ts';
import { CHART_ACCENT, CHART_FG } from '../charts/series.ts';
import { TimeSeriesChart } from '../charts/TimeSeriesChart.tsx';
import { LEFT_PHASE, store } from '../store.ts';
import { ownColumns } from './own-series.ts';
import { fmt, StatTiles } from './parts.tsx';

export function OwnProgress() {
  const own = useStore(
    store,
    useShallow((state) => ({
      backend: state.volunteer?.backend ?? null,
      dutyCycle: state.volunteer?.dutyCycle ?? state.settings.dutyCycle,
      busy: state.volunteer?.busyFraction ?? null,
      memory: state.volunteer?.memoryBytes ?? null,
      pipeline: Boolean(state.volunteer?.config?.pipeline),
      left: state.phase === LEFT_PHASE,
    })),
  );
  const points = useDeferredValue(useStore(store, (state) => state.ownPoints));
  const columns = useMemo(() => ownColumns(points), [points]);
  const processor = own.backend === 'cpu' ? 'CPU' : 'GPU';
  return (
    <section className="card" aria-labelledby="own-progress-title" data-testid="own-progress">
      <h2 id="own-progress-title">Your machine and your progress</h2>
      <StatTiles
        stats={[
          {
            label: `${processor} use`,
            value: own.left
              ? 'none (left)'
              : `${own.busy === null ? '—' : fmt.percent(own.busy)} busy · cap ${fmt.percent(own.dutyCycle)}`,
            hint: `the share of time a training step was in progress here lately, and the duty cycle you allow (Controls)${own.pipeline ? '; not measured in a pipeline room' : ''}`,
            testId: 'own-busy',
          },
          {
            label: 'Memory Shoal holds',
            value: own.left ? 'none (left)' : fmt.bytes(own.memory),
            hint: own.pipeline
              ? 'not counted in a pipeline room'
              : 'the model’s weights, gradients, optimizer state and activations, and the room’s text; the browser adds its own',
            testId: 'own-memory',
          },
        ]}
      />
      <div className="shoal-charts">
        <TimeSeriesChart
          title="Your loss"
          units={BITS_PER_BYTE}
          yLabel={BITS_PER_BYTE}
          xAxis="time"
          xLabel="time since you started"
          data={columns.loss}
          series={[{ label: 'training loss', color: CHART_ACCENT }]}
          height={160}
          emptyText="from your first step"
          testId="chart-own-loss"
        />
        <TimeSeriesChart
          title="Your speed"
          units="tok/s"
          xAxis="time"
          xLabel="time since you started"
          data={columns.speed}
          series={[{ label: 'tokens/s', color: CHART_FG }]}
          height={160}
          zeroBased
          emptyText="from your first step"
          testId="chart-own-speed"
        />
      </div>
    </section>
  );
}
