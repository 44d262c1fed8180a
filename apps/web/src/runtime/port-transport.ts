/**
 * The mesh lives on the main thread (RTCPeerConnection does not exist in Web Workers); the swarm
 * member (codec, rounds, engine) lives in the room worker. These two halves join them over a
 * MessagePort-like channel, moving every payload as a transferred ArrayBuffer (no copy on the
 * main thread):
 *
 *   main:   bridgeTransport(mesh, port)   mesh events → port; port sends → mesh.send
 *   worker: new PortTransport(self, port) a Transport whose sends go to the main thread
 *
 * The bridge's wire is the `net` member of RuntimeIn/RuntimeOut (messages.ts).
 *
 * Keys: the signaling client on the main thread announced this peer's key pair and keeps the
 * server's key bindings (protocol identity.ts). The bridge posts the key pair first (a CryptoKey
 * is structured-cloneable, its private half stays non-extractable), then every binding and each
 * change, in order with the mesh's events, so the worker's member knows a peer's key before it
 * hears from that peer. The PortTransport lends both to the Member (KeyedTransport).
 */
import {
  type Identity,
  identityFromKeys,
  type KeyedTransport,
  type PeerDownReason,
  type PeerId,
  type PeerKey,
  PeerKeyRegistry,
  type Transport,
  TransportEmitter,
  TransportError,
  type TransportErrorCode,
  type TransportEvent,
  type TransportEvents,
} from '@shoal/protocol';

/** main → worker */
export type NetIn =
  | { net: 'message'; from: PeerId; bytes: Uint8Array }
  | { net: 'peer-up'; peer: PeerId }
  | { net: 'peer-down'; peer: PeerId; reason: PeerDownReason }
  | { net: 'sent'; id: number; error: { code: TransportErrorCode; message: string } | null }
  /** This peer's key pair (once, before anything else). */
  | { net: 'identity'; key: PeerKey; privateKey: CryptoKey }
  /** The server bound `key` to `peer` (null: it announced none), or forgot it (undefined: it left). */
  | { net: 'peer-key'; peer: PeerId; key: PeerKey | null | undefined };

/** worker → main */
export type NetOut = { net: 'send'; id: number; to: PeerId; bytes: Uint8Array };

/** What both ends need of a MessagePort or a Worker. */
export interface PortLike<In, Out> {
  postMessage(message: Out, transfer: Transferable[]): void;
  addEventListener(type: 'message', listener: (event: MessageEvent<In>) => void): void;
  removeEventListener(type: 'message', listener: (event: MessageEvent<In>) => void): void;
}

/** `bytes` as a buffer of its own that can be transferred (a copy only when it is a view into a larger one). */
export function ownBuffer(bytes: Uint8Array): Uint8Array<ArrayBuffer> {
  const whole = bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength;
  return whole && bytes.buffer instanceof ArrayBuffer ? (bytes as Uint8Array<ArrayBuffer>) : bytes.slice();
}

/** The worker's Transport: sends are posted to the main thread's mesh; its events come back. */
export class PortTransport implements Transport, KeyedTransport {
  /** This peer's key pair, from the main thread's signaling client; null until it comes (or without one). */
  identity: Identity | null = null;
  /** The keys the server bound to the peers, as the main thread forwards them. */
  readonly peerKeys = new PeerKeyRegistry();
  private readonly emitter = new TransportEmitter();
  private readonly up = new Set<PeerId>();
  private readonly pending = new Map<number, { resolve: () => void; reject: (error: Error) => void }>();
  private nextId = 1;
  private closed = false;
  /** Events that came before start(): the member's listeners attach after async set-up. */
  private queue: NetIn[] | null = [];

  constructor(
    readonly self: PeerId,
    private readonly port: PortLike<NetIn, NetOut>,
  ) {}

