/**
 * The simulated network: one Transport per member (`join(peer)`), messages timed on a virtual
 * clock by latency and bandwidth, crashes, partitions and per-peer byte counters. Like a WebRTC
 * mesh of reliable channels it never loses a message between two peers that stay up; unlike one,
 * it can be told to (`crash`, `partition`, a send hook).
 *
 * Timing model. Every member has an access link with an uplink and a downlink rate (home links
 * are asymmetric); the core network between access links has unlimited capacity and a fixed
 * one-way latency per directed pair. Queues are per sender's uplink and per receiver's downlink,
 * not per directed link, because on home internet the access link is the bottleneck: a worker
 * sending shards to five owners shares one uplink among them. A message of b bytes from A to B:
 * - waits in A's uplink, one FIFO for all of A's messages whatever their destination, then takes
 *   b·8/up_A ms to leave it; `send` resolves at that moment (backpressure: a sender that awaits
 *   each send keeps at most one message in its uplink, and the link busy without gaps);
 * - its first bit reaches B's downlink latency(A, B) ms after it started leaving; the downlink
 *   serves messages in order of first-bit arrival, b·8/down_B ms of its capacity each;
 * - it is delivered when that service is done and its last bit has arrived (left A + latency),
 *   whichever is later. A lone message on idle links thus takes latency + b·8/min(up, down) ms, and
 *   when several senders share B's downlink their messages are delivered at B's rate.
 * Delivery is in order per directed pair, and peer-up/peer-down notices travel in the same order
 * as messages: a member sees a peer come up before its first message and go down after its last.
 *
 * Failures. `crash(peer)` drops the messages it has in flight either way (or, with
 * `inFlight: 'deliver'`, still delivers those that had left its uplink), rejects its pending sends,
 * and the others see peer-down 'crashed' after `detectionMs`. Until then they may still send to it;
 * those messages use their uplinks and are lost. `close()` is a graceful leave: what had left the
 * uplink is delivered, then the others see peer-down 'left'. `partition(a, b)` loses what is in
 * flight between a and b, both see peer-down 'unreachable' after `detectionMs`, and `heal` brings
 * them up again. A peer id that joins again is a new incarnation; nothing of the old one reaches
 * the new one, or reaches a member after it has seen the new one come up.
 */
import { DEFAULT_MAX_MESSAGE_BYTES, type PeerDownReason, type PeerId, TransportError } from '@shoal/protocol';
import type { Clock } from './clock.ts';
import { checkDelay, checkRate, type LatencyModel, LatencyTable, type LinkRates } from './links.ts';
import { type SimLinkLayer, SimTransport } from './sim-transport.ts';
import { type Endpoint, type Item, type MessageItem, Wire } from './wire.ts';

export interface SimNetworkOptions {
  /** One-way propagation delay, ms: one value for every pair, or a function of the directed pair. Default 0. */
  latencyMs?: LatencyModel;
  /** Uplink rate of members that join without their own, Mbit/s. Default Infinity. */
  upMbps?: number;
  /** Downlink rate of members that join without their own, Mbit/s. Default Infinity. */
  downMbps?: number;
  /** From a crash or a partition to the peer-down it causes, ms. Default 1000. */
  detectionMs?: number;
  /** From a join or a heal to the peer-up events it causes, ms. Default 0. */
  connectMs?: number;
  /** Largest message `send` accepts, bytes. Default DEFAULT_MAX_MESSAGE_BYTES (256 MiB). */
  maxMessageBytes?: number;
  /**
   * Copy each message at `send`, as a wire would, so sender and receiver never share a buffer.
   * Default true; false saves memory when no one modifies sent buffers.
   */
  copyOnSend?: boolean;
}

/** What a send hook makes of an accepted message: 'drop' loses it without a peer-down, on purpose. */
export type SendVerdict = 'deliver' | 'deliver-then-crash' | 'drop';

/** Called for every message a member's `send` accepts, before it is queued. */
export type SendHook = (to: PeerId, bytes: Uint8Array) => SendVerdict;

/** Counters per peer id, over all its incarnations. */
export interface PeerStats {
  /** Bytes that left its uplink, lost ones included. */
  bytesSent: number;
  /** Bytes delivered to it. */
  bytesReceived: number;
  messagesSent: number;
  messagesReceived: number;
  /** Messages it sent (send resolved) that were never delivered. */
  messagesLost: number;
}

/** A live member: its transport and its end of the wire. */
interface Member extends Endpoint {
  transport: SimTransport;
}

export class SimNetwork {
  private readonly members = new Map<PeerId, Member>();
  private readonly partitions = new Set<string>();
  private readonly hooks = new Map<PeerId, SendHook[]>();
  private readonly counters = new Map<PeerId, PeerStats>();
  private readonly latency: LatencyTable;
  private readonly wire: Wire;
  private readonly defaultRates: LinkRates;
  private readonly detectionMs: number;
  private readonly connectMs: number;
  private readonly maxMessageBytes: number;
  private readonly copyOnSend: boolean;
  private incarnations = 0;
  private readonly links: SimLinkLayer = {
    send: (from, to, toIncarnation, bytes) => this.send(from, to, toIncarnation, bytes),
    leave: (from) => this.leave(from),
  };

