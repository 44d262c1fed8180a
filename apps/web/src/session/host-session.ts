/**
 * The dashboard's host on the main thread: creates (or takes back) the signaling room, starts
 * the room worker as the host, bridges the mesh into it, publishes the room view for the watch
 * link, relays a summary to volunteers, and carries the buttons (Start, pause, stop, kick,
 * rotate token) to where they act.
 */
import { MOBY_DICK_URL } from '@shoal/data';
import type { RoomStatus, RoomViewUpdate, RunConfig } from '@shoal/protocol';
import { HOST_DEFAULTS } from '@shoal/room/host-defaults';
import { backoffDelay, type ReconnectingSignal, readKeptView, type SignalClient, SignalError } from '@shoal/signaling';
import {
  loadRoomFiles,
  loadRoomLink,
  type RoomLinkRecord,
  replaceRoomLink,
  saveRoomLink,
} from '../runtime/checkpoint-store.ts';
import type { HostInit, RuntimeEvent } from '../runtime/messages.ts';
import { store, summaryOf } from '../store.ts';
import {
  connectSignaling,
  joinUrlOf,
  meshIntoWorker,
  type RoomWorker,
  reconnectingSignal,
  startRoomWorker,
  summaryMessage,
  watchUrlOf,
} from './room-link.ts';

export interface HostSession {
  setStatus(status: RoomStatus): void;
  kick(peer: string): void;
  rotateToken(): Promise<void>;
  /** θ_global and the config, for sampling. */
  params(): Promise<{ params: Float32Array; config: RunConfig; key: string }>;
  /** The checkpoint pair now, for download. */
  files(): Promise<{ weights: Uint8Array; state: Uint8Array; roomId: string }>;
}

/** A new signaling room, its record saved in this browser and its dashboard's address in the bar. */
async function openNewRoom() {
  const client = await connectSignaling();
  const created = await client.create();
  const link: RoomLinkRecord = {
    roomId: created.roomId,
    hostSecret: created.hostSecret,
    joinToken: created.joinToken,
    watchKey: created.watchKey ?? null,
    createdAt: new Date().toISOString(),
    status: 'waiting',
  };
  await saveRoomLink(link);
  history.replaceState(null, '', `/host/${encodeURIComponent(created.roomId)}`);
  return { client, room: { ...created, peers: [] as string[] }, link };
}

/**
 * A new room with `config` (and θ_global from `params` when the host picked a checkpoint, and
 * `corpus` when the host uploaded a text: config.data names it).
 */
export async function createRoom(
  config: RunConfig,
  params: Float32Array | null,
  corpus: { name: string; bytes: Uint8Array } | null = null,
): Promise<HostSession> {
  const { setSession } = store.getState();
  setSession({ role: 'host', phase: 'creating the room…', error: null });
  const { client, room, link } = await openNewRoom();
  return run(client, room, link, {
    config,
    params,
    corpus,
    resume: null,
    scheduleSteps: null,
    history: null,
  });
}

/**
 * A new room that trains on from the last checkpoint of room `fromId` (one this browser hosted,
 * whose schedule ended): a new id and links, the schedule lengthened to `scheduleSteps`, the
 * step, tokens and counters going on from the checkpoint's. The finished room stays as it was.
 */
export async function trainOnRoom(fromId: string, scheduleSteps: number): Promise<HostSession> {
  const { setSession } = store.getState();
  setSession({ role: 'host', phase: 'creating the room…', error: null });
  if (!(await loadRoomFiles(fromId))) throw new Error(`This browser holds no checkpoint of room ${fromId}.`);
  const { client, room, link } = await openNewRoom();
  return run(client, room, link, {
    config: null,
    params: null,
    corpus: null,
    resume: fromId,
    scheduleSteps,
    history: null,
  });
}

/** Takes a room this browser hosted back after a reload: the same room and run, from IndexedDB. */
export async function resumeRoom(roomId: string): Promise<HostSession> {
  const { setSession } = store.getState();
  setSession({ role: 'host', roomId, phase: 'resuming from this browser’s checkpoint…', error: null });
  // While the server says the room's host is connected (the room is open in another tab or
  // window, or this page's previous socket is not closed yet), this page waits and says so, then
  // reads everything afresh: taking the room elsewhere would strand the volunteers of the page
  // that hosts it, which goes on writing the record, the checkpoint and the view meanwhile.
  for (let attempt = 1; ; attempt++) {
    const session = await tryResume(roomId);
    if (session) {
      if (attempt > 1) setSession({ error: null });
      return session;
    }
    const delay = backoffDelay(attempt);
    setSession({
      error:
        `Room ${roomId} is hosted from another tab or window (or this page's previous connection is still open). ` +
        `This page takes it back once it is free: next try in ${Math.ceil(delay / 1000)} s.`,
    });
    await new Promise((resolve) => setTimeout(resolve, delay));
  }
}

