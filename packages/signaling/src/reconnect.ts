/**
 * ReconnectingSignal: a room's signaling that outlives its socket. It wraps the SignalClient that
 * entered the room and, when that socket closes (the server restarted, the network dropped), opens
 * a new one with exponential backoff and jitter (0.5 s doubling to 15 s) and enters the same room
 * as the same peer again: a host reclaims with its secret, a member rejoins with its member
 * secret, a watcher watches with the key. Every page and command that sits in a room uses it.
 *
 *   const client = await SignalClient.connect(url, WebSocket, { identity });
 *   const joined = await client.join(roomId, token);
 *   const signal = new ReconnectingSignal(client, { url, WebSocketImpl: WebSocket, entry: memberEntry(joined) });
 *   signal.onState((state) => show(state));   // connected | reconnecting (attempt, next try) | gave-up | closed
 *   connectRoomMesh(signal, joined, joined.peers);   // the mesh keeps its channels across sockets
 *
 * It is a SignalChannel for the mesh: events of every socket it has had reach the same handlers,
 * and one PeerKeyRegistry is shared by them all, so the mesh and the swarm Member built on it
 * never notice the swap. Peer-to-peer channels do not need the server, so training goes on with
 * the peers already connected; only new connections wait for the socket.
 *
 * A refusal that cannot heal ends it ('gave-up'): the room is gone (no-such-room: the server
 * forgot it, or it expired), the credential is wrong (bad-secret, bad-key, bad-token), the member
 * was kicked or announced another key (key-changed), another major version. Anything else (cannot
 * connect, server full, the old socket's seat not yet free: host-present, peer-present, a join
 * paced: join-rate-limited) is tried again.
 *
 * Joining anew: a member whose entry carries the join token (`memberEntry(joined, token)`) and
 * whose member secret the server refuses (bad-secret: the server lost it, as a store written before
 * the member joined would) joins again with the token on the same socket, as a new member with a
 * new peer id, unless the token was rotated (then bad-token ends it). It emits `joined-anew` before
 * `reentered`, and from then on comes back as the new member. A caller that passes the token must
 * rebuild whatever it keyed by its old peer id (its mesh, its swarm member) on `joined-anew`;
 * without the token, bad-secret ends it as before.
 */
import type { PeerKeyRegistry, RoomViewUpdate } from '@shoal/protocol';
import { SignalClient, type SignalClientEvents, SignalError, type WebSocketConstructor } from './client.ts';
import { CLOSE_CODES, type ServerMessageOf, type SignalErrorCode } from './messages.ts';

/** How a client takes its seat again on a new socket. */
export type RoomEntry =
  | { role: 'host'; roomId: string; hostSecret: string }
  /** `joinToken`: to join anew with when the server refuses the member secret (see the header). */
  | { role: 'member'; roomId: string; peerId: string; memberSecret: string; joinToken?: string }
  | { role: 'watcher'; roomId: string; key: string };

/**
 * A member's entry from its first `joined`; null from an older server that gives no member secret.
 * With `joinToken` (the token it joined with), it joins anew if the server no longer knows its secret.
 */
export function memberEntry(joined: ServerMessageOf<'joined'>, joinToken?: string): RoomEntry | null {
  if (!joined.memberSecret) return null;
  const entry = {
    role: 'member' as const,
    roomId: joined.roomId,
    peerId: joined.peerId,
    memberSecret: joined.memberSecret,
  };
  return joinToken === undefined ? entry : { ...entry, joinToken };
}

export type ReconnectState =
  | { kind: 'connected' }
  /** The socket is gone; attempt `attempt` (1, 2, …) starts in `nextTryMs` (0 while it is under way). */
  | { kind: 'reconnecting'; attempt: number; nextTryMs: number; lastError: string | null }
  /** A refusal that cannot heal (or no way back in): nothing more is tried. */
  | { kind: 'gave-up'; error: SignalError }
  /** Closed by its owner. */
  | { kind: 'closed' };

/** The reply to each re-entry. */
export type Reentry = ServerMessageOf<'reclaimed'> | ServerMessageOf<'joined'> | ServerMessageOf<'watching'>;

