/**
 * One member's end of the simulated network: a Transport (packages/protocol) whose view of the
 * room changes only through what the network delivers to it, in order: `up` and `down` notices
 * and messages. SimNetwork creates these; code under test sees only the Transport interface.
 */
import {
  type PeerDownReason,
  type PeerId,
  type Transport,
  TransportEmitter,
  TransportError,
  type TransportEvent,
  type TransportEvents,
} from '@shoal/protocol';

/** What a SimTransport asks of its network. */
export interface SimLinkLayer {
  /** Queues a message on the sender's uplink; resolves when it has left the uplink. */
  send(from: SimTransport, to: PeerId, toIncarnation: number, bytes: Uint8Array): Promise<void>;
  /** The member closed its transport: it leaves the room. */
  leave(from: SimTransport): void;
}

/** 'open' until `close()` ('closed') or `SimNetwork.crash` ('crashed'); then no event fires. */
export type SimTransportState = 'open' | 'closed' | 'crashed';

export class SimTransport implements Transport {
  private readonly emitter = new TransportEmitter();
  /**
   * The peers this end sees up, each with the incarnation it saw come up: a peer id that crashed
   * and joined again is a new incarnation, and nothing from the old one reaches this end after
   * it has seen the new one come up.
   */
  private readonly view = new Map<PeerId, number>();
  private current: SimTransportState = 'open';

  constructor(
    readonly self: PeerId,
    /** Counts joins across the network: tells this member apart from an earlier one of its id. */
    readonly incarnation: number,
    private readonly links: SimLinkLayer,
    /** Largest message `send` accepts, bytes. */
    private readonly maxMessageBytes: number,
  ) {}

  get state(): SimTransportState {
    return this.current;
  }

  peers(): PeerId[] {
    return [...this.view.keys()];
  }

  send(to: PeerId, bytes: Uint8Array): Promise<void> {
    if (this.current !== 'open') {
      return Promise.reject(new TransportError('closed', `${this.self} cannot send: its transport is ${this.current}`));
    }
    const incarnation = this.view.get(to);
    if (incarnation === undefined) {
      return Promise.reject(new TransportError('peer-not-up', `${this.self} cannot send to ${to}: it is not up`));
    }
    if (bytes.byteLength > this.maxMessageBytes) {
      return Promise.reject(
        new TransportError('too-large', `${bytes.byteLength} bytes exceed the limit of ${this.maxMessageBytes}`),
      );
    }
    return this.links.send(this, to, incarnation, bytes);
  }

  on<E extends TransportEvent>(event: E, listener: TransportEvents[E]): () => void {
    return this.emitter.on(event, listener);
  }

  close(): Promise<void> {
    if (this.current === 'open') {
      this.stop('closed');
      this.links.leave(this);
    }
    return Promise.resolve();
  }

  // The methods below are the network's; code under test has no reason to call them.

  /** Whether this end is open and sees `peer` up as `incarnation`. */
  sees(peer: PeerId, incarnation: number): boolean {
    return this.current === 'open' && this.view.get(peer) === incarnation;
  }

  /** `peer` (as `incarnation`) became reachable; ignored unless it was not up. */
  deliverUp(peer: PeerId, incarnation: number): void {
    if (this.current !== 'open' || this.view.has(peer)) return;
    this.view.set(peer, incarnation);
    this.emitter.emit('peer-up', peer);
  }

  /** `peer` (as `incarnation`) stopped being reachable; ignored unless that incarnation was up. */
  deliverDown(peer: PeerId, incarnation: number, reason: PeerDownReason): void {
    if (!this.sees(peer, incarnation)) return;
    this.view.delete(peer);
    this.emitter.emit('peer-down', peer, reason);
  }

  /** A message from `from` (as `incarnation`); returns false, delivering nothing, unless it is up. */
  deliverMessage(from: PeerId, incarnation: number, bytes: Uint8Array): boolean {
    if (!this.sees(from, incarnation)) return false;
    this.emitter.emit('message', from, bytes);
    return true;
  }

  /** The member's process died: no more events, sends reject. */
  crash(): void {
    if (this.current === 'open') this.stop('crashed');
  }

  private stop(state: SimTransportState): void {
    this.current = state;
    this.view.clear();
    this.emitter.clear();
  }
}
