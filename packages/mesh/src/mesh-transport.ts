/**
 * MeshTransport: protocol's Transport over WebRTC data channels, one simple-peer per remote
 * member. The mesh only moves bytes: chunking and reassembly are protocol's (chunks.ts,
 * reassembler.ts), signaling is injected (`sendSignal` out, `handleSignal` in), and so is the
 * WebRTC implementation (`wrtc` in Node; nothing in a browser, which has its own).
 *
 * Per remote peer:
 * - The peer with the lower id (string order) is the initiator, so both sides can call
 *   `addPeer` for each other without glare. A signal from an unknown peer creates it too.
 * - Sends are serialized (messages arrive whole and in order) and paced by the channel's
 *   `bufferedAmount`: above `highWaterMark` the sender waits until it falls to `lowWaterMark`
 *   (`bufferedamountlow`, with polling as a fallback), so a 50 MB message buffers at most about
 *   highWaterMark + one chunk.
 * - Liveness: a ping every `heartbeatIntervalMs`; a peer that sends neither a pong nor a chunk for
 *   `heartbeatTimeoutMs` is declared down ('timeout'). ICE failure, channel errors and close
 *   are mapped to peer-down reasons; a peer that never connects within `connectTimeoutMs` is
 *   reported through `onConnectFailed` (no peer-down: it was never up).
 * - Bad chunks and unknown control frames are dropped and recorded in `rejections`.
 * - Memory: everything held for a peer (reassembly in progress, frames that came before
 *   'connect') shares one byte budget per peer (peer-buffers.ts); a peer over it has its new
 *   messages refused and counted. Messages are at most `maxMessageBytes` both ways: 256 MiB until
 *   the run is known, then what `setMessageLimit(maxMessageBytesFor(config))` says, and the
 *   per-peer budget follows it (peerBudgetFor) unless `maxPeerBufferedBytes` fixes it.
 * - Keys: the mesh only carries them. `identity` and `peerKeys` (the signaling server's bindings)
 *   are lent to the swarm Member on top (protocol's KeyedTransport), which signs and verifies.
 *
 * link.ts holds what is kept per peer and reaches into simple-peer; mesh-options.ts the options
 * and their defaults.
 */
import {
  DEFAULT_MAX_MESSAGE_BYTES,
  type Identity,
  iterateChunks,
  type KeyedTransport,
  type PeerDownReason,
  type PeerId,
  PeerKeyRegistry,
  peerBudgetFor,
  RejectionCounters,
  type Transport,
  TransportEmitter,
  TransportError,
  type TransportEvent,
  type TransportEvents,
} from '@shoal/protocol';
import { decodeControl, encodeControl, isControlFrame } from './control.ts';
import { waitForDrain } from './drain.ts';
import { dataChannel, type Link, newLink, reasonForError, remoteMaxMessageSize } from './link.ts';
import {
  checkMessageLimit,
  type MeshStats,
  type MeshTransportOptions,
  type ResolvedMeshOptions,
  resolveMeshOptions,
  type SignalData,
} from './mesh-options.ts';
import type { PeerBufferStats } from './peer-buffers.ts';

export class MeshTransport implements Transport, KeyedTransport {
  readonly self: PeerId;
  readonly rejections: RejectionCounters;
  readonly identity: Identity | null;
  readonly peerKeys: PeerKeyRegistry;
  readonly stats: MeshStats = {
    bytesSent: 0,
    bytesReceived: 0,
    messagesSent: 0,
    messagesReceived: 0,
    peakBufferedAmount: 0,
    peakPeerHeldBytes: 0,
  };
  private readonly emitter = new TransportEmitter();
  private readonly links = new Map<PeerId, Link>();
  private readonly options: ResolvedMeshOptions;
  /** The largest message accepted from or sent to any peer. */
  private maxMessageBytes: number;
  /** Each peer's byte budget. */
  private peerBudgetBytes: number;
  private readonly now: () => number;
  private readonly heartbeat: ReturnType<typeof setInterval>;
  private closing = false;
  private pongsPaused = false;

