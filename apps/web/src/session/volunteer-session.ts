/**
 * The volunteer page on the main thread: joins the room on the signaling server, starts the room
 * worker as a trainer, bridges the mesh into it, follows the host's relayed summary (its status
 * gates training), and carries pause, the duty-cycle cap, pause-while-hidden and a clean leave.
 */
import { MOBY_DICK_URL } from '@shoal/data';
import { HOST_GRACE_MS, watchHost } from '@shoal/mesh';
import { memberEntry, type ServerMessageOf } from '@shoal/signaling';
import { LEFT_PHASE, store } from '../store.ts';
import {
  connectSignaling,
  enterOrExplain,
  meshIntoWorker,
  reconnectingSignal,
  roomSummarySchema,
  startRoomWorker,
} from './room-link.ts';

/** What a volunteer is told when its room has ended without it (the host gone, the server refusing it back). */
const THANKS = 'Thank you — you can close this tab.';

/**
 * How long a volunteer whose room stopped still hears the host's summaries (training has
 * stopped, its mesh is closed): rounds in flight finish and the host evaluates θ_global a last
 * time after Stop, and the page shows that same final figure as the dashboard.
 */
const FINAL_FIGURES_MS = 60_000;

export interface VolunteerSession {
  /** This volunteer's peer id in the room (the host's table lists members by it). */
  readonly peerId: string;
  setPaused(paused: boolean): void;
  setDutyCycle(dutyCycle: number): void;
  setPauseWhenHidden(enabled: boolean): void;
  leave(): void;
}

