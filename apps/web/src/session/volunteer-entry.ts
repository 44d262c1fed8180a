/**
 * The volunteer page in its room as one member (one peer id): the room worker started as a
 * trainer, the mesh bridged into it, the worker's reports carried into the store, and the watch
 * on the host. The page enters once when it joins, and again as a new member when the server
 * takes it back as one.
 */
import { MOBY_DICK_URL } from '@shoal/data';
import { HOST_GRACE_MS, watchHost } from '@shoal/mesh';
import type { ReconnectingSignal, ServerMessageOf } from '@shoal/signaling';
import type { RuntimeEvent } from '../runtime/messages.ts';
import { store } from '../store.ts';
import { meshIntoWorker, type RoomWorker, startRoomWorker } from './room-link.ts';

/** This page in the room as `peerId`: its room worker, its mesh, and how to stop watching the host. */
export interface EnteredRoom {
  readonly peerId: string;
  readonly worker: RoomWorker;
  readonly mesh: ReturnType<typeof meshIntoWorker>;
  stopWatchingHost: () => void;
}

/** What an entry asks of the page around it. */
export interface EntryHooks {
  /** Whether `entered` is still the page's entry (a later entry as a new member replaces it). */
  isCurrent(entered: EnteredRoom): boolean;
  /** Whether the page still hears a stopped room's final figures: the socket stays open meanwhile. */
  lingering(): boolean;
  /** The host has been gone for HOST_GRACE_MS: the room has ended. */
  hostGone(): void;
}

/** Enters `room` as `room.peerId`: starts its room worker as a trainer on `backend` and its mesh. */
export function enterRoom(
  signal: ReconnectingSignal,
  room: ServerMessageOf<'joined'>,
  backend: 'webgpu' | 'cpu',
  hooks: EntryHooks,
): EnteredRoom {
  const worker = startRoomWorker();
  const mesh = meshIntoWorker(signal, room, [room.hostId, ...room.peers], worker);
  const entered: EnteredRoom = { peerId: room.peerId, worker, mesh, stopWatchingHost: () => {} };
  worker.on((message) => onWorkerReport(message, entered, signal, hooks));
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
  entered.stopWatchingHost = watchHost(signal, mesh.mesh, room, HOST_GRACE_MS, hooks.hostGone);
  return entered;
}

/** One report from the entry's room worker: stats and errors into the store, the mesh's message limit, its end. */
function onWorkerReport(message: RuntimeEvent, entered: EnteredRoom, signal: ReconnectingSignal, hooks: EntryHooks) {
  const { setVolunteer, setSession } = store.getState();
  const { worker, mesh } = entered;
  switch (message.type) {
    case 'stats':
      if (hooks.isCurrent(entered)) setVolunteer(message.stats);
      return;
    case 'left':
      // nothing of this room keeps running: the mesh, the socket, the worker thread
      entered.stopWatchingHost();
      void mesh.close().then(() => {
        if (!hooks.lingering()) signal.close();
        worker.worker.terminate();
      });
      return;
    case 'message-limit':
      mesh.mesh.setMessageLimit(message.bytes);
      return;
    case 'error':
      console.warn(`shoal volunteer: ${message.message}`);
      if (message.fatal && hooks.isCurrent(entered)) setSession({ error: message.message, phase: 'stopped' });
      return;
    default:
      return;
  }
}
