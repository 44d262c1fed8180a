/**
 * One signaling socket on the server: who it is (its address; its peer id and key while in a
 * room), what it may spend (messages a second, relays once seated, bytes of signals), and its
 * outgoing side. Frames other peers sent it (signal, relay) go through deliver, which drops them
 * once half of maxBufferedBytes is queued, so someone else's traffic never closes it; the server's
 * own frames go through sendText, which closes a socket that stops reading rather than queue
 * without bound (only its own failure to read gets it there). Every refusal goes through reject
 * (answered, counted, logged), notice (the same, answered at most once a second) or count.
 */
import type { PeerKey, RejectionCounters } from '@shoal/protocol';
import { CLOSE_CODES, type ServerMessage, type SignalErrorCode } from '@shoal/signaling';
import { WebSocket } from 'ws';
import type { Room } from './rooms.ts';
import type { Log, SignalingLimits } from './signal-config.ts';
import { TokenBucket } from './token-bucket.ts';

type ConnectionLimits = Pick<
  SignalingLimits,
  | 'messagesPerSecond'
  | 'messageBurst'
  | 'maxDroppedMessages'
  | 'maxBufferedBytes'
  | 'hostRelayPerSecond'
  | 'hostRelayBurst'
  | 'memberRelayPerSecond'
  | 'memberRelayBurst'
  | 'signalBytesPerSecond'
  | 'signalBurstBytes'
>;

/** What every connection of one server shares. */
export interface ConnectionContext {
  limits: ConnectionLimits;
  now: () => number;
  counters: RejectionCounters;
  log: Log;
  /** `conn` stopped reading and is being closed: take it out of its room first. */
  onStalled(conn: Connection): void;
}

export class Connection {
  room: Room<Connection> | null = null;
  peerId: string | null = null;
  /** The public key bound to peerId while in the room; null when the client announced none. */
  key: PeerKey | null = null;
  /** Relay deliveries, set when it takes a seat (a host's budget is larger than a member's). */
  relayBucket: TokenBucket | null = null;
  /** When it last sent a frame or a pong (ms): the heartbeat terminates it after idleTimeoutMs. */
  lastSeen: number;
  closing = false;
  /** Closes the socket unless it creates, reclaims, joins or watches a room in time. */
  helloTimer: ReturnType<typeof setTimeout> | null = null;
  /** Frames a second, the first check on every frame (before any parsing). */
  private readonly bucket: TokenBucket;
  /** Bytes of signal frames it may have relayed (a byte budget: a frame may go into debt). */
  private readonly signalBytes: TokenBucket;
  /** When each code of notice() was last answered (ms). */
  private readonly lastNoticeAt = new Map<SignalErrorCode, number>();
  /** Frames dropped over budget in the current flood (one with no 10 s pause). */
  private dropped = 0;
  private lastDropAt = 0;
  private lastRateErrorAt = -Infinity;

  constructor(
    readonly id: number,
    readonly socket: WebSocket,
    /** Who it counts against (addressKey of its peer address). */
    readonly address: string,
    private readonly context: ConnectionContext,
  ) {
    const { limits, now } = context;
    this.bucket = new TokenBucket(limits.messagesPerSecond, limits.messageBurst, now);
    this.signalBytes = new TokenBucket(limits.signalBytesPerSecond, limits.signalBurstBytes, now);
    this.lastSeen = now();
  }

  /** How the rejection counters name it: its peer id, or `conn-N` outside a room. */
  get who(): string {
    return this.peerId ?? `conn-${this.id}`;
  }

  /** It holds the host's seat of its room. */
  get hosts(): boolean {
    return this.room !== null && this.peerId === this.room.hostId;
  }

  /** Takes `peerId`'s seat in `room`, bound to `key`; the hello timer stops. */
  seat(room: Room<Connection>, peerId: string, key: PeerKey | null): void {
    const { limits, now } = this.context;
    this.room = room;
    this.peerId = peerId;
    this.key = key;
    this.relayBucket =
      peerId === room.hostId
        ? new TokenBucket(limits.hostRelayPerSecond, limits.hostRelayBurst, now)
        : new TokenBucket(limits.memberRelayPerSecond, limits.memberRelayBurst, now);
    this.stopHelloTimer();
  }

  /** Out of its room: no seat, no peer id, no key. */
  unseat(): void {
    this.room = null;
    this.peerId = null;
    this.key = null;
  }