/** One try of resumeRoom; null: the server says the room's host is connected. */
async function tryResume(roomId: string): Promise<HostSession | null> {
  const saved = await loadRoomLink(roomId);
  if (!saved)
    throw new Error(`This browser has no record of room ${roomId}. Rooms are resumed where they were created.`);
  const files = await loadRoomFiles(roomId);
  if (!files) throw new Error(`Room ${roomId} has no checkpoint yet (one is written after the first committed round).`);
  // The room's view as the server kept it for watch links, read before the reclaim: from the
  // reclaim on, the signaling socket must reach the mesh without a pause, or the volunteers'
  // offers to the returning host are lost and their links wait for a redial.
  const key = saved.watchKey;
  const kept = key
    ? await connectSignaling()
        .then((watcher) => readKeptView(watcher, roomId, key))
        .catch((error: Error) => {
          console.warn(`shoal host: the charts start afresh (the kept view could not be read: ${error.message})`);
          return null;
        })
    : null;
  const client = await connectSignaling();
  let link = saved;
  let room: { roomId: string; peerId: string; iceServers: unknown[]; peers: string[]; joinToken: string };
  try {
    room = await client.reclaim(roomId, saved.hostSecret);
  } catch (error) {
    const code = error instanceof SignalError ? error.code : null;
    if (code === 'host-present') {
      client.close();
      return null;
    }
    if (code !== 'no-such-room' && code !== 'bad-secret') {
      client.close();
      throw new Error(
        `Could not take room ${roomId} back (${(error as Error).message}); reload the page to try again.`,
      );
    }
    // the server forgot the room (one that keeps no rooms dir, restarted; or the room expired):
    // the run goes on in a new room, with a new link, under which this browser's record moves
    const created = await client.create();
    room = { ...created, peers: [] };
    link = {
      ...saved,
      roomId: created.roomId,
      hostSecret: created.hostSecret,
      joinToken: created.joinToken,
      watchKey: created.watchKey ?? null,
    };
    await replaceRoomLink(roomId, link);
    history.replaceState(null, '', `/host/${encodeURIComponent(created.roomId)}`);
  }
  link = { ...link, joinToken: room.joinToken };
  // the charts, rounds and counts go on where they were (a room that had to be opened anew starts
  // afresh): the worker's recorder goes on from the kept view, whose figures are at least the
  // checkpoint's (volunteers train on between saves)
  const view = link.roomId === roomId ? kept : null;
  if (view) store.getState().applyView(view, { replace: true, roomStep: view.metrics.step });
  // a record that moved to a new room resumes from there (replaceRoomLink moved its files too)
  return run(client, room, link, {
    config: null,
    params: null,
    corpus: null,
    resume: link.roomId,
    scheduleSteps: null,
    history: view,
  });
}

/** The dashboard's evaluation and publication timing (the CLI's differ: HOST_DEFAULTS). */
const dashboard = HOST_DEFAULTS.dashboard;

