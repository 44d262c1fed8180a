/** MeshTransport's options, their defaults, and the figures it counts. */
import type { Identity, PeerDownReason, PeerId, PeerKeyRegistry, RejectionCounters } from '@shoal/protocol';
import type SimplePeer from 'simple-peer';

export type SignalData = SimplePeer.SignalData;
export type WrtcImplementation = NonNullable<SimplePeer.Options['wrtc']>;

export interface MeshTransportOptions {
  self: PeerId;
  /** Hands a signal to the signaling channel, addressed to `to`. */
  sendSignal: (to: PeerId, data: SignalData) => void;
  /** The WebRTC implementation: `@roamhq/wrtc` in Node; leave out in browsers. */
  wrtc?: WrtcImplementation;
  /** ICE servers and the like (from the signaling server's configuration). */
  rtcConfig?: RTCConfiguration;
  /** Largest chunk sent, header included; lowered to the remote's maxMessageSize when known. 16 KiB. */
  maxChunkBytes?: number;
  /** Largest message accepted from or sent to a peer (protocol's default: 256 MiB); see setMessageLimit. */
  maxMessageBytes?: number;
  /**
   * Bytes one peer may make this side hold at once (reassembly in progress, early frames).
   * Default: peerBudgetFor(maxMessageBytes), following setMessageLimit.
   */
  maxPeerBufferedBytes?: number;
  /** Bytes queued on a channel above which send waits. 1 MiB. */
  highWaterMark?: number;
  /** Bytes queued below which a waiting send resumes. 256 KiB. */
  lowWaterMark?: number;
  heartbeatIntervalMs?: number;
  heartbeatTimeoutMs?: number;
  connectTimeoutMs?: number;
  /** How long close() waits for peers to acknowledge its goodbye (by closing). 500 ms. */
  closeGraceMs?: number;
  /** A peer that could not be connected to (never came up). */
  onConnectFailed?: (peer: PeerId, reason: PeerDownReason) => void;
  now?: () => number;
  rejections?: RejectionCounters;
  /** This peer's key pair, as its signaling client announced it. Default: none. */
  identity?: Identity | null;
  /** The keys the signaling server bound to the peers. Default: an empty registry. */
  peerKeys?: PeerKeyRegistry;
}

export interface MeshStats {
  bytesSent: number;
  bytesReceived: number;
  messagesSent: number;
  messagesReceived: number;
  /** The largest bufferedAmount seen on any channel right after a send. */
  peakBufferedAmount: number;
  /** The most bytes any one peer made this side hold at once (PeerBufferStats.heldBytes). */
  peakPeerHeldBytes: number;
}

/** The options that have a default, resolved. */
export type ResolvedMeshOptions = Required<
  Pick<
    MeshTransportOptions,
    | 'maxChunkBytes'
    | 'highWaterMark'
    | 'lowWaterMark'
    | 'heartbeatIntervalMs'
    | 'heartbeatTimeoutMs'
    | 'connectTimeoutMs'
    | 'closeGraceMs'
  >
>;

export function resolveMeshOptions(config: MeshTransportOptions): ResolvedMeshOptions {
  const options = {
    maxChunkBytes: config.maxChunkBytes ?? 16 * 1024,
    highWaterMark: config.highWaterMark ?? 1024 * 1024,
    lowWaterMark: config.lowWaterMark ?? 256 * 1024,
    heartbeatIntervalMs: config.heartbeatIntervalMs ?? 2000,
    heartbeatTimeoutMs: config.heartbeatTimeoutMs ?? 10_000,
    connectTimeoutMs: config.connectTimeoutMs ?? 20_000,
    closeGraceMs: config.closeGraceMs ?? 500,
  };
  if (options.lowWaterMark > options.highWaterMark) {
    throw new RangeError('lowWaterMark must not exceed highWaterMark');
  }
  return options;
}

export function checkMessageLimit(bytes: number): number {
  if (!Number.isInteger(bytes) || bytes < 1 || bytes > 0xffff_ffff) {
    throw new RangeError(`The message limit must be an integer from 1 to ${0xffff_ffff} bytes, got ${bytes}`);
  }
  return bytes;
}
