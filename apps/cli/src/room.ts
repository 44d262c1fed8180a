/**
 * What `shoal host` and `shoal worker` share: a signaling client at the server's /signal, a
 * MeshTransport (Node WebRTC through @roamhq/wrtc) that connects to every member the server
 * announces, and the swarm Member on top of it, on the wall clock. Parameter traffic goes over
 * the mesh only; the server carries SDP/ICE.
 *
 * Restarts: the signaling socket is a ReconnectingSignal, so when the server goes away and comes
 * back the process enters its room again as the same peer (the host reclaims, a worker rejoins)
 * while the mesh keeps its channels; what happens is said on stderr (or as JSON lines).
 *
 * Identity: the signaling client is made with a fresh key pair (Ed25519) that it announces to the
 * server; the mesh lends it, and the keys the server bound to the other peers, to the Member,
 * which signs its contributions, shard results and hash reports and verifies the others'.
 */
import { connectRoomMesh, type MeshTransport, type WrtcImplementation } from '@shoal/mesh';
import { createIdentity, createWireCodec, type PeerId } from '@shoal/protocol';
import type { IceServer, ReconnectState, RoomEntry } from '@shoal/signaling';
import { ReconnectingSignal, SignalClient, signalUrl, type WebSocketConstructor } from '@shoal/signaling';
import { Member, runIdFor, wallClock } from '@shoal/swarm';
import { WebSocket } from 'ws';
import { UsageError } from './usage.ts';

/** @roamhq/wrtc, or an error that says why there is no WebRTC in this Node. */
export async function loadWrtc(): Promise<WrtcImplementation> {
  let module: { default?: unknown };
  try {
    module = await import('@roamhq/wrtc');
  } catch (error) {
    throw new Error(`@roamhq/wrtc did not load, so there is no WebRTC in Node: ${(error as Error).message}`);
  }
  // CommonJS: Node's ESM loader puts module.exports on `default`
  const wrtc = (module.default ?? module) as WrtcImplementation;
  if (typeof wrtc.RTCPeerConnection !== 'function') throw new Error('@roamhq/wrtc has no RTCPeerConnection');
  return wrtc;
}

export { runIdFor };

/** `http://host:port/` → `http://host:port` (the join link's base); rejects what is not http(s). */
export function serverBase(server: string): string {
  let url: URL;
  try {
    url = new URL(server);
  } catch {
    throw new UsageError(`--server ${server} is not a URL (expected http://host:port)`);
  }
  if (!['http:', 'https:', 'ws:', 'wss:'].includes(url.protocol)) {
    throw new UsageError(`--server ${server}: expected an http(s) URL`);
  }
  return `${url.protocol}//${url.host}${url.pathname.replace(/\/+$/, '')}`;
}

/**
 * How long closing the signaling socket waits for the server's answer before it drops the
 * connection. A server that has gone away without closing its end (a machine that vanished, a
 * process stopped) never answers, and ws's default of 30 s would keep a stopping `shoal host` or
 * `shoal worker` alive that long.
 */
const SIGNAL_CLOSE_TIMEOUT_MS = 1_000;

/** ws's WebSocket with the short closing handshake (its `closeTimeout` option). */
class SignalSocket extends WebSocket {
  constructor(url: string) {
    super(url, { closeTimeout: SIGNAL_CLOSE_TIMEOUT_MS } as WebSocket.ClientOptions);
  }
}

/** A signaling client at `server`, with a key pair of its own to announce (one per process run). */
export async function connectSignaling(server: string): Promise<SignalClient> {
  const url = signalUrl(serverBase(server));
  const identity = await createIdentity();
  try {
    return await SignalClient.connect(url, SignalSocket as unknown as WebSocketConstructor, { identity });
  } catch (error) {
    throw new UsageError(`cannot reach the signaling server: ${(error as Error).message}`);
  }
}

/**
 * `client`, which has entered its room, as a ReconnectingSignal that enters again with `entry`
 * after the socket drops (null: it cannot, an older server gave no member secret).
 */
export function reconnecting(client: SignalClient, server: string, entry: RoomEntry | null): ReconnectingSignal {
  const url = signalUrl(serverBase(server));
  return new ReconnectingSignal(client, { url, WebSocketImpl: SignalSocket as unknown as WebSocketConstructor, entry });
}

/** A reconnect state in words, for the log. */
export function describeReconnect(state: ReconnectState): string {
  switch (state.kind) {
    case 'connected':
      return 'back in the room on the signaling server';
    case 'reconnecting':
      return state.nextTryMs > 0
        ? `the signaling server went away; reconnecting (attempt ${state.attempt}, next try in ${Math.ceil(state.nextTryMs / 1000)} s); training goes on with the peers already connected`
        : `reconnecting to the signaling server (attempt ${state.attempt})`;
    case 'gave-up':
      return `the signaling server refused us back (${state.error.code}): ${state.error.message}`;
    case 'closed':
      return 'signaling closed';
  }
}

export interface RoomLink {
  /** A ReconnectingSignal in `shoal host` and `shoal worker`; a plain client in tests that want one. */
  signal: ReconnectingSignal | SignalClient;
  mesh: MeshTransport;
  member: Member;
  /** Mesh and signaling closed; idempotent. */
  close(): Promise<void>;
}

/**
 * The mesh for `self` (the server-assigned peer id) in the room `signal` has entered (every peer
 * in `peers` and every later peer-joined; see connectRoomMesh), with the swarm Member on top. The
 * member refuses contributions, shard results and hash reports that do not verify with the key the
 * server bound to their sender, or whose sender announced none (MemberOptions.requireSignatures):
 * no command line turns that off.
 */
export async function joinMesh(
  signal: ReconnectingSignal | SignalClient,
  room: { roomId: string; peerId: PeerId; iceServers: IceServer[] },
  peers: PeerId[],
  wrtc: WrtcImplementation,
): Promise<RoomLink> {
  const roomMesh = connectRoomMesh(signal, room, peers, { wrtc });
  const { mesh } = roomMesh;
  // signs with the key pair its signaling client announced; verifies with the server's bindings
  const keys = { identity: signal.identity, peerKeys: signal.peerKeys };
  const member = new Member(mesh, await createWireCodec(), wallClock, runIdFor(room.roomId), keys);
  let closing: Promise<void> | null = null;
  const close = () => {
    closing ??= (async () => {
      await roomMesh.close();
      if (signal instanceof ReconnectingSignal) signal.leave();
      else if (signal.open) {
        signal.leave();
        signal.close();
      }
    })();
    return closing;
  };
  return { signal, mesh, member, close };
}

/** Resolves on the first SIGINT or SIGTERM (and stops listening for them). */
export function untilSignal(): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    const onSignal = (name: NodeJS.Signals) => {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
      resolve(name);
    };
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
  });
}
