/**
 * SignalClient: a small typed client for a Shoal server's signaling socket (SIGNAL_PATH), the one
 * the web app's room mesh, `shoal host` and `shoal worker` all use. It imports nothing from Node
 * or the DOM and takes the WebSocket constructor as a parameter: the browser's `WebSocket`, or
 * `WebSocket` from the `ws` package in Node; both have `onopen`/`onmessage`/`onclose` and string
 * `data` for text frames. The messages it speaks are in messages.ts.
 *
 *   const client = await SignalClient.connect(signalUrl(serverUrl), WebSocket);
 *   const room = await client.create();          // or client.join(roomId, token)
 *   client.on('signal', ({ from, data }) => peer(from).signal(data));
 *   client.signal(peerId, offer);
 *
 * A host publishes its room view with `publish(update)`; a watch link's page calls
 * `watch(roomId, key)` (the room's latest view and history) and then hears every later publish as
 * a `view` event.
 *
 * Replies from the server are validated with the same schemas the server uses. Requests
 * (create, reclaim, join, watch, check, rotate-token) resolve with their reply, or reject with a
 * SignalError carrying the server's reason code.
 *
 * Identity: a client made with an `identity` (@shoal/protocol createIdentity) announces its public
 * key when it creates, reclaims or joins a room, and keeps in `peerKeys` the keys the server bound
 * to the others (from joined, reclaimed, peer-joined, peer-left), each before the event that
 * announces the peer is emitted; the room mesh lends both to the swarm Member that verifies.
 */
import { type Identity, PeerKeyRegistry, type RoomViewUpdate } from '@shoal/protocol';
import {
  type ServerMessage,
  type ServerMessageOf,
  SIGNAL_PATH,
  SIGNAL_PROTOCOL_VERSION,
  type SignalErrorCode,
  serverMessageSchema,
} from './messages.ts';

/** WebSocket.OPEN, the same in browsers and in `ws`. */
const OPEN = 1;

/** A handler checked bivariantly (as methods are), so `ws`'s and the DOM's event types both fit. */
type Handler<E> = { bivarianceHack(event: E): void }['bivarianceHack'];

/** What the client needs of a WebSocket: the browser's and `ws`'s both fit. */
export interface WebSocketLike {
  readonly readyState: number;
  send(data: string): void;
  close(code?: number, reason?: string): void;
  onopen: Handler<unknown> | null;
  onmessage: Handler<{ data: unknown }> | null;
  onclose: Handler<{ code: number; reason: string }> | null;
  onerror: Handler<unknown> | null;
}
export type WebSocketConstructor = new (url: string) => WebSocketLike;

/** `http://host:port` (or ws://) → `ws://host:port/signal`; https → wss. */
export function signalUrl(serverUrl: string): string {
  const url = new URL(serverUrl);
  url.protocol = url.protocol === 'https:' || url.protocol === 'wss:' ? 'wss:' : 'ws:';
  url.pathname = SIGNAL_PATH;
  url.search = '';
  return url.toString();
}

/**
 * The room view a server keeps for watch links (the latest view with its point history), read
 * once on `watcher`, which is closed afterwards: how a host that comes back (a reloaded
 * dashboard, `shoal host --resume`) takes its charts up again. Null when nothing was published.
 */
export async function readKeptView(watcher: SignalClient, roomId: string, key: string): Promise<RoomViewUpdate | null> {
  try {
    return (await watcher.watch(roomId, key)).view ?? null;
  } finally {
    watcher.close();
  }
}

export class SignalError extends Error {
  constructor(
    readonly code: SignalErrorCode | 'closed' | 'protocol',
    message: string,
  ) {
    super(`${code}: ${message}`);
    this.name = 'SignalError';
  }
}

export interface SignalClientEvents {
  signal: (message: ServerMessageOf<'signal'>) => void;
  relay: (message: ServerMessageOf<'relay'>) => void;
  'peer-joined': (message: ServerMessageOf<'peer-joined'>) => void;
  'peer-left': (message: ServerMessageOf<'peer-left'>) => void;
  kicked: (message: ServerMessageOf<'kicked'>) => void;
  /** A watcher: the host published a new view (with the points since its previous one). */
  view: (message: ServerMessageOf<'view'>) => void;
  /** An error that answers no pending request (a refused signal, a rate limit). */
  error: (message: ServerMessageOf<'error'>) => void;
  close: (event: { code: number; reason: string }) => void;
}

type Reply = 'created' | 'reclaimed' | 'joined' | 'watching' | 'token' | 'checked';
/** The request each reply answers (`joined` answers a rejoin too: request() is told so). */
const REQUEST_FOR: Record<Reply, string> = {
  created: 'create',
  reclaimed: 'reclaim',
  joined: 'join',
  watching: 'watch',
  token: 'rotate-token',
  checked: 'check',
};