  stopHelloTimer(): void {
    if (this.helloTimer) clearTimeout(this.helloTimer);
    this.helloTimer = null;
  }

  /**
   * A frame arrived: true when the message budget pays for it. Otherwise it is dropped, answered
   * with 'rate-limited' at most once a second, and a socket that keeps flooding is closed.
   */
  admitFrame(): boolean {
    if (this.bucket.take()) return true;
    const { limits, now, log } = this.context;
    const t = now();
    if (t - this.lastDropAt > 10_000) this.dropped = 0; // a flood is continuous drops
    this.lastDropAt = t;
    this.dropped++;
    if (this.dropped > limits.maxDroppedMessages) {
      this.count('flood', `${this.dropped} messages over budget`);
      log('flood', { conn: this.id, peer: this.peerId });
      this.closeWith(CLOSE_CODES.policy, 'message rate exceeded');
      return false;
    }
    if (t - this.lastRateErrorAt >= 1000) {
      this.lastRateErrorAt = t;
      this.reject(
        'rate-limited',
        `at most ${limits.messagesPerSecond} messages a second (burst ${limits.messageBurst})`,
      );
    } else {
      this.count('rate-limited', 'dropped');
    }
    return false;
  }

  /** A signal frame of `bytes` from it: true when its byte budget pays for relaying it. */
  paySignal(bytes: number): boolean {
    return this.signalBytes.spend(bytes);
  }

  send(message: ServerMessage): void {
    this.sendText(JSON.stringify(message));
  }

  /** Half of maxBufferedBytes is queued to it: it is not reading, and frames from others skip it. */
  get backlogged(): boolean {
    return this.socket.bufferedAmount > this.context.limits.maxBufferedBytes / 2;
  }

  /**
   * A frame another peer sent (signal, relay), relayed to this socket: false, and nothing queued,
   * when half of maxBufferedBytes is queued already (it is not reading). The rest is kept for the
   * server's own frames, so another peer's traffic alone never gets this socket closed.
   */
  deliver(message: ServerMessage): boolean {
    const { socket } = this;
    if (this.closing || socket.readyState !== WebSocket.OPEN) return true; // on its way out: nothing to tell
    if (this.backlogged) return false;
    socket.send(JSON.stringify(message));
    return true;
  }

  /** A frame already encoded (a view sent to every watcher is stringified once). */
  sendText(text: string): void {
    const { socket } = this;
    if (this.closing || socket.readyState !== WebSocket.OPEN) return;
    if (socket.bufferedAmount > this.context.limits.maxBufferedBytes) {
      // a reader that does not drain would make us queue without bound
      this.count('backpressure', `${socket.bufferedAmount} bytes queued`);
      this.context.log('backpressure', { conn: this.id, peer: this.peerId, queued: socket.bufferedAmount });
      this.context.onStalled(this);
      this.closeWith(CLOSE_CODES.policy, 'not reading');
      socket.terminate();
      return;
    }
    socket.send(text);
  }

  /** Refuses what it sent: counted, logged, and answered with `error` (`ref`: the kind refused). */
  reject(code: SignalErrorCode, message: string, ref?: string): void {
    this.count(code, message);
    this.context.log('rejected', { conn: this.id, peer: this.peerId, code, ref });
    this.send(ref === undefined ? { kind: 'error', code, message } : { kind: 'error', code, message, ref });
  }

  /**
   * Refuses what may repeat at speed (dropped signals): counted every time, answered with `error`
   * at most once a second per code, so the answers cannot become a flood of their own.
   */
  notice(code: SignalErrorCode, message: string, ref?: string): void {
    const t = this.context.now();
    if (t - (this.lastNoticeAt.get(code) ?? Number.NEGATIVE_INFINITY) < 1000) {
      this.count(code, message);
      return;
    }
    this.lastNoticeAt.set(code, t);
    this.reject(code, message, ref);
  }

  /** Counts something refused on its account without answering it. */
  count(reason: string, detail: string): void {
    this.context.counters.record({ from: this.who, reason, detail });
  }

  /** Closes the socket once (later calls do nothing); frames still arriving are ignored. */
  closeWith(code: number, reason: string): void {
    if (this.closing) return;
    this.closing = true;
    this.socket.close(code, reason);
  }
}