function run(
  client: SignalClient,
  room: { roomId: string; peerId: string; iceServers: unknown[]; peers: string[] },
  link: RoomLinkRecord,
  start: Pick<HostInit, 'config' | 'params' | 'corpus' | 'resume' | 'scheduleSteps' | 'history'>,
): HostSession {
  const { setSession, applyView, setCheckpoint } = store.getState();
  // the room outlives the socket: after a server restart the page reclaims it with the secret
  const signal: ReconnectingSignal = reconnectingSignal(
    client,
    { role: 'host', roomId: room.roomId, hostSecret: link.hostSecret },
    (error) =>
      `The Shoal server no longer has this room (${error.code}). Volunteers cannot join it any more; ` +
      'download the checkpoint, or reload this page to go on in a new room.',
  );
  const worker: RoomWorker = startRoomWorker();
  const mesh = meshIntoWorker(signal, room, room.peers, worker);
  let status: RoomStatus = link.status;
  document.title = `Room ${room.roomId} (host) · Shoal`;
  setSession({
    role: 'host',
    roomId: room.roomId,
    joinUrl: joinUrlOf(room.roomId, link.joinToken),
    watchUrl: link.watchKey ? watchUrlOf(room.roomId, link.watchKey) : null,
    status,
    phase: statusPhase(status),
  });

  const replies = new Map<number, (message: RuntimeEvent) => void>();
  let nextId = 1;
  const ask = <T extends RuntimeEvent>(type: 'params' | 'files'): Promise<T> =>
    new Promise((resolve) => {
      const id = nextId++;
      replies.set(id, resolve as (message: RuntimeEvent) => void);
      worker.post({ type, id });
    });

  const publish = (viewed: RoomViewUpdate, step: number) => {
    // the run stopped by itself (the schedule ended): the room is stopped as if Stop was pressed,
    // and its record says why, for a reload and the rooms list
    if (viewed.status === 'stopped' && status !== 'stopped') {
      status = 'stopped';
      link = { ...link, status, endedBy: viewed.endedBy ?? 'schedule' };
      void saveRoomLink(link);
      setSession({ status, phase: statusPhase(status) });
    }
    // a reloaded room the schedule ended is stopped by its saved status: its record says why
    const update: RoomViewUpdate =
      viewed.status === 'stopped' && link.endedBy ? { ...viewed, endedBy: link.endedBy } : viewed;
    applyView(update, { roomStep: step });
    if (signal.state.kind !== 'connected') return; // the next view, once back, carries on
    signal.publish(update);
    // the volunteers' room figures: a projection of the same view (one definition)
    signal.relay(summaryMessage(summaryOf(update)));
  };

  worker.on((message) => {
    switch (message.type) {
      case 'view':
        return publish(message.update, message.step);
      case 'saved':
        return setCheckpoint(message.checkpoint);
      case 'resumed':
        return setCheckpoint(message.checkpoint, true);
      case 'dataset':
        return setSession({ dataset: message.dataset });
      case 'message-limit':
        return mesh.mesh.setMessageLimit(message.bytes);
      case 'error':
        console.warn(`shoal host: ${message.message}`);
        if (message.fatal) setSession({ error: message.message, phase: 'stopped' });
        return;
      case 'params':
      case 'files':
        replies.get(message.id)?.(message);
        replies.delete(message.id);
        return;
      default:
        return;
    }
  });

  const init: HostInit = {
    type: 'host',
    self: room.peerId,
    room: { roomId: room.roomId, hostSecret: link.hostSecret, joinToken: link.joinToken },
    ...start,
    status,
    corpusUrl: new URL(MOBY_DICK_URL, location.origin).toString(),
    origin: location.origin,
    evalEveryMs: dashboard.evalEveryMs,
    evalBatches: dashboard.evalBatches,
    viewEveryMs: dashboard.publishEveryMs,
    deadlineMs: dashboard.deadlineMs,
  };
  worker.post(
    init,
    [start.params?.buffer, start.corpus?.bytes.buffer].filter((b) => b !== undefined),
  );

  window.addEventListener('pagehide', () => {
    // the room stays: a reload takes it back with the host secret
    void mesh.close();
  });

  return {
    setStatus(next) {
      status = next;
      const { endedBy: _, ...rest } = link;
      link = next === 'stopped' ? { ...rest, status: next, endedBy: 'host' } : { ...rest, status: next };
      void saveRoomLink(link);
      worker.post({ type: 'status', status: next });
      setSession({ status: next, phase: statusPhase(next) });
      // the server's copy of the view says so at once too (a join page checks the room against it),
      // before the relay on the same socket: no page learns of the change before the server has it
      const { view } = store.getState();
      if (view && signal.state.kind === 'connected') signal.publish({ ...view, status: next, points: [] });
      signal.relay(summaryMessage({ ...summaryNow(), status: next }));
    },
    kick(peer) {
      signal.kick(peer, 'removed by the host');
    },
    async rotateToken() {
      const token = await signal.rotateToken();
      link = { ...link, joinToken: token };
      await saveRoomLink(link);
      setSession({ joinUrl: joinUrlOf(room.roomId, token) });
    },
    async params() {
      const reply = await ask<Extract<RuntimeEvent, { type: 'params' }>>('params');
      return { params: reply.params, config: reply.config, key: reply.key };
    },
    async files() {
      const reply = await ask<Extract<RuntimeEvent, { type: 'files' }>>('files');
      return { weights: reply.weights, state: reply.state, roomId: reply.roomId };
    },
  };
}

function summaryNow() {
  const { view, roomStep } = store.getState();
  return {
    step: roomStep ?? 0,
    tokens: view?.metrics.tokens ?? 0,
    evalLoss: view?.metrics.evalLoss ?? null,
    roundsCommitted: view?.metrics.roundsCommitted ?? 0,
  };
}

function statusPhase(status: RoomStatus): string {
  switch (status) {
    case 'waiting':
      return 'Room open: share the join link, then press Start.';
    case 'running':
      return 'Training.';
    case 'paused':
      return 'Paused: no new rounds; volunteers wait.';
    case 'stopped':
      return 'Stopped. The last checkpoint is saved in this browser.';
  }
}
