/**
 * One remote peer of a MeshTransport: its simple-peer connection and everything the transport
 * keeps for it (send queue, reassembly under its byte budget, liveness), and the few things
 * simple-peer keeps private that the transport needs (the data channel for pacing, the remote's
 * largest message, error codes as peer-down reasons).
 */
import type { PeerDownReason, PeerId } from '@shoal/protocol';
import SimplePeer from 'simple-peer';
import type { DataChannelLike } from './drain.ts';
import type { WrtcImplementation } from './mesh-options.ts';
import { PeerBuffers } from './peer-buffers.ts';

export interface Link {
  id: PeerId;
  peer: SimplePeer.Instance;
  up: boolean;
  down: boolean;
  /** Reassembly and early frames under the peer's byte budget, and its send queue's size. */
  buffers: PeerBuffers;
  nextMessageId: number;
  /** The tail of this peer's send queue; never rejects. */
  sendTail: Promise<void>;
  /** When a pong or a chunk last came in (ms, from `now`). */
  lastHeard: number;
  pingNonce: number;
  maxChunkBytes: number;
  connectTimer: ReturnType<typeof setTimeout>;
  /** Wakes sends waiting on backpressure when the link goes down. */
  abort: AbortController;
  /** Resolves when the link has gone down. */
  gone: Promise<void>;
  markGone: () => void;
}

export interface LinkSettings {
  self: PeerId;
  wrtc: WrtcImplementation | undefined;
  rtcConfig: RTCConfiguration | undefined;
  now: () => number;
  maxMessageBytes: number;
  peerBudgetBytes: number;
  maxChunkBytes: number;
  connectTimeoutMs: number;
}

/**
 * A link to `id`, not up yet, its connect timer running (`onConnectTimeout` when it fires). The
 * peer with the lower id (string order) initiates. The caller wires the peer's events.
 */
export function newLink(id: PeerId, settings: LinkSettings, onConnectTimeout: (link: Link) => void): Link {
  const peer = new SimplePeer({
    initiator: settings.self < id,
    trickle: true,
    wrtc: settings.wrtc,
    config: settings.rtcConfig,
    channelConfig: { ordered: true },
  });
  let markGone = () => {};
  const gone = new Promise<void>((resolve) => {
    markGone = resolve;
  });
  const link: Link = {
    id,
    peer,
    up: false,
    down: false,
    buffers: new PeerBuffers({
      now: settings.now,
      maxMessageBytes: settings.maxMessageBytes,
      budgetBytes: settings.peerBudgetBytes,
    }),
    nextMessageId: 0,
    sendTail: Promise.resolve(),
    lastHeard: settings.now(),
    pingNonce: 0,
    maxChunkBytes: settings.maxChunkBytes,
    connectTimer: setTimeout(() => onConnectTimeout(link), settings.connectTimeoutMs),
    abort: new AbortController(),
    gone,
    markGone,
  };
  (link.connectTimer as { unref?: () => void }).unref?.();
  return link;
}

export function reasonForError(error: Error & { code?: string }): PeerDownReason {
  const message = error.message || String(error);
  switch (error.code) {
    case 'ERR_ICE_CONNECTION_FAILURE':
    case 'ERR_CONNECTION_FAILURE':
      return { code: 'connection-failed', message };
    case 'ERR_ICE_CONNECTION_CLOSED':
      return { code: 'closed', message };
    default:
      return { code: 'error', message: error.code ? `${error.code}: ${message}` : message };
  }
}

/** simple-peer keeps its channel and connection private; the mesh needs both for pacing. */
export function dataChannel(peer: SimplePeer.Instance): DataChannelLike | undefined {
  return (peer as unknown as { _channel?: DataChannelLike })._channel;
}

export function remoteMaxMessageSize(peer: SimplePeer.Instance): number {
  const pc = (peer as unknown as { _pc?: { sctp?: { maxMessageSize?: number } | null } })._pc;
  const size = pc?.sctp?.maxMessageSize;
  // 0 means "no limit" in the spec; absent means the implementation does not say
  return typeof size === 'number' && size > 0 ? size : Number.POSITIVE_INFINITY;
}
