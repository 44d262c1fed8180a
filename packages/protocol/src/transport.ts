/**
 * The Transport: how the swarm's coordinator and workers reach each other, and all they know of
 * the network. Implemented by packages/mesh (WebRTC data channels) and by the in-memory transport
 * of packages/swarm (latency, bandwidth and crashes on a virtual clock).
 *
 * Contract (docs/design.md, "Interfaces"):
 * - `self` is this member's peer id, the one other members address it by.
 * - Whole messages in, whole messages out: chunking, reassembly and their checks are the
 *   transport's job. A message is delivered once, intact, or not at all.
 * - Reliable and ordered per pair of peers: messages from A to B arrive in the order A sent
 *   them. Nothing is promised across pairs.
 * - `send` resolves when the transport has accepted the message under backpressure (it may still
 *   be in flight), so a sender that awaits each send never buffers more than the transport
 *   allows. It rejects with a TransportError when the peer is not up or the transport is closed;
 *   a message accepted before the peer went down may be lost with it ('peer-down' says so).
 *   The caller must not modify `bytes` after calling send: the transport may keep or transfer
 *   the buffer.
 * - Events, each listener called synchronously in registration order:
 *   `message` (from, bytes) for a message from a peer that is up, the bytes owned by the
 *   listeners from then on; `peer-up` (peer) when a peer becomes reachable; `peer-down` (peer,
 *   reason) when it stops being reachable. Every `peer-up` is followed by at most one
 *   `peer-down` before the next `peer-up` of that peer.
 * - `close()` leaves: connections are closed, no event fires after it resolves, and later sends
 *   reject. Closing twice is harmless.
 *
 * Listeners are registered with `on(event, listener)`, which returns the function that removes
 * them: typed, no EventTarget, works the same in browsers, Web Workers and Node.
 */

export type PeerId = string;

/** Why a peer went down; `message` is for people, `code` for code and counters. */
export interface PeerDownReason {
  code: 'left' | 'closed' | 'timeout' | 'connection-failed' | 'unreachable' | 'crashed' | 'error';
  message: string;
}

export interface TransportEvents {
  message: (from: PeerId, bytes: Uint8Array) => void;
  'peer-up': (peer: PeerId) => void;
  'peer-down': (peer: PeerId, reason: PeerDownReason) => void;
}

export type TransportEvent = keyof TransportEvents;

export interface Transport {
  readonly self: PeerId;
  /** The peers that are up now. */
  peers(): PeerId[];
  send(to: PeerId, bytes: Uint8Array): Promise<void>;
  /** Adds a listener; returns the function that removes it. */
  on<E extends TransportEvent>(event: E, listener: TransportEvents[E]): () => void;
  close(): Promise<void>;
}

export type TransportErrorCode = 'peer-not-up' | 'closed' | 'too-large';

/** What `send` rejects with. */
export class TransportError extends Error {
  override name = 'TransportError';
  constructor(
    readonly code: TransportErrorCode,
    message: string,
  ) {
    super(message);
  }
}

type Listeners = { [E in TransportEvent]: TransportEvents[E][] };

/**
 * The listener bookkeeping that every Transport needs, so implementations agree on its details:
 * listeners run in registration order over a snapshot (adding or removing one during an event
 * affects the next event, not this one), and a listener that throws does not keep the others
 * from running; its error goes to `onListenerError` (default: rethrown on a microtask, so it
 * still surfaces as an uncaught error instead of vanishing).
 */
export class TransportEmitter {
  private listeners: Listeners = { message: [], 'peer-up': [], 'peer-down': [] };

  constructor(
    private readonly onListenerError: (error: unknown) => void = (error) =>
      queueMicrotask(() => {
        throw error;
      }),
  ) {}

  on<E extends TransportEvent>(event: E, listener: TransportEvents[E]): () => void {
    // a wrapper per registration, so one function added twice is removed one at a time
    const entry = ((...args: Parameters<TransportEvents[E]>) =>
      (listener as (...a: unknown[]) => void)(...args)) as TransportEvents[E];
    (this.listeners[event] as TransportEvents[E][]).push(entry);
    return () => {
      const list = this.listeners[event] as TransportEvents[E][];
      const at = list.indexOf(entry);
      if (at >= 0) list.splice(at, 1);
    };
  }

  emit<E extends TransportEvent>(event: E, ...args: Parameters<TransportEvents[E]>): void {
    for (const listener of [...this.listeners[event]] as ((...a: unknown[]) => void)[]) {
      try {
        listener(...args);
      } catch (error) {
        this.onListenerError(error);
      }
    }
  }

  listenerCount(event: TransportEvent): number {
    return this.listeners[event].length;
  }

  /** Drops every listener (for close()). */
  clear(): void {
    this.listeners = { message: [], 'peer-up': [], 'peer-down': [] };
  }
}