  constructor(private readonly config: MeshTransportOptions) {
    this.self = config.self;
    this.identity = config.identity ?? null;
    this.peerKeys = config.peerKeys ?? new PeerKeyRegistry();
    this.now = config.now ?? (() => performance.now());
    this.rejections = config.rejections ?? new RejectionCounters({ now: () => Date.now() });
    this.options = resolveMeshOptions(config);
    this.maxMessageBytes = checkMessageLimit(config.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES);
    this.peerBudgetBytes = config.maxPeerBufferedBytes ?? peerBudgetFor(this.maxMessageBytes);
    this.heartbeat = setInterval(() => this.beat(), this.options.heartbeatIntervalMs);
    (this.heartbeat as { unref?: () => void }).unref?.();
  }

  peers(): PeerId[] {
    return [...this.links.values()].filter((link) => link.up).map((link) => link.id);
  }

  on<E extends TransportEvent>(event: E, listener: TransportEvents[E]): () => void {
    return this.emitter.on(event, listener);
  }

  /**
   * The largest message accepted from or sent to any peer, current and future, from now on:
   * call it with `maxMessageBytesFor(config)` once the run config is known. Each peer's byte
   * budget follows (peerBudgetFor), unless `maxPeerBufferedBytes` was given. Messages already
   * being reassembled go on under the limit they began with.
   */
  setMessageLimit(bytes: number): void {
    this.maxMessageBytes = checkMessageLimit(bytes);
    if (this.config.maxPeerBufferedBytes === undefined) this.peerBudgetBytes = peerBudgetFor(bytes);
    for (const link of this.links.values()) link.buffers.setLimits(this.maxMessageBytes, this.peerBudgetBytes);
  }

  /** The largest message accepted now, and each peer's byte budget. */
  get messageLimit(): { maxMessageBytes: number; peerBudgetBytes: number } {
    return { maxMessageBytes: this.maxMessageBytes, peerBudgetBytes: this.peerBudgetBytes };
  }

  /** What this side holds for `peer` now (undefined for a peer it has no link to). */
  peerBuffers(peer: PeerId): PeerBufferStats | undefined {
    return this.links.get(peer)?.buffers.stats();
  }

  /** Starts connecting to `peer` (idempotent). Call it for every member the signaling reports. */
  addPeer(peer: PeerId): void {
    if (this.closing) throw new TransportError('closed', 'the transport is closed');
    if (peer === this.self) throw new RangeError('cannot connect to self');
    if (!this.links.has(peer)) this.createLink(peer);
  }

  /** Leaves one peer: says goodbye, closes the connection; emits peer-down 'left' if it was up. */
  removePeer(peer: PeerId): void {
    const link = this.links.get(peer);
    if (!link) return;
    this.trySend(link, encodeControl('bye'));
    this.goDown(link, { code: 'left', message: 'removed by this side' });
  }

  /** Feeds a signal that the signaling channel delivered from `from`. */
  handleSignal(from: PeerId, data: SignalData): void {
    if (this.closing || from === this.self) return;
    let link = this.links.get(from);
    // A fresh offer to a link that already has a connection means the remote started over.
    if (link && data.type === 'offer' && (link.up || link.peer.connected)) {
      this.goDown(link, { code: 'closed', message: 'the peer reconnected' });
      link = undefined;
    }
    link ??= this.createLink(from);
    try {
      link.peer.signal(data);
    } catch (error) {
      this.goDown(link, { code: 'error', message: `bad signal: ${String(error)}` });
    }
  }

  async send(to: PeerId, bytes: Uint8Array): Promise<void> {
    if (this.closing) throw new TransportError('closed', 'the transport is closed');
    const link = this.links.get(to);
    if (!link?.up) throw new TransportError('peer-not-up', `peer ${to} is not up`);
    if (bytes.length > this.maxMessageBytes) {
      throw new TransportError('too-large', `${bytes.length} bytes exceed ${this.maxMessageBytes}`);
    }
    const messageId = link.nextMessageId;
    link.nextMessageId = (messageId + 1) >>> 0;
    link.buffers.queuedSendBytes += bytes.length;
    const sent = link.sendTail
      .then(() => this.pump(link, bytes, messageId))
      .finally(() => {
        link.buffers.queuedSendBytes -= bytes.length;
      });
    link.sendTail = sent.catch(() => {});
    return sent;
  }