interface Pending {
  /** The request's kind: the `ref` of an error that refuses it. */
  kind: string;
  resolve: (message: ServerMessage) => void;
  reject: (error: Error) => void;
}

export class SignalClient {
  private readonly listeners = new Map<keyof SignalClientEvents, Set<(message: never) => void>>();
  private readonly pending = new Map<string, Pending>();
  /** This client's peer id once it is in a room. */
  peerId: string | null = null;
  roomId: string | null = null;
  private constructor(
    private readonly socket: WebSocketLike,
    /** The key pair this client announces (and its member signs with); null: none, as older clients. */
    readonly identity: Identity | null,
    /** The keys the server bound to the other peers of the room, as it told them. */
    readonly peerKeys: PeerKeyRegistry,
  ) {
    socket.onmessage = (event) => this.receive(event.data);
    socket.onclose = (event) => {
      for (const request of this.pending.values()) request.reject(new SignalError('closed', `closed (${event.code})`));
      this.pending.clear();
      this.emit('close', { code: event.code, reason: event.reason });
    };
  }

  /**
   * Opens the socket; rejects if it cannot connect. `peerKeys`: a registry to keep the bindings in
   * (a reconnecting client's new socket shares its predecessor's); default a new one.
   */
  static connect(
    url: string,
    WebSocketImpl: WebSocketConstructor,
    options: { identity?: Identity | null; peerKeys?: PeerKeyRegistry } = {},
  ): Promise<SignalClient> {
    return new Promise((resolve, reject) => {
      const socket = new WebSocketImpl(url);
      socket.onerror = () => reject(new SignalError('closed', `cannot connect to ${url}`));
      socket.onclose = (event) => reject(new SignalError('closed', `closed (${event.code}) before opening`));
      socket.onopen = () => {
        socket.onerror = null;
        resolve(new SignalClient(socket, options.identity ?? null, options.peerKeys ?? new PeerKeyRegistry()));
      };
    });
  }

  get open(): boolean {
    return this.socket.readyState === OPEN;
  }

  async create(): Promise<ServerMessageOf<'created'>> {
    const reply = await this.request('created', {
      kind: 'create',
      version: SIGNAL_PROTOCOL_VERSION.major,
      ...this.announcedKey(),
    });
    this.enter(reply.roomId, reply.peerId);
    return reply;
  }

  /** Takes a room back as its host after a reconnect. */
  async reclaim(roomId: string, hostSecret: string): Promise<ServerMessageOf<'reclaimed'>> {
    const version = SIGNAL_PROTOCOL_VERSION.major;
    const reply = await this.request('reclaimed', {
      kind: 'reclaim',
      version,
      roomId,
      hostSecret,
      ...this.announcedKey(),
    });
    this.enter(reply.roomId, reply.peerId);
    return reply;
  }

  async join(roomId: string, token: string): Promise<ServerMessageOf<'joined'>> {
    const version = SIGNAL_PROTOCOL_VERSION.major;
    const reply = await this.request('joined', { kind: 'join', version, roomId, token, ...this.announcedKey() });
    this.enter(reply.roomId, reply.peerId);
    return reply;
  }

  /**
   * A member back after a reconnect (or a server restart), in its old seat: the same peer id, with
   * the member secret its first `joined` gave. Refused with 'bad-secret', 'kicked', 'peer-present',
   * 'room-full' or 'no-such-room'.
   */
  async rejoin(roomId: string, peerId: string, memberSecret: string): Promise<ServerMessageOf<'joined'>> {
    const version = SIGNAL_PROTOCOL_VERSION.major;
    const message = { kind: 'rejoin', version, roomId, peerId, memberSecret, ...this.announcedKey() };
    const reply = await this.request('joined', message, 'rejoin');
    this.enter(reply.roomId, reply.peerId);
    return reply;
  }

  /**
   * Read-only: watches a room with its watch key (this socket enters no room). Resolves with the
   * room's latest view and every point the server kept (null before the host's first publish).
   */
  async watch(roomId: string, key: string): Promise<ServerMessageOf<'watching'>> {
    return this.request('watching', { kind: 'watch', version: SIGNAL_PROTOCOL_VERSION.major, roomId, key });
  }

  /**
   * Whether room `roomId` exists and `token` admits to it, before a person consents to join: the
   * host's presence, the run's status and what it trains (null before the host's first publish).
   * Takes no seat. Rejects with a SignalError whose code is 'no-such-room' or 'bad-token', as join.
   */
  async check(roomId: string, token: string): Promise<Omit<ServerMessageOf<'checked'>, 'kind'>> {
    const { kind: _, ...answer } = await this.request('checked', {
      kind: 'check',
      version: SIGNAL_PROTOCOL_VERSION.major,
      roomId,
      token,
    });
    return answer;
  }