export interface ReconnectingEvents extends SignalClientEvents {
  /** Back in the room on a new socket: the reply tells who is there now (a watcher: the kept view). */
  reentered: (reply: Reentry) => void;
  /**
   * The server refused the member secret and the join token admitted this client again: it is a
   * new member now, `reply.peerId` its new id (emitted before `reentered`).
   */
  'joined-anew': (reply: ServerMessageOf<'joined'>) => void;
}

/** Backoff between attempts: `initialMs` doubling to `maxMs`, each delay scaled by a random 0.5–1 (jitter). */
export const RECONNECT_BACKOFF = { initialMs: 500, maxMs: 15_000 } as const;

export interface ReconnectOptions {
  url: string;
  WebSocketImpl: WebSocketConstructor;
  /** How to enter again; null: there is no way back in (the socket's close ends it). */
  entry: RoomEntry | null;
  backoff?: { initialMs: number; maxMs: number };
  /** [0, 1): the jitter's source. */
  random?: () => number;
}

/** Refusals that no later attempt can change. */
const FINAL: ReadonlySet<SignalErrorCode | 'closed' | 'protocol'> = new Set([
  'no-such-room',
  'bad-secret',
  'bad-key',
  'bad-token',
  'kicked',
  'key-changed',
  'version',
  'schema',
  'protocol',
]);

/** The delay before attempt `attempt` (1, 2, …). */
export function backoffDelay(
  attempt: number,
  backoff: { initialMs: number; maxMs: number } = RECONNECT_BACKOFF,
  random = Math.random,
): number {
  const exponential = Math.min(backoff.maxMs, backoff.initialMs * 2 ** (attempt - 1));
  return Math.round(exponential * (0.5 + random() / 2));
}

const FORWARDED = ['signal', 'relay', 'peer-joined', 'peer-left', 'kicked', 'view', 'error'] as const;

export class ReconnectingSignal {
  private current: SignalClient;
  private currentState: ReconnectState = { kind: 'connected' };
  private readonly listeners = new Map<keyof ReconnectingEvents, Set<(message: never) => void>>();
  private readonly stateListeners = new Set<(state: ReconnectState) => void>();
  private detach: (() => void)[] = [];
  private timer: ReturnType<typeof setTimeout> | null = null;

  /** How it enters again: options.entry, until it joins anew (then its new member's). */
  private entry: RoomEntry | null;

  constructor(
    client: SignalClient,
    private readonly options: ReconnectOptions,
  ) {
    this.current = client;
    this.entry = options.entry;
    this.attach(client);
  }

  /** The socket in use now (a new one after each reconnect). */
  get client(): SignalClient {
    return this.current;
  }

  get state(): ReconnectState {
    return this.currentState;
  }

  get identity() {
    return this.current.identity;
  }

  /** One registry for every socket: the mesh and the swarm Member hold on to it. */
  get peerKeys(): PeerKeyRegistry {
    return this.current.peerKeys;
  }

  get peerId(): string | null {
    return this.current.peerId;
  }

  get roomId(): string | null {
    return this.current.roomId;
  }

  /** Calls `handler` with every later state; returns the unsubscribe. */
  onState(handler: (state: ReconnectState) => void): () => void {
    this.stateListeners.add(handler);
    return () => this.stateListeners.delete(handler);
  }

  on<E extends keyof ReconnectingEvents>(event: E, handler: ReconnectingEvents[E]): () => void {
    const set = this.listeners.get(event) ?? new Set();
    this.listeners.set(event, set);
    set.add(handler as (message: never) => void);
    return () => set.delete(handler as (message: never) => void);
  }

  // While reconnecting, these go nowhere (as on a closed SignalClient): the mesh redials later.
  signal(to: string, data: unknown): void {
    this.current.signal(to, data);
  }

  relay(data: unknown, to?: string): void {
    this.current.relay(data, to);
  }

  publish(update: RoomViewUpdate): void {
    this.current.publish(update);
  }

  kick(peer: string, reason?: string): void {
    this.current.kick(peer, reason);
  }

  rotateToken(): Promise<string> {
    return this.current.rotateToken();
  }

  /** Leaves the room for good (members are told) and closes. */
  leave(): void {
    this.current.leave();
    this.close();
  }

