/**
 * The volunteer page on the main thread: joins the room on the signaling server, starts the room
 * worker as a trainer, bridges the mesh into it, follows the host's relayed summary (its status
 * gates training), and carries pause, the duty-cycle cap, pause-while-hidden and a clean leave.
 */
import { HOST_GRACE_MS } from '@shoal/mesh';
import { memberEntry, type ServerMessageOf } from '@shoal/signaling';
import { LEFT_PHASE, store } from '../store.ts';
import { connectSignaling, enterOrExplain, reconnectingSignal, roomSummarySchema } from './room-link.ts';
import { type EntryHooks, enterRoom } from './volunteer-entry.ts';

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
  const { setSession, setSummary, setSettings } = store.getState();
  setSession({ role: 'volunteer', roomId, phase: 'joining the room…', error: null });
  const { joined, signal } = await joinSignaling(roomId, token);
  let left = false;
  // the room stopped: the socket stays a while for the host's final figures (FINAL_FIGURES_MS)
  let lingering = false;

  const hooks: EntryHooks = {
    isCurrent: (entered) => entered === current,
    lingering: () => lingering,
    hostGone: () => {
      setSession({
        error: `The host has been gone for ${HOST_GRACE_MS / 60_000} minutes, so this room has ended. ${THANKS}`,
        phase: 'stopped',
      });
      leave();
    },
  };
  const enter = (room: ServerMessageOf<'joined'>) => enterRoom(signal, room, backend, hooks);
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

/**
 * The room joined on the signaling server, refusals worded for a person, as a ReconnectingSignal
 * that enters again with the join token.
 */
async function joinSignaling(roomId: string, token: string) {
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
  // takes it back as a new member: `joined-anew` in joinRoom.
  const signal = reconnectingSignal(client, memberEntry(joined, token), (error) =>
    error.code === 'kicked'
      ? 'The host removed you from the room.'
      : `The Shoal server no longer has this room (${error.code}), so it has ended. ${THANKS}`,
  );
  return { joined, signal };
}
