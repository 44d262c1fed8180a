/**
 * What the host and volunteer pages share on the main thread: the signaling socket, the WebRTC
 * mesh, and the room worker joined to it (port-transport.ts). The worker trains or hosts; this
 * side only moves bytes and keeps the store up to date.
 */
import { connectRoomMesh, type MeshTransport, type RoomMesh } from '@shoal/mesh';
import {
  createIdentity,
  type Identity,
  type RoomStatus,
  roomSummaryMessage,
  roomSummaryMessageSchema,
} from '@shoal/protocol';
import {
  ReconnectingSignal,
  type ReconnectState,
  type RoomEntry,
  SignalClient,
  type SignalError,
  signalUrl,
  type WebSocketConstructor,
} from '@shoal/signaling';
import type { RuntimeEvent, RuntimeIn } from '../runtime/messages.ts';
import { bridgeTransport, type PortLike } from '../runtime/port-transport.ts';
import { store } from '../store.ts';

/**
 * This page's key pair (Ed25519 where the browser has it, else ECDSA P-256), announced to the
 * server and signed with in the room worker. Every room refuses the contributions, shard results
 * and hash reports of a member without a key, so a page that cannot make one (WebCrypto is missing
 * outside a secure context: plain http from another host than localhost) cannot take part, and
 * says so before it joins.
 */
async function pageIdentity(): Promise<Identity> {
  try {
    return await createIdentity();
  } catch (error) {
    throw new Error(
      `This page cannot sign what it sends, and every Shoal room requires that: ${(error as Error).message}. ` +
        'Open the room over https:// (or on http://localhost).',
    );
  }
}

/**
 * The signaling server is the origin that served the page. A host or volunteer announces its key
 * pair (`keyed`); a watcher or a link check needs none.
 */
export async function connectSignaling({ keyed = true }: { keyed?: boolean } = {}): Promise<SignalClient> {
  const identity = keyed ? await pageIdentity() : null;
  try {
    return await SignalClient.connect(signalUrl(location.origin), WebSocket as unknown as WebSocketConstructor, {
      identity,
    });
  } catch (error) {
    throw new Error(`Cannot reach the Shoal server at ${location.origin}: ${(error as Error).message}`);
  }
}

/**
 * `client`, which has entered its room, as a ReconnectingSignal: when the server goes away the page
 * enters again with `entry` (null: it cannot), and the store's `connection` and `error` say what is
 * happening in words, cleared once it is back. `gaveUp` words a refusal that ends the retrying.
 */
export function reconnectingSignal(
  client: SignalClient,
  entry: RoomEntry | null,
  gaveUp: (error: SignalError) => string,
): ReconnectingSignal {
  const signal = new ReconnectingSignal(client, {
    url: signalUrl(location.origin),
    WebSocketImpl: WebSocket as unknown as WebSocketConstructor,
    entry,
  });
  // the error this page last showed about the connection: cleared when back, unlike anyone else's
  let shown: string | null = null;
  const show = (patch: { connection: 'connected' | 'reconnecting' | 'lost' }, note: string | null) => {
    const { error, setSession } = store.getState();
    const mine = error === null || error === shown;
    setSession(mine ? { ...patch, error: note } : patch);
    if (mine) shown = note;
  };
  signal.onState((state) => {
    if (state.kind === 'connected') show({ connection: 'connected' }, null);
    else if (state.kind === 'reconnecting') show({ connection: 'reconnecting' }, reconnectingText(state));
    else if (state.kind === 'gave-up') show({ connection: 'lost' }, gaveUp(state.error));
  });
  return signal;
}

function reconnectingText(state: Extract<ReconnectState, { kind: 'reconnecting' }>): string {
  const next = state.nextTryMs > 0 ? `next try in ${Math.ceil(state.nextTryMs / 1000)} s` : 'trying now';
  return `The Shoal server went away; reconnecting (attempt ${state.attempt}, ${next}). Training goes on with the peers already connected.`;
}

/**
 * A request that enters a room (join, watch): when the server refuses it, the socket is closed and
 * the refusal becomes a sentence for a person, chosen by the server's reason code.
 */
export async function enterOrExplain<T>(
  signal: SignalClient,
  request: Promise<T>,
  explain: Partial<Record<string, string>>,
  otherwise: string,
): Promise<T> {
  try {
    return await request;
  } catch (error) {
    signal.close();
    const code = (error as { code?: string }).code ?? '';
    throw new Error(explain[code] ?? `${otherwise}: ${(error as Error).message}`);
  }
}

export const joinUrlOf = (roomId: string, token: string) =>
  `${location.origin}/join/${encodeURIComponent(roomId)}?token=${encodeURIComponent(token)}`;
export const watchUrlOf = (roomId: string, key: string) =>
  `${location.origin}/watch/${encodeURIComponent(roomId)}?key=${encodeURIComponent(key)}`;

export interface RoomWorker {
  worker: Worker;
  post(message: RuntimeIn, transfer?: Transferable[]): void;
  on(listener: (message: RuntimeEvent) => void): () => void;
}

export function startRoomWorker(): RoomWorker {
  const worker = new Worker(new URL('../runtime/room.worker.ts', import.meta.url), {
    type: 'module',
    name: 'shoal-room',
  });
  return {
    worker,
    post: (message, transfer = []) => worker.postMessage(message, transfer),
    on(listener) {
      const handler = (event: MessageEvent<RuntimeEvent | { net: string }>) => {
        if (!('net' in event.data)) listener(event.data);
      };
      worker.addEventListener('message', handler);
      return () => worker.removeEventListener('message', handler);
    },
  };
}

/** The mesh for this member, bridged into the room worker (with the signaling client's keys). */
export function meshIntoWorker(
  signal: ReconnectingSignal,
  room: { peerId: string; iceServers: readonly unknown[] },
  peers: string[],
  { worker }: RoomWorker,
): { mesh: MeshTransport; close(): Promise<void> } {
  const roomMesh: RoomMesh = connectRoomMesh(signal, room, peers);
  const detach = bridgeTransport(roomMesh.mesh, worker as unknown as PortLike<object, never>);
  return {
    mesh: roomMesh.mesh,
    close: async () => {
      detach();
      await roomMesh.close();
    },
  };
}

/** The host's summary relayed to volunteers, validated like any input from the network (@shoal/protocol). */
export const roomSummarySchema = roomSummaryMessageSchema;
export const summaryMessage = roomSummaryMessage;

export const statusLabel: Record<RoomStatus, string> = {
  waiting: 'waiting for Start',
  running: 'training',
  paused: 'paused',
  stopped: 'stopped',
};
