/**
 * The page's link to the Shoal server, beside the room's status: nothing while connected, an amber
 * "reconnecting" badge while the session tries again (the words are in the error box above), a
 * red "disconnected" once it gave up. The same on the dashboard, the volunteer and the watch page.
 */
import { useStore } from 'zustand';
import { store } from '../store.ts';

export function ConnectionBanner() {
  const connection = useStore(store, (state) => state.connection);
  if (connection === 'connected') return null;
  return (
    <span
      className={`badge ${connection === 'lost' ? 'bad' : 'slow'}`}
      role="status"
      data-testid="connection"
      data-connection={connection}
    >
      {connection === 'lost' ? 'disconnected from the server' : 'reconnecting…'}
    </span>
  );
}
