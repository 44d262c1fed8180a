/**
 * What the dashboard and the watch page both show of a room: the numbers, the charts, a pipeline
 * room's groups and stages, the peers and the fragment-sync timeline. The dashboard adds its
 * controls around it; the watch page shows it as it is. The volunteer page shows the same room
 * figures (RoomFigureTiles) from the host's summary of the same view: every room figure comes
 * from roomFiguresOf, so the three pages agree.
 */
import { useDeferredValue, useEffect, useState } from 'react';
import { useStore } from 'zustand';
import { useShallow } from 'zustand/shallow';
import { RoomCharts } from '../charts/RoomCharts.tsx';
import { metricsOf, ownPartOf, roomFiguresOf, store, volunteerCountOf } from '../store.ts';
import { PipelineGroups } from './PipelineTables.tsx';
import { fmt, type Stat, StatTiles } from './parts.tsx';
import { PeersTable, RoundsTimeline } from './RoomTables.tsx';
import { countdownText, endText, firstRoundText, progressText, risingText } from './room-progress.ts';

/** The room's step tile: the same words on every page. */
function stepStat(step: number | null, totalSteps: number | null): Stat {
  return {
    label: 'Step',
    value: fmt.count(step),
    hint: `the median volunteer’s place on the learning-rate schedule; it never goes back${totalSteps === null ? '' : ` (schedule: ${fmt.count(totalSteps)} steps)`}`,
    testId: 'room-step',
  };
}

export function RoomNumbers() {
  // re-render only when a shown number changes (not on every store update)
  const metrics = useStore(store, useShallow(metricsOf));
  const totalSteps = useStore(store, (state) => roomFiguresOf(state).totalSteps);
  const volunteers = useStore(store, volunteerCountOf);
  return (
    <>
      <StatTiles
        stats={[
          {
            label: 'Validation loss',
            value: fmt.loss(metrics.evalLoss),
            hint: 'the host’s loss on θ_global, in bits per byte (nats ÷ ln 2) and nats',
            testId: 'eval-loss',
          },
          {
            label: 'Training loss',
            value: fmt.loss(metrics.trainLoss),
            hint: 'mean of the volunteers’ last losses, in bits per byte and nats',
          },
          { label: 'Tokens', value: fmt.tokens(metrics.tokens), testId: 'room-tokens' },
          stepStat(metrics.step, totalSteps),
          { label: 'Throughput', value: fmt.rate(metrics.tokensPerSecond), testId: 'room-speed' },
          { label: 'Volunteers', value: fmt.count(volunteers), testId: 'volunteer-count' },
          { label: 'Rounds', value: `${fmt.count(metrics.roundsCommitted)} committed`, testId: 'rounds-committed' },
          {
            label: 'Host bytes',
            value: `↑ ${fmt.bytes(metrics.bytesSent)} ↓ ${fmt.bytes(metrics.bytesReceived)}`,
            testId: 'host-bytes',
          },
        ]}
      />
      <RoomProgress />
    </>
  );
}

/**
 * The volunteer page's room figures: the same tiles, words and test ids as the dashboard's, from
 * the host's summary of the room view, and this volunteer's share as the host counts it; without
 * the progress line once the volunteer left a room that goes on (its figures no longer follow it).
 */
export function RoomFigureTiles({ progress = true }: { progress?: boolean }) {
  const room = useStore(store, useShallow(roomFiguresOf));
  const own = useStore(
    store,
    useShallow((state) => ownPartOf(state) ?? { share: null, rounds: null }),
  );
  return (
    <>
      <StatTiles
        stats={[
          { label: 'Room validation loss', value: fmt.loss(room.evalLoss), testId: 'eval-loss' },
          { label: 'Room tokens', value: fmt.tokens(room.tokens), testId: 'room-tokens' },
          stepStat(room.step, room.totalSteps),
          {
            label: 'Rounds',
            value: `${fmt.count(room.roundsCommitted)} committed`,
            testId: 'rounds-committed',
          },
          {
            label: 'Your share of the room',
            value: own.share === 1 ? '100% (alone)' : fmt.percent(own.share),
            hint: 'your tokens ÷ the room’s, since you joined',
            testId: 'own-share',
          },
        ]}
      />
      {progress && <RoomProgress />}
    </>
  );
}

/** Ticks once a second while `on`: the countdowns move between views. */
function useNow(on: boolean): number {
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    if (!on) return;
    const timer = setInterval(() => setNow(Date.now()), 1_000);
    return () => clearInterval(timer);
  }, [on]);
  return now;
}

/**
 * Where the run is (step of the schedule, tokens, time left), when the first round comes (before
 * it), each fragment's countdown to its next round (after, while training), a rising validation
 * loss, and why a run ended.
 */
export function RoomProgress() {
  const room = useStore(store, useShallow(roomFiguresOf));
  const now = useNow(room.status === 'running');
  const first = firstRoundText(room, now);
  const rising = risingText(room.evalTrend);
  const ended = endText(room);
  const countdowns = first === null && ended === null && room.status === 'running' ? room.nextRounds : [];
  return (
    <div className="room-progress" data-testid="room-progress">
      <p className="run-progress">
        {room.totalSteps !== null && room.step !== null && (
          <progress
            className="run-progress-bar"
            max={room.totalSteps}
            value={Math.min(room.step, room.totalSteps)}
            aria-hidden="true"
          />
        )}
        <span data-testid="run-progress">{progressText(room, now)}</span>
      </p>
      {ended && (
        <p className="notice" data-testid="room-ended">
          {ended}
        </p>
      )}
      {rising && (
        <p className="warning" role="status" data-testid="eval-rising">
          {rising}
        </p>
      )}
      {first && (
        <p data-testid="first-round" aria-live="polite">
          {first}
        </p>
      )}
      {countdowns.length > 0 && (
        <p className="muted" data-testid="next-rounds">
          Next:{' '}
          {countdowns.map((next, i) => (
            <span key={next.fragment}>
              {i > 0 && ' · '}fragment {next.fragment} {countdownText(next, room.at, now)}
            </span>
          ))}
        </p>
      )}
    </div>
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
