/**
 * The moving parts of the simulated network (network.ts states the model): each member's uplink
 * FIFO and downlink, and per directed pair of peers the queue of messages and notices not yet
 * delivered, in the order they were sent. An item is delivered only from the head of its queue,
 * which is what keeps each pair in order whatever the timing of the items behind.
 */
import type { PeerDownReason, PeerId, TransportError } from '@shoal/protocol';
import type { Clock, TimerHandle } from './clock.ts';
import { type LatencyTable, type LinkRates, serializationMs } from './links.ts';

/** One incarnation of a member, as the wire sees it. */
export interface Endpoint {
  readonly peer: PeerId;
  readonly incarnation: number;
  rates: LinkRates;
  /** Messages waiting for the uplink, FIFO. */
  uplink: MessageItem[];
  /** The message leaving the uplink now, and the event at which it has left. */
  sending: { item: MessageItem; done: TimerHandle } | null;
  /** When the downlink has served every message admitted to it, ms. */
  downlinkFreeAt: number;
}

interface QueuedBase {
  from: PeerId;
  to: PeerId;
  fromIncarnation: number;
  toIncarnation: number;
  /** When it may be delivered, ms; a message learns it when its first bit reaches the downlink. */
  readyAt: number | undefined;
  /** Skipped, not delivered, when it reaches the head of its pair's queue. */
  lost: boolean;
}

export interface MessageItem extends QueuedBase {
  kind: 'message';
  bytes: Uint8Array;
  /** It has left the sender's uplink (its send resolved). */
  onWire: boolean;
  /** Lost and skipped before it had left the uplink: counted as lost once it has. */
  skipped: boolean;
  /** The sender crashes as soon as this message has left its uplink. */
  crashAfter: boolean;
  resolve: () => void;
  reject: (error: TransportError) => void;
}

export type Notice = { kind: 'up' } | { kind: 'down'; reason: PeerDownReason };

export type Item = MessageItem | (QueuedBase & Notice);

/** What the wire asks of the network. */
export interface WireHost {
  /** The live endpoint of `peer`, if it is still `incarnation`. */
  endpoint(peer: PeerId, incarnation: number): Endpoint | undefined;
  /** `item` has left its sender's uplink; its send has resolved. */
  sent(item: MessageItem): void;
  /** `item` is at the head of its pair's queue and ready: hand it to its receiver. */
  deliver(item: Item): void;
  /** `item` left its sender's uplink and will never be delivered. */
  lost(item: MessageItem): void;
}

export class Wire {
  private readonly queues = new Map<PeerId, Map<PeerId, Item[]>>();

  constructor(
    private readonly clock: Clock,
    private readonly latency: LatencyTable,
    private readonly host: WireHost,
  ) {}

  /** Queues a message on `sender`'s uplink; resolves when it has left. A lost one still takes its time. */
  send(
    sender: Endpoint,
    to: PeerId,
    toIncarnation: number,
    bytes: Uint8Array,
    fate: { lost: boolean; crashAfter: boolean },
  ): Promise<void> {
    const item: MessageItem = {
      kind: 'message',
      from: sender.peer,
      to,
      fromIncarnation: sender.incarnation,
      toIncarnation,
      readyAt: undefined,
      lost: fate.lost,
      bytes,
      onWire: false,
      skipped: false,
      crashAfter: fate.crashAfter,
      resolve: () => {},
      reject: () => {},
    };
    const sent = new Promise<void>((resolve, reject) => {
      item.resolve = resolve;
      item.reject = reject;
    });
    this.queue(sender.peer, to).push(item);
    sender.uplink.push(item);
    this.startSending(sender);
    return sent;
  }

  /** Queues a notice about `about` for `to`, in order with `about`'s messages to it, `delayMs` from now. */
  notify(about: Endpoint, to: Endpoint, notice: Notice, delayMs: number): void {
    const readyAt = this.clock.now() + delayMs;
    const item: Item = {
      ...notice,
      from: about.peer,
      to: to.peer,
      fromIncarnation: about.incarnation,
      toIncarnation: to.incarnation,
      readyAt,
      lost: false,
    };
    this.queue(about.peer, to.peer).push(item);
    this.clock.scheduleAt(readyAt, () => this.pump(about.peer, to.peer));
  }

