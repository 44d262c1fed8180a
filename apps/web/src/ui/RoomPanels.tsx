/**
 * What the dashboard and the watch page both show of a room: the numbers, the charts, a pipeline
 * room's groups and stages, the peers and the fragment-sync timeline. The dashboard adds its
 * controls around it; the watch page shows it as it is.
 */
import { useDeferredValue } from 'react';
import { useStore } from 'zustand';
import { useShallow } from 'zustand/shallow';
import { RoomCharts } from '../charts/RoomCharts.tsx';
import { metricsOf, store } from '../store.ts';
import { PipelineGroups } from './PipelineTables.tsx';
import { fmt, StatTiles } from './parts.tsx';
import { PeersTable, RoundsTimeline } from './RoomTables.tsx';

export function RoomNumbers() {
  // re-render only when a shown number changes (not on every store update)
  const metrics = useStore(store, useShallow(metricsOf));
  const volunteers = useStore(
    store,
    (state) => (state.view?.peers ?? []).filter((peer) => peer.role === 'worker').length,
  );
  return (
    <StatTiles
      stats={[
        {
          label: 'Validation loss',
          value: fmt.loss(metrics.evalLoss),
          hint: 'the host’s loss on θ_global',
          testId: 'eval-loss',
        },
        { label: 'Training loss', value: fmt.loss(metrics.trainLoss), hint: 'mean of the volunteers’ last losses' },
        { label: 'Tokens', value: fmt.tokens(metrics.tokens), testId: 'room-tokens' },
        { label: 'Step', value: fmt.count(metrics.step), hint: 'the room’s tokens ÷ tokens per step' },
        { label: 'Throughput', value: fmt.rate(metrics.tokensPerSecond) },
        { label: 'Volunteers', value: fmt.count(volunteers), testId: 'volunteer-count' },
        { label: 'Rounds', value: `${fmt.count(metrics.roundsCommitted)} committed`, testId: 'rounds-committed' },
        {
          label: 'Host bytes',
          value: `↑ ${fmt.bytes(metrics.bytesSent)} ↓ ${fmt.bytes(metrics.bytesReceived)}`,
          testId: 'host-bytes',
        },
      ]}
    />
  );
}

const NONE: never[] = [];

export function RoomPanels({ onKick }: { onKick?: (peer: string) => void }) {
  // Deferred: the charts and tables re-render in React's background lane, in slices that yield
  // to the main thread, so a room view arriving mid-round never blocks input or the mesh.
  const points = useDeferredValue(useStore(store, (state) => state.points));
  const peers = useDeferredValue(useStore(store, (state) => state.view?.peers));
  const rounds = useDeferredValue(useStore(store, (state) => state.view?.rounds));
  const pipeline = useDeferredValue(useStore(store, (state) => state.view?.pipeline));
  const wire = useStore(store, (state) => state.view?.metrics.wire?.label);
  return (
    <>
      <section className="card">
        <h2>Convergence, throughput and bandwidth</h2>
        <RoomCharts points={points} wire={wire} />
      </section>
      {pipeline && (
        <section className="card" data-testid="pipeline" aria-labelledby="pipeline-heading">
          <h2 id="pipeline-heading">Groups and stages</h2>
          <PipelineGroups pipeline={pipeline} peers={peers ?? NONE} />
        </section>
      )}
      <section className="card">
        <h2>Volunteers</h2>
        <PeersTable peers={peers ?? NONE} pipeline={pipeline !== undefined} onKick={onKick} />
      </section>
      <section className="card">
        <h2>Fragment sync</h2>
        <RoundsTimeline rounds={rounds ?? NONE} />
      </section>
    </>
  );
}
