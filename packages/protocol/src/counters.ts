/**
 * The boundary where bad input stops: a MessageReceiver decodes what a Transport delivers and
 * returns the message, or records why not in RejectionCounters and returns null. Nothing thrown
 * reaches the caller, whatever the bytes (docs/design.md, "Threat model").
 *
 * Counters are by reason code ('hash', 'schema', 'wrong-run', or the swarm's own: 'stale-round',
 * 'not-a-participant', …), by peer, and the last few rejections with their sentences, for the
 * dashboard and for the `rejected` notice sent back to the peer. Memory is bounded: distinct
 * reasons and peers are capped, and further ones are counted under OTHER.
 */
import type { Message, MessageKind } from './messages.ts';
import type { PeerId } from './transport.ts';
import type { WireCodec } from './wire.ts';

/** The bucket for reasons or peers beyond the caps. */
export const OTHER = '(other)';

export interface Rejection {
  from: PeerId;
  reason: string;
  detail: string;
  /** The message's kind, when the header got that far. */
  kind?: MessageKind;
  /** From the injected clock (ms). */
  at: number;
}

export interface RejectionCountersOptions {
  /** Rejections kept with their detail, newest last. Default 32. */
  recent?: number;
  /** Distinct reasons counted by name. Default 64. */
  maxReasons?: number;
  /** Distinct peers counted by id. Default 1024. */
  maxPeers?: number;
  now?: () => number;
}

export class RejectionCounters {
  private readonly reasons = new Map<string, number>();
  private readonly peers = new Map<PeerId, number>();
  private readonly latest: Rejection[] = [];
  private count = 0;
  private readonly recentLimit: number;
  private readonly maxReasons: number;
  private readonly maxPeers: number;
  private readonly now: () => number;

  constructor(options: RejectionCountersOptions = {}) {
    this.recentLimit = options.recent ?? 32;
    this.maxReasons = options.maxReasons ?? 64;
    this.maxPeers = options.maxPeers ?? 1024;
    this.now = options.now ?? Date.now;
  }

  record(rejection: Omit<Rejection, 'at'>): Rejection {
    const entry: Rejection = { ...rejection, at: this.now() };
    this.count++;
    bump(this.reasons, entry.reason, this.maxReasons);
    bump(this.peers, entry.from, this.maxPeers);
    this.latest.push(entry);
    if (this.latest.length > this.recentLimit) this.latest.shift();
    return entry;
  }

  /** Rejections in all, or for one reason. */
  total(reason?: string): number {
    return reason === undefined ? this.count : (this.reasons.get(reason) ?? 0);
  }

  byReason(): Record<string, number> {
    return Object.fromEntries(this.reasons);
  }

  byPeer(): Record<PeerId, number> {
    return Object.fromEntries(this.peers);
  }

  /** The latest rejections, oldest first. */
  recent(): Rejection[] {
    return [...this.latest];
  }

  reset(): void {
    this.reasons.clear();
    this.peers.clear();
    this.latest.length = 0;
    this.count = 0;
  }
}

function bump(map: Map<string, number>, key: string, cap: number): void {
  const bucket = map.has(key) || map.size < cap ? key : OTHER;
  map.set(bucket, (map.get(bucket) ?? 0) + 1);
}

export interface MessageReceiverOptions {
  counters?: RejectionCounters;
  /** The run to accept; undefined accepts any run (a member before its welcome). */
  runId?: number;
  /** Called with each rejection after it is counted (to send a `rejected` notice, to log). */
  onReject?: (rejection: Rejection) => void;
}

export class MessageReceiver {
  readonly counters: RejectionCounters;
  /** The run messages must belong to; set it when the welcome tells the run id. */
  runId: number | undefined;
  private readonly onReject: ((rejection: Rejection) => void) | undefined;

  constructor(
    private readonly codec: WireCodec,
    options: MessageReceiverOptions = {},
  ) {
    this.counters = options.counters ?? new RejectionCounters();
    this.runId = options.runId;
    this.onReject = options.onReject;
  }

  /**
   * The decoded message, or null when it was rejected (counted, and passed to onReject). A hello
   * may carry run id 0, since a joiner does not know the run yet; every other kind must carry
   * this receiver's run once it is set.
   */
  receive(from: PeerId, bytes: Uint8Array): Message | null {
    const result = this.codec.decode(bytes);
    if (!result.ok) {
      this.reject(from, result.reason, result.detail, result.kind);
      return null;
    }
    const { message, runId } = result;
    const expected = this.runId;
    if (expected !== undefined && runId !== expected && !(message.kind === 'hello' && runId === 0)) {
      this.reject(from, 'wrong-run', `${message.kind} of run ${runId}, this room runs ${expected}`, message.kind);
      return null;
    }
    return message;
  }

  /** Counts a rejection decided above the wire (a stale round, a sender without the role). */
  reject(from: PeerId, reason: string, detail: string, kind?: MessageKind): void {
    const entry = this.counters.record(kind === undefined ? { from, reason, detail } : { from, reason, detail, kind });
    this.onReject?.(entry);
  }
}
