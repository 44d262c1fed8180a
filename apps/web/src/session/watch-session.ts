/**
 * The read-only room view (the watch link): the room's published view from the signaling server,
 * whoever hosts it (the dashboard or `shoal host`). The server sends the history first, then
 * every update the host publishes.
 */
import { store } from '../store.ts';
import { connectSignaling, enterOrExplain, reconnectingSignal } from './room-link.ts';

export async function watchRoom(roomId: string, key: string): Promise<void> {
  const { setSession, applyView } = store.getState();
  setSession({ role: 'watcher', roomId, phase: 'connecting…', error: null });
  const client = await connectSignaling({ keyed: false });
  const watching = await enterOrExplain(
    client,
    client.watch(roomId, key),
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
  const signal = reconnectingSignal(client, { role: 'watcher', roomId, key }, (error) =>
    error.code === 'no-such-room'
      ? `Room ${roomId} has ended: the server no longer has it.`
      : `The watch link no longer works (${error.message}).`,
  );
  signal.onState((state) => {
    // no status badge while the view is not live: the last one may say "training" long after it stopped
    if (state.kind !== 'connected') setSession({ status: null, phase: 'not connected' });
  });
  signal.on('reentered', (reply) => {
    if (reply.kind !== 'watching') return;
    if (reply.view) applyView(reply.view, { replace: true });
    setSession({ phase: reply.view ? 'watching' : 'waiting for the host’s first update…' });
  });
  signal.on('view', ({ data }) => {
    applyView(data);
    setSession({ phase: 'watching' });
  });
}
