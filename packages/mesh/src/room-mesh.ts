/**
 * A room's mesh: a MeshTransport connected to every member a signaling channel announces, in
 * Node (`shoal host`, `shoal worker`) and in the browser (the dashboard, the volunteer page).
 * The signaling channel is structural (the server's SignalClient fits), so this package does not
 * depend on the server's. Its identity and key bindings go with the mesh to the swarm Member.
 */
import type { Identity, PeerId, PeerKeyRegistry } from '@shoal/protocol';
import type { MeshTransportOptions, SignalData } from './mesh-options.ts';
import { MeshTransport } from './mesh-transport.ts';

/** What the mesh needs of a signaling client (SignalClient from @shoal/signaling fits). */
export interface SignalChannel {
  signal(to: string, data: unknown): void;
  on(event: 'signal', handler: (message: { from: string; data: unknown }) => void): () => void;
  on(event: 'peer-joined', handler: (message: { peer: string }) => void): () => void;
  on(event: 'peer-left', handler: (message: { peer: string }) => void): () => void;
  /** The key pair the channel announced for this peer, if any. */
  readonly identity?: Identity | null;
  /** The keys the server bound to the other peers, kept up to date by the channel. */
  readonly peerKeys?: PeerKeyRegistry;
}

export interface RoomMeshOptions
  extends Omit<
    MeshTransportOptions,
    'self' | 'sendSignal' | 'rtcConfig' | 'onConnectFailed' | 'identity' | 'peerKeys'
  > {
  /** Pause before dialling a peer again after a failed or dropped connection. 1 s. */
  redialMs?: number;
}

export interface RoomMesh {
  mesh: MeshTransport;
  /** Stops listening to signaling and closes every link; idempotent. */
  close(): Promise<void>;
}

/**
 * The mesh for `self` (the server-assigned peer id): every peer in `peers` and every later
 * peer-joined becomes a mesh peer; peer-left removes it. A link that fails to connect, or drops
 * while its peer is still in the room, is dialled again after a pause (a busy machine can miss
 * the connect timeout; a peer that left is not redialled).
 */
export function connectRoomMesh(
  signal: SignalChannel,
  room: { peerId: PeerId; iceServers: readonly unknown[] },
  peers: readonly PeerId[],
  options: RoomMeshOptions = {},
): RoomMesh {
  const { redialMs = 1_000, ...meshOptions } = options;
  const present = new Set(peers.filter((peer) => peer !== room.peerId));
  let closed = false;
  const redial = (peer: PeerId) => {
    const timer = setTimeout(() => {
      if (!closed && present.has(peer)) mesh.addPeer(peer);
    }, redialMs);
    // Node: a pending redial must not keep the process alive
    (timer as { unref?: () => void }).unref?.();
  };
  const mesh = new MeshTransport({
    ...meshOptions,
    self: room.peerId,
    sendSignal: (to, data) => signal.signal(to, data),
    rtcConfig: { iceServers: room.iceServers as RTCIceServer[] },
    onConnectFailed: (peer) => redial(peer),
    identity: signal.identity ?? null,
    ...(signal.peerKeys && { peerKeys: signal.peerKeys }),
  });
  mesh.on('peer-down', (peer, reason) => {
    if (reason.code !== 'left') redial(peer);
  });
  const off = [
    signal.on('signal', ({ from, data }) => {
      // the server relays any JSON: only an object can be SDP or ICE
      if (typeof data === 'object' && data !== null) mesh.handleSignal(from, data as SignalData);
    }),
    signal.on('peer-joined', ({ peer }) => {
      if (peer === room.peerId) return;
      present.add(peer);
      mesh.addPeer(peer);
    }),
    signal.on('peer-left', ({ peer }) => {
      present.delete(peer);
      mesh.removePeer(peer);
    }),
  ];
  for (const peer of present) mesh.addPeer(peer);
  let closing: Promise<void> | null = null;
  const close = () => {
    closing ??= (async () => {
      closed = true;
      for (const unsubscribe of off) unsubscribe();
      await mesh.close();
    })();
    return closing;
  };
  return { mesh, close };
}

/**
 * How long a member waits for a host that has gone before it takes the room as ended: 2 minutes,
 * time for a host to reload its page or restart `shoal host --resume`, or for the server to come back.
 */
export const HOST_GRACE_MS = 120_000;

/** What watchHost needs of the signaling channel: who comes and goes, and a re-entry's news of the host. */
export interface HostPresenceChannel {
  on(event: 'peer-joined', handler: (message: { peer: string }) => void): () => void;
  on(event: 'peer-left', handler: (message: { peer: string }) => void): () => void;
  on(event: 'reentered', handler: (reply: { hostPresent?: boolean }) => void): () => void;
  onState(handler: (state: { kind: string }) => void): () => void;
}

/**
 * Calls `onGone` once when the host has been gone for `graceMs`: its mesh link down and the
 * server not saying it is in the room (it said the host left, or the server itself is away), the
 * whole time. Either coming back restarts the wait. Returns the stop.
 */
export function watchHost(
  signal: HostPresenceChannel,
  mesh: Pick<MeshTransport, 'peers' | 'on'>,
  host: { hostId: PeerId; hostPresent: boolean },
  graceMs: number,
  onGone: () => void,
): () => void {
  let serverSaysPresent = host.hostPresent;
  let linkUp = mesh.peers().includes(host.hostId);
  let timer: ReturnType<typeof setTimeout> | null = null;
  const check = () => {
    const gone = !serverSaysPresent && !linkUp;
    if (!gone) {
      if (timer) clearTimeout(timer);
      timer = null;
    } else if (!timer) {
      timer = setTimeout(() => {
        stop();
        onGone();
      }, graceMs);
    }
  };
  const off = [
    signal.on('peer-joined', ({ peer }) => {
      if (peer !== host.hostId) return;
      serverSaysPresent = true;
      check();
    }),
    signal.on('peer-left', ({ peer }) => {
      if (peer !== host.hostId) return;
      serverSaysPresent = false;
      check();
    }),
    signal.on('reentered', (reply) => {
      serverSaysPresent = reply.hostPresent === true;
      check();
    }),
    signal.onState((state) => {
      // the server away cannot say the host is there
      if (state.kind !== 'connected') serverSaysPresent = false;
      check();
    }),
    mesh.on('peer-up', (peer) => {
      if (peer !== host.hostId) return;
      linkUp = true;
      check();
    }),
    mesh.on('peer-down', (peer) => {
      if (peer !== host.hostId) return;
      linkUp = false;
      check();
    }),
  ];
  const stop = () => {
    if (timer) clearTimeout(timer);
    timer = null;
    for (const unsubscribe of off) unsubscribe();
  };
  check();
  return stop;
}
