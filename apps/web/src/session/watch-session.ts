/**
 * The read-only room view (the watch link): the room's published view from the signaling server,
 * whoever hosts it (the dashboard or `shoal host`). The server sends the history first, then
 * every update the host publishes.
 */
import { store } from '../store.ts';
import { connectSignaling, enterOrExplain } from './room-link.ts';

export async function watchRoom(roomId: string, key: string): Promise<void> {
  const { setSession, applyView } = store.getState();
  setSession({ role: 'watcher', roomId, phase: 'connecting…', error: null });
  const signal = await connectSignaling();
  const watching = await enterOrExplain(
    signal,
    signal.watch(roomId, key),
    {
      'no-such-room': `Room ${roomId} does not exist (any more).`,
      'bad-key': 'This watch link is not valid for the room.',
    },
    'Could not watch the room',
  );
  setSession({
    watchUrl: location.href,
    phase: watching.view ? 'watching' : 'waiting for the host’s first update…',
  });
  if (watching.view) applyView(watching.view, { replace: true });
  signal.on('view', ({ data }) => {
    applyView(data);
    setSession({ phase: 'watching' });
  });
  signal.on('close', ({ code, reason }) =>
    setSession({ error: `The watch connection closed (${code}${reason ? `: ${reason}` : ''}).` }),
  );
}