  /** Host only: the room view for the room's watchers (a RoomViewUpdate of @shoal/protocol). */
  publish(update: RoomViewUpdate): void {
    this.send({ kind: 'publish', data: update });
  }

  /** Host only: a new join token; the old one stops admitting. */
  async rotateToken(): Promise<string> {
    return (await this.request('token', { kind: 'rotate-token' })).joinToken;
  }

  /** An SDP or ICE payload for one peer of this room. */
  signal(to: string, data: unknown): void {
    this.send({ kind: 'signal', to, data });
  }

  /** A small control message: a member's goes to the host; the host's to one member, or all. */
  relay(data: unknown, to?: string): void {
    this.send(to === undefined ? { kind: 'relay', data } : { kind: 'relay', to, data });
  }

  kick(peer: string, reason?: string): void {
    this.send(reason === undefined ? { kind: 'kick', peer } : { kind: 'kick', peer, reason });
  }

  leave(): void {
    this.send({ kind: 'leave' });
  }

  close(): void {
    this.socket.close(1000, 'bye');
  }

  on<E extends keyof SignalClientEvents>(event: E, handler: SignalClientEvents[E]): () => void {
    const set = this.listeners.get(event) ?? new Set();
    this.listeners.set(event, set);
    set.add(handler as (message: never) => void);
    return () => set.delete(handler as (message: never) => void);
  }

  private enter(roomId: string, peerId: string): void {
    this.roomId = roomId;
    this.peerId = peerId;
  }

  private announcedKey(): { key?: Identity['key'] } {
    return this.identity ? { key: this.identity.key } : {};
  }

  /**
   * The bindings a joined or reclaimed reply tells: every peer listed, with its key or null (none
   * announced). An older server tells no keys: nothing is bound, and members fall back on hellos.
   */
  private bindPeers(reply: ServerMessageOf<'joined'> | ServerMessageOf<'reclaimed'>): void {
    if (!reply.keys) return;
    const keys = new Map(reply.keys.map(({ peer, key }) => [peer, key]));
    for (const peer of reply.peers) this.peerKeys.bind(peer, keys.get(peer) ?? null);
  }

  /** Sends `message` and waits for `reply`; an error whose ref is `kind` rejects it. */
  private request<K extends Reply>(reply: K, message: object, kind = REQUEST_FOR[reply]): Promise<ServerMessageOf<K>> {
    if (this.pending.has(reply)) return Promise.reject(new SignalError('protocol', `a ${kind} is already pending`));
    return new Promise((resolve, reject) => {
      this.pending.set(reply, { kind, resolve: resolve as (message: ServerMessage) => void, reject });
      this.send(message);
    });
  }

  private send(message: object): void {
    if (this.open) this.socket.send(JSON.stringify(message));
  }

  private receive(data: unknown): void {
    let parsed: unknown;
    try {
      parsed = JSON.parse(typeof data === 'string' ? data : String(data));
    } catch {
      return;
    }
    const result = serverMessageSchema.safeParse(parsed);
    if (!result.success) return; // a newer server's kind, or garbage: nothing to act on
    const message = result.data;
    switch (message.kind) {
      case 'reclaimed':
      case 'joined':
        this.bindPeers(message);
        this.settle(message.kind, (request) => request.resolve(message));
        return;
      case 'created':
      case 'watching':
      case 'token':
      case 'checked':
        this.settle(message.kind, (request) => request.resolve(message));
        return;
      case 'peer-joined':
        // a peer id the server gives again (the host coming back) may come with another key
        if (message.key === undefined) this.peerKeys.unbind(message.peer);
        else this.peerKeys.bind(message.peer, message.key);
        this.emit('peer-joined', message);
        return;
      case 'peer-left':
        this.peerKeys.unbind(message.peer);
        this.emit('peer-left', message);
        return;
      case 'error': {
        const error = new SignalError(message.code, message.message);
        const reply = message.ref === undefined ? undefined : this.replyTo(message.ref);
        if (reply && this.settle(reply, (request) => request.reject(error))) return;
        this.emit('error', message);
        return;
      }
      case 'kicked':
        this.peerId = null;
        this.roomId = null;
        this.emit('kicked', message);
        return;
      default:
        this.emit(message.kind, message as never);
        return;
    }
  }

  /** The pending reply that a refusal of request `kind` answers. */
  private replyTo(kind: string): string | undefined {
    for (const [reply, request] of this.pending) if (request.kind === kind) return reply;
    return undefined;
  }

  private settle(reply: string, action: (request: Pending) => void): boolean {
    const request = this.pending.get(reply);
    if (!request) return false;
    this.pending.delete(reply);
    action(request);
    return true;
  }

  private emit<E extends keyof SignalClientEvents>(event: E, message: Parameters<SignalClientEvents[E]>[0]): void {
    for (const handler of this.listeners.get(event) ?? []) (handler as (message: unknown) => void)(message);
  }
}