  async close(): Promise<void> {
    if (this.closing) return;
    this.closing = true;
    clearInterval(this.heartbeat);
    const links = [...this.links.values()];
    for (const link of links) this.trySend(link, encodeControl('bye'));
    // The remote closes on our goodbye; its close is our acknowledgement that the bye arrived.
    const acknowledged = Promise.all(links.filter((link) => link.up).map((link) => link.gone));
    await Promise.race([acknowledged, new Promise((resolve) => setTimeout(resolve, this.options.closeGraceMs))]);
    for (const link of links) this.goDown(link, { code: 'left', message: 'this side closed' });
    this.emitter.clear();
  }

  /** Test hooks: not part of the Transport. */
  readonly testing = {
    /** Stops (or resumes) answering pings, to simulate a hung peer. */
    pausePongs: (paused: boolean) => {
      this.pongsPaused = paused;
    },
    /** Puts raw bytes on the channel to `peer`, bypassing chunking. */
    sendRaw: (peer: PeerId, frame: Uint8Array) => {
      const link = this.links.get(peer);
      if (!link?.up) throw new TransportError('peer-not-up', `peer ${peer} is not up`);
      link.peer.send(frame);
    },
    /** Bytes queued on the channel to `peer` (0 when there is none). */
    bufferedAmount: (peer: PeerId): number => this.links.get(peer)?.peer.bufferSize ?? 0,
    /** Destroys the connection without a goodbye, as a crash would. */
    crash: () => {
      this.closing = true;
      clearInterval(this.heartbeat);
      for (const link of this.links.values()) link.peer.destroy();
      this.links.clear();
      this.emitter.clear();
    },
  };

  private createLink(id: PeerId): Link {
    const link = newLink(
      id,
      {
        self: this.self,
        wrtc: this.config.wrtc,
        rtcConfig: this.config.rtcConfig,
        now: this.now,
        maxMessageBytes: this.maxMessageBytes,
        peerBudgetBytes: this.peerBudgetBytes,
        maxChunkBytes: this.options.maxChunkBytes,
        connectTimeoutMs: this.options.connectTimeoutMs,
      },
      (late) => this.goDown(late, { code: 'connection-failed', message: 'no connection within the timeout' }),
    );
    const { peer } = link;
    this.links.set(id, link);

    peer.on('signal', (data: SignalData) => {
      if (!link.down && !this.closing) this.config.sendSignal(id, data);
    });
    peer.on('connect', () => this.onConnect(link));
    peer.on('data', (frame: Uint8Array) => this.onFrame(link, frame));
    peer.on('error', (error: Error & { code?: string }) => this.goDown(link, reasonForError(error)));
    peer.on('close', () => this.goDown(link, { code: 'closed', message: 'the connection closed' }));
    return link;
  }

  private onConnect(link: Link): void {
    if (link.down || this.closing) return;
    clearTimeout(link.connectTimer);
    link.up = true;
    link.lastHeard = this.now();
    link.maxChunkBytes = Math.min(this.options.maxChunkBytes, remoteMaxMessageSize(link.peer));
    this.emitter.emit('peer-up', link.id);
    for (const frame of link.buffers.takeEarly()) this.onFrame(link, frame);
  }