  /** Feeds one message from the main thread (the worker's router calls this for every `net`). */
  receive(message: NetIn): void {
    if (this.closed) return;
    if (message.net === 'identity') {
      // at once: the member reads it when it first sends
      this.identity = identityFromKeys(message.key, message.privateKey);
      return;
    }
    if (this.queue && message.net !== 'sent') {
      this.queue.push(message);
      return;
    }
    switch (message.net) {
      case 'message':
        if (this.up.has(message.from)) this.emitter.emit('message', message.from, message.bytes);
        return;
      case 'peer-up':
        if (this.up.has(message.peer)) return;
        this.up.add(message.peer);
        this.emitter.emit('peer-up', message.peer);
        return;
      case 'peer-down':
        if (!this.up.delete(message.peer)) return;
        this.emitter.emit('peer-down', message.peer, message.reason);
        return;
      case 'peer-key':
        if (message.key === undefined) this.peerKeys.unbind(message.peer);
        else this.peerKeys.bind(message.peer, message.key);
        return;
      case 'sent': {
        const request = this.pending.get(message.id);
        if (!request) return;
        this.pending.delete(message.id);
        if (message.error) request.reject(new TransportError(message.error.code, message.error.message));
        else request.resolve();
        return;
      }
    }
  }

  /** Delivers the events held so far, and every later one as it comes. */
  start(): void {
    const queued = this.queue ?? [];
    this.queue = null;
    for (const message of queued) this.receive(message);
  }

  peers(): PeerId[] {
    return [...this.up];
  }

  send(to: PeerId, bytes: Uint8Array): Promise<void> {
    if (this.closed) return Promise.reject(new TransportError('closed', 'the transport is closed'));
    if (!this.up.has(to)) return Promise.reject(new TransportError('peer-not-up', `${to} is not up`));
    const id = this.nextId++;
    // A copy the worker owns: callers may send one encoding to several peers, so never detach theirs.
    const copy = bytes.slice();
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.port.postMessage({ net: 'send', id, to, bytes: copy }, [copy.buffer]);
    });
  }

  on<E extends TransportEvent>(event: E, listener: TransportEvents[E]): () => void {
    return this.emitter.on(event, listener);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const request of this.pending.values()) request.reject(new TransportError('closed', 'the transport closed'));
    this.pending.clear();
    this.up.clear();
  }
}

/**
 * Main-thread half: forwards `mesh`'s events to the worker behind `port` and performs the sends
 * it asks for. Returns the function that detaches it.
 */
export function bridgeTransport(mesh: Transport & KeyedTransport, port: PortLike<NetOut | object, NetIn>): () => void {
  if (mesh.identity) {
    port.postMessage({ net: 'identity', key: mesh.identity.key, privateKey: mesh.identity.privateKey }, []);
  }
  const { peerKeys } = mesh;
  for (const [peer, key] of peerKeys?.entries() ?? []) port.postMessage({ net: 'peer-key', peer, key }, []);
  const off = [
    peerKeys?.onChange((peer, key) => port.postMessage({ net: 'peer-key', peer, key }, [])) ?? (() => {}),
    mesh.on('message', (from, bytes) => {
      const own = ownBuffer(bytes);
      port.postMessage({ net: 'message', from, bytes: own }, [own.buffer]);
    }),
    mesh.on('peer-up', (peer) => port.postMessage({ net: 'peer-up', peer }, [])),
    mesh.on('peer-down', (peer, reason) =>
      port.postMessage({ net: 'peer-down', peer, reason: { code: reason.code, message: reason.message } }, []),
    ),
  ];
  const onMessage = (event: MessageEvent<NetOut | object>) => {
    const message = event.data as Partial<NetOut>;
    if (message?.net !== 'send') return;
    const { id, to, bytes } = message as NetOut;
    mesh.send(to, bytes).then(
      () => port.postMessage({ net: 'sent', id, error: null }, []),
      (error: unknown) => {
        const code: TransportErrorCode = error instanceof TransportError ? error.code : 'closed';
        port.postMessage({ net: 'sent', id, error: { code, message: String((error as Error)?.message ?? error) } }, []);
      },
    );
  };
  port.addEventListener('message', onMessage);
  // peers already up when the bridge starts
  for (const peer of mesh.peers()) port.postMessage({ net: 'peer-up', peer }, []);
  return () => {
    for (const unsubscribe of off) unsubscribe();
    port.removeEventListener('message', onMessage);
  };
}
