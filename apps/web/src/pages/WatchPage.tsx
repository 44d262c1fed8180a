/** The read-only room view (the watch link): the dashboard's numbers, charts and tables, no controls. */
import { useEffect } from 'react';
import { useStore } from 'zustand';
import { watchRoom } from '../session/watch-session.ts';
import { store, volunteerCountOf } from '../store.ts';
import { ConnectionBanner } from '../ui/ConnectionBanner.tsx';
import { ErrorBox, Header } from '../ui/parts.tsx';
import { RoomNumbers, RoomPanels } from '../ui/RoomPanels.tsx';
import { RunConfigPanel } from '../ui/RunConfigPanel.tsx';
import { statusWords } from '../ui/room-progress.ts';

export function WatchPage({ roomId, watchKey }: { roomId: string; watchKey: string | null }) {
  const error = useStore(store, (state) => state.error);
  const status = useStore(store, (state) => state.status);
  const phase = useStore(store, (state) => state.phase);
  const hostKind = useStore(store, (state) => state.view?.hostKind);
  const config = useStore(store, (state) => state.view?.config);
  // refused before any view (a wrong key, no such room): the error alone, nothing that looks live
  const refused = useStore(store, (state) => state.error !== null && state.view === null);
  const volunteers = useStore(store, volunteerCountOf);
  const badge = status ? statusWords(status, volunteers) : null;
  useEffect(() => {
    if (!watchKey) {
      store.getState().setSession({ role: 'watcher', roomId, error: 'This watch link has no key (?key=…).' });
      return;
    }
    watchRoom(roomId, watchKey).catch((e: Error) => store.getState().setSession({ error: e.message, phase: '' }));
  }, [roomId, watchKey]);
  return (
    <>
      <Header />
      <main className="wide">
        <ErrorBox error={error} />
        <h1>
          Room <span className="mono">{roomId}</span>{' '}
          {badge && (
            <span className={`status ${badge.tone}`} data-testid="room-status">
              {badge.words}
            </span>
          )}{' '}
          <ConnectionBanner />
        </h1>
        {!refused && (
          <>
            <p className="muted" data-testid="watch-phase">
              Read-only view{hostKind ? `, hosted by ${hostKind === 'cli' ? 'shoal host' : 'a browser dashboard'}` : ''}
              {phase ? ` — ${phase}` : ''}
              {phase.endsWith('…') ? '' : '.'}
            </p>
            <RoomNumbers />
            <RunConfigPanel config={config} />
            <RoomPanels />
          </>
        )}
      </main>
    </>
  );
}