  constructor(
    readonly clock: Clock,
    options: SimNetworkOptions = {},
  ) {
    this.latency = new LatencyTable(options.latencyMs ?? 0);
    this.defaultRates = { upMbps: options.upMbps ?? Infinity, downMbps: options.downMbps ?? Infinity };
    checkRate('upMbps', this.defaultRates.upMbps);
    checkRate('downMbps', this.defaultRates.downMbps);
    this.detectionMs = options.detectionMs ?? 1000;
    this.connectMs = options.connectMs ?? 0;
    checkDelay('detectionMs', this.detectionMs);
    checkDelay('connectMs', this.connectMs);
    this.maxMessageBytes = options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
    this.copyOnSend = options.copyOnSend ?? true;
    this.wire = new Wire(clock, this.latency, {
      endpoint: (peer, incarnation) => this.member(peer, incarnation),
      sent: (item) => this.sent(item),
      deliver: (item) => this.deliver(item),
      lost: (item) => this.statsOf(item.from).messagesLost++,
    });
  }

  /**
   * A new member and its Transport. It and the members already up see each other come up
   * `connectMs` from now (never synchronously: register listeners before running the clock).
   */
  join(peer: PeerId, rates: Partial<LinkRates> = {}): SimTransport {
    if (peer.length === 0) throw new Error('A peer id must not be empty');
    if (this.members.has(peer)) throw new Error(`${peer} is already a member of the network`);
    const incarnation = ++this.incarnations;
    const transport = new SimTransport(peer, incarnation, this.links, this.maxMessageBytes);
    const member: Member = {
      peer,
      incarnation,
      transport,
      rates: { ...this.defaultRates },
      uplink: [],
      sending: null,
      downlinkFreeAt: 0,
    };
    this.members.set(peer, member);
    this.setRates(peer, rates);
    if (!this.counters.has(peer)) {
      this.counters.set(peer, {
        bytesSent: 0,
        bytesReceived: 0,
        messagesSent: 0,
        messagesReceived: 0,
        messagesLost: 0,
      });
    }
    for (const other of this.members.values()) {
      if (other === member || this.isPartitioned(peer, other.peer)) continue;
      this.wire.notify(member, other, { kind: 'up' }, this.connectMs);
      this.wire.notify(other, member, { kind: 'up' }, this.connectMs);
    }
    return transport;
  }

  /** The members that have joined and neither crashed nor closed, in order of joining. */
  livePeers(): PeerId[] {
    return [...this.members.keys()];
  }

  /** The live member's transport, if `peer` is one. */
  transport(peer: PeerId): SimTransport | undefined {
    return this.members.get(peer)?.transport;
  }

  /** Kills `peer` now: its transport goes silent; see the module comment for the others' view. */
  crash(peer: PeerId, options: { inFlight?: 'drop' | 'deliver' } = {}): void {
    const member = this.liveMember(peer);
    this.members.delete(peer);
    member.transport.crash();
    this.wire.abandonUplink(member, new TransportError('closed', `${peer} crashed`));
    this.wire.lose(peer, undefined, options.inFlight === 'deliver');
    const reason: PeerDownReason = { code: 'crashed', message: `${peer} crashed` };
    for (const other of this.members.values())
      this.wire.notify(member, other, { kind: 'down', reason }, this.detectionMs);
  }

  /** Cuts the path between `a` and `b` (both ways) until `heal(a, b)`. */
  partition(a: PeerId, b: PeerId): void {
    if (a === b) throw new Error(`Cannot partition ${a} from itself`);
    if (this.isPartitioned(a, b)) return;
    this.partitions.add(pairKey(a, b));
    this.wire.lose(a, b);
    this.wire.lose(b, a);
    const memberA = this.members.get(a);
    const memberB = this.members.get(b);
    if (memberA === undefined || memberB === undefined) return;
    const down = (peer: PeerId) =>
      ({ kind: 'down', reason: { code: 'unreachable', message: `${peer} is unreachable` } }) as const;
    this.wire.notify(memberA, memberB, down(a), this.detectionMs);
    this.wire.notify(memberB, memberA, down(b), this.detectionMs);
  }

  /** Restores the path between `a` and `b`; they see each other come up `connectMs` from now. */
  heal(a: PeerId, b: PeerId): void {
    if (!this.partitions.delete(pairKey(a, b))) return;
    const memberA = this.members.get(a);
    const memberB = this.members.get(b);
    if (memberA === undefined || memberB === undefined) return;
    this.wire.notify(memberA, memberB, { kind: 'up' }, this.connectMs);
    this.wire.notify(memberB, memberA, { kind: 'up' }, this.connectMs);
  }

  isPartitioned(a: PeerId, b: PeerId): boolean {
    return this.partitions.has(pairKey(a, b));
  }

  /** Sets the one-way latency between `a` and `b`, both ways, ms; applies to messages not yet leaving. */
  setLatency(a: PeerId, b: PeerId, ms: number): void {
    this.latency.set(a, b, ms);
    this.latency.set(b, a, ms);
  }