export async function joinRoom(roomId: string, token: string, backend: 'webgpu' | 'cpu'): Promise<VolunteerSession> {
  const { setSession, setVolunteer, setSummary, setSettings } = store.getState();
  setSession({ role: 'volunteer', roomId, phase: 'joining the room…', error: null });
  const client = await connectSignaling();
  const joined = await enterOrExplain(
    client,
    client.join(roomId, token),
    {
      'bad-token': 'This join link is no longer valid: the host has rotated the token. Ask the host for the new link.',
      'no-such-room': `Room ${roomId} does not exist (any more).`,
      'room-full': 'The room is full.',
    },
    'Could not join',
  );
  // With the token in its entry, a server that no longer knows this member (its secret refused)
  // takes it back as a new member: `joined-anew` below.
  const signal = reconnectingSignal(client, memberEntry(joined, token), (error) =>
    error.code === 'kicked'
      ? 'The host removed you from the room.'
      : `The Shoal server no longer has this room (${error.code}), so it has ended. ${THANKS}`,
  );
  let left = false;
  // the room stopped: the socket stays a while for the host's final figures (FINAL_FIGURES_MS)
  let lingering = false;

  /** This page in the room as `room.peerId`: its room worker, its mesh, the watch on the host. */
  const enter = (room: ServerMessageOf<'joined'>) => {
    const worker = startRoomWorker();
    const mesh = meshIntoWorker(signal, room, [room.hostId, ...room.peers], worker);
    const entered = { peerId: room.peerId, worker, mesh, stopWatchingHost: () => {} };
    const isCurrent = () => entered === current;
    worker.on((message) => {
      switch (message.type) {
        case 'stats':
          if (isCurrent()) setVolunteer(message.stats);
          return;
        case 'left':
          // nothing of this room keeps running: the mesh, the socket, the worker thread
          entered.stopWatchingHost();
          void mesh.close().then(() => {
            if (!lingering) signal.close();
            worker.worker.terminate();
          });
          return;
        case 'message-limit':
          mesh.mesh.setMessageLimit(message.bytes);
          return;
        case 'error':
          console.warn(`shoal volunteer: ${message.message}`);
          if (message.fatal && isCurrent()) setSession({ error: message.message, phase: 'stopped' });
          return;
        default:
          return;
      }
    });
    const { settings } = store.getState();
    worker.post({
      type: 'volunteer',
      self: room.peerId,
      roomId: room.roomId,
      coordinator: room.hostId,
      backend,
      corpusUrl: new URL(MOBY_DICK_URL, location.origin).toString(),
      origin: location.origin,
      shardBudgetMib: settings.shardBudgetMib,
      dutyCycle: settings.dutyCycle,
      statsEveryMs: 500,
    });
    // a host gone (its link down, the server not seeing it) for HOST_GRACE_MS has ended the room
    entered.stopWatchingHost = watchHost(signal, mesh.mesh, room, HOST_GRACE_MS, () => {
      setSession({
        error: `The host has been gone for ${HOST_GRACE_MS / 60_000} minutes, so this room has ended. ${THANKS}`,
        phase: 'stopped',
      });
      leave();
    });
    return entered;
  };
  let current = enter(joined);
  setSession({ phase: 'connecting to the room’s peers…' });

  // The server took this page back as a new member: the old one's mesh and worker go (their
  // peers see its links drop), and the page trains on as the new one, from the room's state.
  signal.on('joined-anew', (anew) => {
    if (left) return;
    const old = current;
    old.stopWatchingHost();
    void old.mesh.close().then(() => old.worker.worker.terminate());
    current = enter(anew);
    pauseFor();
    const { summary } = store.getState();
    if (summary) current.worker.post({ type: 'status', status: summary.status });
    setSession({ phase: `joined again as ${anew.peerId}: the server no longer knew ${old.peerId}` });
  });

  signal.on('relay', ({ from, data }) => {
    if (from !== joined.hostId) return;
    const parsed = roomSummarySchema.safeParse(data);
    if (!parsed.success) return; // a newer host's message, or garbage: nothing to act on
    const { type: _, ...summary } = parsed.data;
    // after leaving, only a stopped room's final figures: a host that resumes it is not this page's room any more
    if (left && !(lingering && summary.status === 'stopped')) return;
    setSummary(summary);
    current.worker.post({ type: 'status', status: summary.status });
    // the host ended the run: nothing more to train for; its last evaluation still comes
    if (summary.status === 'stopped') leave(FINAL_FIGURES_MS);
  });
  signal.on('kicked', ({ reason }) => {
    setSession({ error: `The host removed you from the room${reason ? `: ${reason}` : ''}.`, phase: 'stopped' });
    leave();
  });
  // the server refused us back for good (reconnectingSignal said why): this room has ended here
  signal.on('close', () => leave());

  const pauseFor = () => {
    const { settings: now } = store.getState();
    current.worker.post({ type: 'pause', paused: now.paused || (now.pauseWhenHidden && document.hidden) });
  };
  document.addEventListener('visibilitychange', pauseFor);

  // A clean leave on close: the worker says leave to every peer; the server hears it from the
  // socket at once, so the host drops this member even if the page is gone before the worker is.
  const leave = (listenMs = 0) => {
    if (left) return;
    left = true;
    current.worker.post({ type: 'leave' });
    if (listenMs > 0) {
      lingering = true;
      setTimeout(() => {
        if (!lingering) return;
        lingering = false;
        signal.leave();
        signal.close();
      }, listenMs);
    } else signal.leave();
    setSession({ phase: LEFT_PHASE });
  };
  window.addEventListener('pagehide', () => {
    if (lingering) {
      lingering = false;
      signal.leave();
    }
    leave();
  });

  return {
    get peerId() {
      return current.peerId;
    },
    setPaused(paused) {
      setSettings({ paused });
      pauseFor();
    },
    setDutyCycle(dutyCycle) {
      setSettings({ dutyCycle });
      current.worker.post({ type: 'duty-cycle', dutyCycle });
    },
    setPauseWhenHidden(enabled) {
      setSettings({ pauseWhenHidden: enabled });
      pauseFor();
    },
    leave: () => leave(),
  };
}