  /** Marks lost the undelivered messages from `from` to `to`, or to anyone; `keepOnWire` spares those that left. */
  lose(from: PeerId, to?: PeerId, keepOnWire = false): void {
    const row = this.queues.get(from);
    const queues = to === undefined ? [...(row?.values() ?? [])] : [row?.get(to) ?? []];
    for (const queue of queues) {
      for (const item of queue) if (item.kind === 'message' && !(keepOnWire && item.onWire)) item.lost = true;
    }
  }

  /**
   * Rejects the messages of `endpoint` that have not left its uplink; with `to`, only those to
   * `to` still waiting (one already leaving finishes, as its bytes are on their way).
   */
  abandonUplink(endpoint: Endpoint, error: TransportError, to?: PeerId): void {
    const sending = endpoint.sending;
    if (sending !== null && to === undefined) {
      sending.done.cancel();
      endpoint.sending = null;
      this.reject(sending.item, error);
    }
    endpoint.uplink = endpoint.uplink.filter((item) => {
      if (to !== undefined && item.to !== to) return true;
      this.reject(item, error);
      return false;
    });
  }

  /** Starts the next message leaving `endpoint`'s uplink, unless one is leaving already. */
  private startSending(endpoint: Endpoint): void {
    if (endpoint.sending !== null) return;
    const item = endpoint.uplink.shift();
    if (item === undefined) return;
    const leaveMs = serializationMs(item.bytes.byteLength, endpoint.rates.upMbps);
    const latencyMs = this.latency.get(item.from, item.to);
    const lastBitAt = this.clock.now() + leaveMs + latencyMs;
    this.clock.schedule(latencyMs, () => this.admit(item, lastBitAt));
    const done = this.clock.schedule(leaveMs, () => this.sent(endpoint, item));
    endpoint.sending = { item, done };
  }

  private sent(endpoint: Endpoint, item: MessageItem): void {
    endpoint.sending = null;
    item.onWire = true;
    item.resolve();
    this.host.sent(item);
    if (item.skipped) this.host.lost(item);
    this.startSending(endpoint);
  }

  /** The first bit of `item` reaches its receiver's downlink: it takes its turn there. */
  private admit(item: MessageItem, lastBitAt: number): void {
    const receiver = this.host.endpoint(item.to, item.toIncarnation);
    if (item.lost || receiver === undefined) {
      item.lost = true;
      this.pump(item.from, item.to);
      return;
    }
    const start = Math.max(this.clock.now(), receiver.downlinkFreeAt);
    receiver.downlinkFreeAt = start + serializationMs(item.bytes.byteLength, receiver.rates.downMbps);
    item.readyAt = Math.max(receiver.downlinkFreeAt, lastBitAt);
    this.clock.scheduleAt(item.readyAt, () => this.pump(item.from, item.to));
  }

  /** Delivers, in order, the ready items at the head of the pair's queue; skips lost ones. */
  private pump(from: PeerId, to: PeerId): void {
    const queue = this.queues.get(from)?.get(to);
    if (queue === undefined) return;
    for (let head = queue[0]; head !== undefined; head = queue[0]) {
      if (!head.lost && (head.readyAt === undefined || head.readyAt > this.clock.now())) return;
      queue.shift();
      if (!head.lost) this.host.deliver(head);
      else if (head.kind === 'message' && head.onWire) this.host.lost(head);
      else if (head.kind === 'message') head.skipped = true; // still to leave the uplink, or be rejected
    }
  }

  /** A message that never left: out of its pair's queue, its send rejected. */
  private reject(item: MessageItem, error: TransportError): void {
    item.lost = true;
    const queue = this.queue(item.from, item.to);
    const at = queue.indexOf(item);
    if (at >= 0) queue.splice(at, 1);
    item.reject(error);
  }

  private queue(from: PeerId, to: PeerId): Item[] {
    let row = this.queues.get(from);
    if (row === undefined) {
      row = new Map();
      this.queues.set(from, row);
    }
    let queue = row.get(to);
    if (queue === undefined) {
      queue = [];
      row.set(to, queue);
    }
    return queue;
  }
}