  /** Changes a live member's link rates, Mbit/s; applies to messages that start leaving or arriving later. */
  setRates(peer: PeerId, rates: Partial<LinkRates>): void {
    const member = this.liveMember(peer);
    const next = { upMbps: rates.upMbps ?? member.rates.upMbps, downMbps: rates.downMbps ?? member.rates.downMbps };
    checkRate('upMbps', next.upMbps);
    checkRate('downMbps', next.downMbps);
    member.rates = next;
  }

  /**
   * Adds a hook on the messages `peer` sends (any incarnation); returns the function that removes
   * it. Hooks run in order; the first verdict other than 'deliver' wins and later hooks are skipped.
   */
  onSend(peer: PeerId, hook: SendHook): () => void {
    const list = this.hooks.get(peer) ?? [];
    this.hooks.set(peer, list);
    const entry: SendHook = (to, bytes) => hook(to, bytes);
    list.push(entry);
    return () => {
      const at = list.indexOf(entry);
      if (at >= 0) list.splice(at, 1);
    };
  }

  /**
   * Crashes `peer` right after its `count`-th message (from now) that `match` accepts has left its
   * uplink; that message and those that left before it are still delivered. Returns a cancel.
   */
  crashAfterSend(peer: PeerId, match: (to: PeerId, bytes: Uint8Array) => boolean, count = 1): () => void {
    if (!Number.isInteger(count) || count < 1) throw new RangeError(`count must be an integer ≥ 1, got ${count}`);
    let seen = 0;
    const remove = this.onSend(peer, (to, bytes) => {
      if (!match(to, bytes) || ++seen < count) return 'deliver';
      remove();
      return 'deliver-then-crash';
    });
    return remove;
  }

  /** The counters of `peer` (a copy), over all its incarnations. */
  stats(peer: PeerId): PeerStats {
    const stats = this.counters.get(peer);
    if (stats === undefined) throw new Error(`${peer} never joined the network`);
    return { ...stats };
  }

  private send(from: SimTransport, to: PeerId, toIncarnation: number, bytes: Uint8Array): Promise<void> {
    const sender = this.liveMember(from.self);
    let verdict: SendVerdict = 'deliver';
    for (const hook of [...(this.hooks.get(from.self) ?? [])]) {
      verdict = hook(to, bytes);
      if (verdict !== 'deliver') break;
    }
    const lost =
      verdict === 'drop' || this.isPartitioned(from.self, to) || this.member(to, toIncarnation) === undefined;
    return this.wire.send(sender, to, toIncarnation, this.copyOnSend ? bytes.slice() : bytes, {
      lost,
      crashAfter: verdict === 'deliver-then-crash',
    });
  }

  private sent(item: MessageItem): void {
    const stats = this.statsOf(item.from);
    stats.bytesSent += item.bytes.byteLength;
    stats.messagesSent++;
    if (item.crashAfter) this.crash(item.from, { inFlight: 'deliver' });
  }

  private deliver(item: Item): void {
    const receiver = this.member(item.to, item.toIncarnation);
    if (receiver === undefined) {
      if (item.kind === 'message') this.statsOf(item.from).messagesLost++;
      return;
    }
    const transport = receiver.transport;
    if (item.kind === 'up') {
      transport.deliverUp(item.from, item.fromIncarnation);
    } else if (item.kind === 'down') {
      if (!transport.sees(item.from, item.fromIncarnation)) return;
      const error = new TransportError('peer-not-up', `${item.from} went down before the message left`);
      this.wire.abandonUplink(receiver, error, item.from);
      transport.deliverDown(item.from, item.fromIncarnation, item.reason);
    } else if (transport.sees(item.from, item.fromIncarnation)) {
      const stats = this.statsOf(item.to);
      stats.bytesReceived += item.bytes.byteLength;
      stats.messagesReceived++;
      transport.deliverMessage(item.from, item.fromIncarnation, item.bytes);
    } else {
      this.statsOf(item.from).messagesLost++;
    }
  }

  private leave(transport: SimTransport): void {
    const member = this.member(transport.self, transport.incarnation);
    if (member === undefined) return;
    this.members.delete(member.peer);
    this.wire.abandonUplink(member, new TransportError('closed', `${member.peer} closed its transport`));
    const reason: PeerDownReason = { code: 'left', message: `${member.peer} left` };
    for (const other of this.members.values()) {
      this.wire.notify(member, other, { kind: 'down', reason }, this.latency.get(member.peer, other.peer));
    }
  }

  /** The live member `peer`, if it is still `incarnation`. */
  private member(peer: PeerId, incarnation: number): Member | undefined {
    const member = this.members.get(peer);
    return member?.incarnation === incarnation ? member : undefined;
  }

  private liveMember(peer: PeerId): Member {
    const member = this.members.get(peer);
    if (member === undefined) throw new Error(`${peer} is not a live member of the network`);
    return member;
  }

  private statsOf(peer: PeerId): PeerStats {
    return this.counters.get(peer) as PeerStats;
  }
}

function pairKey(a: PeerId, b: PeerId): string {
  return a < b ? `${a}\n${b}` : `${b}\n${a}`;
}