  /** Closes the socket and stops reconnecting; idempotent. */
  close(): void {
    if (this.currentState.kind === 'closed' || this.currentState.kind === 'gave-up') return;
    this.stop();
    this.current.close();
    this.setState({ kind: 'closed' });
    this.emit('close', { code: CLOSE_CODES.normal, reason: 'closed' });
  }

  private attach(client: SignalClient): void {
    this.detach = FORWARDED.map((event) => client.on(event, ((message: never) => this.emit(event, message)) as never));
    this.detach.push(client.on('close', (event) => this.lost(event)));
  }

  private lost(event: { code: number; reason: string }): void {
    for (const off of this.detach) off();
    this.detach = [];
    if (this.currentState.kind !== 'connected') return; // closed on purpose
    if (event.code === CLOSE_CODES.kicked || event.code === CLOSE_CODES.roomClosed || !this.entry) {
      const why =
        event.code === CLOSE_CODES.kicked
          ? 'kicked'
          : event.code === CLOSE_CODES.roomClosed
            ? 'no-such-room'
            : 'closed';
      this.giveUp(new SignalError(why, event.reason || `closed (${event.code})`));
      return;
    }
    this.schedule(1, `the connection closed (${event.code})`);
  }

  private schedule(attempt: number, lastError: string | null): void {
    const { backoff = RECONNECT_BACKOFF, random = Math.random } = this.options;
    const delay = backoffDelay(attempt, backoff, random);
    this.setState({ kind: 'reconnecting', attempt, nextTryMs: delay, lastError });
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.attempt(attempt, lastError);
    }, delay);
  }

  private async attempt(attempt: number, lastError: string | null): Promise<void> {
    const { url, WebSocketImpl } = this.options;
    const { entry } = this;
    if (!entry || this.currentState.kind !== 'reconnecting') return;
    this.setState({ kind: 'reconnecting', attempt, nextTryMs: 0, lastError });
    let client: SignalClient | null = null;
    try {
      client = await SignalClient.connect(url, WebSocketImpl, {
        identity: this.current.identity,
        peerKeys: this.current.peerKeys,
      });
      const { reply, anew } = await enter(client, entry);
      if (this.currentState.kind !== 'reconnecting') {
        client.close(); // closed while this attempt was under way
        return;
      }
      this.current = client;
      this.attach(client);
      if (anew) this.entry = memberEntry(anew, entry.role === 'member' ? entry.joinToken : undefined);
      this.setState({ kind: 'connected' });
      if (anew) this.emit('joined-anew', anew);
      this.emit('reentered', reply);
    } catch (error) {
      client?.close();
      if (this.currentState.kind !== 'reconnecting') return;
      const refusal = error instanceof SignalError ? error : new SignalError('closed', String(error));
      if (FINAL.has(refusal.code)) this.giveUp(refusal);
      else this.schedule(attempt + 1, refusal.message);
    }
  }

  private giveUp(error: SignalError): void {
    this.stop();
    this.setState({ kind: 'gave-up', error });
    this.emit('close', { code: CLOSE_CODES.normal, reason: error.message });
  }

  private stop(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    for (const off of this.detach) off();
    this.detach = [];
  }

  private setState(state: ReconnectState): void {
    this.currentState = state;
    for (const handler of this.stateListeners) handler(state);
  }

  private emit<E extends keyof ReconnectingEvents>(event: E, message: Parameters<ReconnectingEvents[E]>[0]): void {
    for (const handler of this.listeners.get(event) ?? []) (handler as (message: unknown) => void)(message);
  }
}

/** Enters with `entry` on `client`; `anew`: the member joined anew with its token (a new peer id). */
async function enter(
  client: SignalClient,
  entry: RoomEntry,
): Promise<{ reply: Reentry; anew?: ServerMessageOf<'joined'> }> {
  switch (entry.role) {
    case 'host':
      return { reply: await client.reclaim(entry.roomId, entry.hostSecret) };
    case 'member':
      try {
        return { reply: await client.rejoin(entry.roomId, entry.peerId, entry.memberSecret) };
      } catch (error) {
        const lost = error instanceof SignalError && error.code === 'bad-secret';
        if (!lost || entry.joinToken === undefined) throw error;
        const joined = await client.join(entry.roomId, entry.joinToken);
        return { reply: joined, anew: joined };
      }
    case 'watcher':
      return { reply: await client.watch(entry.roomId, entry.key) };
  }
}