  private onFrame(link: Link, frame: Uint8Array): void {
    if (link.down) return;
    if (this.closing) {
      // both sides closing at once: each one's goodbye acknowledges the other's
      if (decodeControl(frame)?.kind === 'bye') this.goDown(link, { code: 'left', message: 'the peer left' });
      return;
    }
    if (!link.up) {
      const refusal = link.buffers.holdEarly(frame);
      if (refusal) this.reject(link, 'over-budget', refusal);
      else this.notePeerHeld(link);
      return;
    }
    this.stats.bytesReceived += frame.length;
    if (isControlFrame(frame)) {
      const control = decodeControl(frame);
      if (!control) {
        this.reject(link, 'control', `malformed control frame of ${frame.length} bytes`);
      } else if (control.kind === 'ping') {
        if (!this.pongsPaused) this.trySend(link, encodeControl('pong', control.nonce));
      } else if (control.kind === 'pong') {
        link.lastHeard = this.now();
      } else {
        this.goDown(link, { code: 'left', message: 'the peer left' });
      }
      return;
    }
    link.lastHeard = this.now();
    const result = link.buffers.push(frame);
    this.notePeerHeld(link);
    if (result.status === 'rejected') {
      this.reject(link, result.reason, result.detail);
    } else if (result.status === 'complete') {
      this.stats.messagesReceived++;
      this.emitter.emit('message', link.id, result.bytes);
    }
  }

  /** Sends one message's chunks, waiting whenever the channel holds more than the high-water mark. */
  private async pump(link: Link, bytes: Uint8Array, messageId: number): Promise<void> {
    const channel = dataChannel(link.peer);
    for (const chunk of iterateChunks(bytes, link.maxChunkBytes, messageId)) {
      if (channel && channel.bufferedAmount > this.options.highWaterMark) {
        await waitForDrain(channel, this.options.lowWaterMark, link.abort.signal);
      }
      if (link.down || this.closing) {
        throw new TransportError(this.closing ? 'closed' : 'peer-not-up', `peer ${link.id} went down during send`);
      }
      if (!this.trySend(link, chunk)) throw new TransportError('peer-not-up', `send to ${link.id} failed`);
      if (channel && channel.bufferedAmount > this.stats.peakBufferedAmount) {
        this.stats.peakBufferedAmount = channel.bufferedAmount;
      }
    }
    this.stats.messagesSent++;
  }

  private trySend(link: Link, frame: Uint8Array): boolean {
    if (link.down || !link.up) return false;
    try {
      link.peer.send(frame);
      this.stats.bytesSent += frame.length;
      return true;
    } catch (error) {
      this.goDown(link, { code: 'error', message: `send failed: ${String(error)}` });
      return false;
    }
  }

  private beat(): void {
    const now = this.now();
    for (const link of [...this.links.values()]) {
      if (!link.up) continue;
      if (now - link.lastHeard > this.options.heartbeatTimeoutMs) {
        this.goDown(link, {
          code: 'timeout',
          message: `no answer for ${Math.round(now - link.lastHeard)} ms`,
        });
        continue;
      }
      link.pingNonce = (link.pingNonce + 1) >>> 0;
      this.trySend(link, encodeControl('ping', link.pingNonce));
      for (const eviction of link.buffers.reassembler.evictExpired()) {
        this.reject(
          link,
          'reassembly-timeout',
          `message ${eviction.messageId}: ${eviction.received}/${eviction.count}`,
        );
      }
    }
  }

  private notePeerHeld(link: Link): void {
    const { peakHeldBytes } = link.buffers;
    if (peakHeldBytes > this.stats.peakPeerHeldBytes) this.stats.peakPeerHeldBytes = peakHeldBytes;
  }

  private reject(link: Link, reason: string, detail: string): void {
    this.rejections.record({ from: link.id, reason, detail });
  }

  /** The one way a link ends: idempotent, destroys the peer, emits peer-down if it was up. */
  private goDown(link: Link, reason: PeerDownReason): void {
    if (link.down) return;
    link.down = true;
    clearTimeout(link.connectTimer);
    if (this.links.get(link.id) === link) this.links.delete(link.id);
    link.abort.abort();
    link.buffers.clear();
    link.peer.destroy();
    link.markGone();
    if (this.closing) return;
    if (link.up) this.emitter.emit('peer-down', link.id, reason);
    else this.config.onConnectFailed?.(link.id, reason);
  }
}
