/** The read-only room view (the watch link): the dashboard's numbers, charts and tables, no controls. */
import { useEffect } from 'react';
import { useStore } from 'zustand';
import { statusLabel } from '../session/room-link.ts';
import { watchRoom } from '../session/watch-session.ts';
import { store } from '../store.ts';
import { ConnectionBanner } from '../ui/ConnectionBanner.tsx';
import { ErrorBox, Header } from '../ui/parts.tsx';
import { RoomNumbers, RoomPanels } from '../ui/RoomPanels.tsx';
import { RunConfigPanel } from '../ui/RunConfigPanel.tsx';

export function WatchPage({ roomId, watchKey }: { roomId: string; watchKey: string | null }) {
  const error = useStore(store, (state) => state.error);
  const status = useStore(store, (state) => state.status);
  const phase = useStore(store, (state) => state.phase);
  const hostKind = useStore(store, (state) => state.view?.hostKind);
  const config = useStore(store, (state) => state.view?.config);
  useEffect(() => {
    if (!watchKey) {
      store.getState().setSession({ role: 'watcher', roomId, error: 'This watch link has no key (?key=…).' });
      return;
    }
    watchRoom(roomId, watchKey).catch((e: Error) => store.getState().setSession({ error: e.message }));
  }, [roomId, watchKey]);
  return (
    <>
      <Header />
      <main className="wide">
        <ErrorBox error={error} />
        <h1>
          Room <span className="mono">{roomId}</span>{' '}
          {status && (
            <span className={`status ${status}`} data-testid="room-status">
              {statusLabel[status]}
            </span>
          )}{' '}
          <ConnectionBanner />
        </h1>
        <p className="muted" data-testid="watch-phase">
          Read-only view{hostKind ? `, hosted by ${hostKind === 'cli' ? 'shoal host' : 'a browser dashboard'}` : ''}
          {phase ? ` — ${phase}` : ''}
          {phase.endsWith('…') ? '' : '.'}
        </p>
        <RoomNumbers />
        <RunConfigPanel config={config} />
        <RoomPanels />
      </main>
    </>
  );
}
