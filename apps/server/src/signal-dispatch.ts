/**
 * What the server does with one checked message (signal-frames.ts parsed it), by kind. Outside a
 * room a socket may send one hello — create, reclaim, join, rejoin or watch, at the server's major version
 * — or leave, and may `check` a room (exists? does the token admit?) within its address's check
 * budget. In a room: signal (to any peer, within the sender's byte budget), relay (member to host,
 * host to one member or all, within the relay budget), and the host's own: publish, rotate-token,
 * kick. A signal or relay to a receiver that is not reading is dropped and its sender told
 * ('receiver-busy'); the receiver keeps its socket. Anything else is refused with an `error` whose
 * ref is the kind, and changes nothing.
 */
import { CLOSE_CODES, type ClientMessage, SIGNAL_PROTOCOL_VERSION } from '@shoal/signaling';
import type { IpLimits } from './ip-limits.ts';
import type { Room, RoomRegistry } from './rooms.ts';
import type { Log, SignalingLimits } from './signal-config.ts';
import type { Connection } from './signal-connection.ts';
import type { Membership } from './signal-membership.ts';
import type { WatchHub } from './signal-watch.ts';

type Message<K extends ClientMessage['kind']> = Extract<ClientMessage, { kind: K }>;
type Hello = Message<'create' | 'reclaim' | 'join' | 'rejoin' | 'watch'>;

interface DispatchContext {
  limits: Pick<SignalingLimits, 'maxRelayBytes' | 'signalBytesPerSecond' | 'signalBurstBytes'>;
  rooms: RoomRegistry<Connection>;
  ipLimits: IpLimits;
  membership: Membership;
  watch: WatchHub<Connection>;
  log: Log;
  /** A room's record changed (room-keeper.ts writes it to the store). */
  changed: (room: Room<Connection>) => void;
}

export class Dispatch {
  constructor(private readonly context: DispatchContext) {}

  /** `message` from `conn`, `bytes` long as it came (relay and publish have their own size limits). */
  handle(conn: Connection, message: ClientMessage, bytes: number): void {
    switch (message.kind) {
      case 'create':
      case 'reclaim':
      case 'join':
      case 'rejoin':
      case 'watch':
        this.hello(conn, message);
        return;
      case 'check':
        this.check(conn, message);
        return;
      case 'leave':
        if (conn.room) this.context.membership.leave(conn, 'left');
        conn.closeWith(CLOSE_CODES.normal, 'left');
        return;
    }
    const { room, peerId: self } = conn;
    if (!room || !self) {
      conn.reject('not-in-room', 'create or join a room first', message.kind);
      return;
    }
    switch (message.kind) {
      case 'signal':
        this.signal(conn, room, self, message, bytes);
        return;
      case 'relay':
        this.relay(conn, room, self, message, bytes);
        return;
      case 'publish':
        if (conn.hosts) this.context.watch.publish(conn, room, message.data, bytes);
        else conn.reject('not-host', 'only the host publishes the room view', 'publish');
        return;
      case 'rotate-token':
        if (!conn.hosts) {
          conn.reject('not-host', 'only the host rotates the token', 'rotate-token');
          return;
        }
        conn.send({ kind: 'token', joinToken: room.rotateToken() });
        this.context.changed(room);
        this.context.log('token-rotated', { room: room.id });
        return;
      case 'kick':
        this.kick(conn, room, self, message);
        return;
    }
  }

  /** The socket's way into a room (or to watching one): only once, only at our major version. */
  private hello(conn: Connection, message: Hello): void {
    const { membership, watch, rooms } = this.context;
    if (conn.room || watch.isWatching(conn)) {
      conn.reject('already-in-room', 'this socket is already in a room or watching one', message.kind);
      return;
    }
    if (!sameMajor(conn, message)) return;
    switch (message.kind) {
      case 'create':
        membership.create(conn, message.key ?? null);
        return;
      case 'reclaim':
        membership.reclaim(conn, message.roomId, message.hostSecret, message.key ?? null);
        return;
      case 'join':
        membership.join(conn, message.roomId, message.token, message.key ?? null);
        return;
      case 'rejoin':
        membership.rejoin(conn, message.roomId, message.peerId, message.memberSecret, message.key ?? null);
        return;
      case 'watch':
        // a watcher stays outside the room: no peer id, no seat, no signaling
        if (watch.watch(conn, message.roomId, rooms.get(message.roomId), message.key)) conn.stopHelloTimer();
        return;
    }
  }

  /**
   * Whether a room exists and the token admits, and what it is, for a join page before consent.
   * Seats nothing; a wrong token learns only 'bad-token', as a join would. Paced per address.
   */
  private check(conn: Connection, message: Message<'check'>): void {
    const { rooms, watch, ipLimits } = this.context;
    if (!sameMajor(conn, message)) return;
    const paced = ipLimits.admitCheck(conn.address);
    if (paced) {
      conn.reject(paced.code, paced.message, 'check');
      return;
    }
    const room = rooms.get(message.roomId);
    if (!room) {
      conn.reject('no-such-room', 'no such room (it may have expired)', 'check');
      return;
    }
    if (!room.checkToken(message.token)) {
      conn.reject('bad-token', 'wrong or rotated join token', 'check');
      return;
    }
    const { status, about } = watch.summary(room);
    conn.send({ kind: 'checked', roomId: room.id, hostPresent: room.hostPresent, status, about });
  }

  /**
   * An SDP or ICE payload to one other peer of the room, stamped with the sender's id, within the
   * sender's byte budget; dropped (the sender told 'receiver-busy') when the receiver is not reading.
   */
  private signal(
    conn: Connection,
    room: Room<Connection>,
    self: string,
    message: Message<'signal'>,
    bytes: number,
  ): void {
    const target = message.to === self ? undefined : room.peers.get(message.to);
    if (!target) {
      conn.reject('unknown-peer', `no peer ${message.to} in this room`, 'signal');
      return;
    }
    if (!conn.paySignal(bytes)) {
      const { signalBytesPerSecond, signalBurstBytes } = this.context.limits;
      const message = `signals are at most ${signalBytesPerSecond} bytes a second (burst ${signalBurstBytes}); dropped`;
      conn.notice('signal-budget', message, 'signal');
      return;
    }
    if (!target.deliver({ kind: 'signal', from: self, data: message.data })) busy(conn, message.to, 'signal');
  }

  /**
   * A small control message through the server: a member's to the host, the host's to one member
   * or to all. Each delivery costs the sender one token of its relay budget.
   */
  private relay(
    conn: Connection,
    room: Room<Connection>,
    self: string,
    message: Message<'relay'>,
    bytes: number,
  ): void {
    const { maxRelayBytes } = this.context.limits;
    if (bytes > maxRelayBytes) {
      conn.reject('too-big', `relay frames are at most ${maxRelayBytes} bytes`, 'relay');
      return;
    }
    let targets: Connection[];
    if (conn.hosts) {
      const one = message.to === undefined ? undefined : room.peers.get(message.to);
      if (message.to !== undefined && (!one || message.to === self)) {
        conn.reject('unknown-peer', `no member ${message.to} in this room`, 'relay');
        return;
      }
      targets = one ? [one] : [...room.peers.values()].filter((member) => member !== conn);
    } else {
      const host = room.peers.get(room.hostId);
      if (message.to !== undefined && message.to !== room.hostId) {
        conn.reject('unknown-peer', 'members relay to the host only', 'relay');
        return;
      }
      if (!host) {
        conn.reject('unknown-peer', 'the host is not connected', 'relay');
        return;
      }
      targets = [host];
    }
    if (!conn.relayBucket?.take(Math.max(1, targets.length))) {
      conn.reject('relay-budget', 'relay budget spent; send control messages over the mesh', 'relay');
      return;
    }
    for (const target of targets) {
      if (!target.deliver({ kind: 'relay', from: self, data: message.data })) busy(conn, target.who, 'relay');
    }
  }

  /** The host removes a member: told why, taken out of the room, its socket closed with 4001. */
  private kick(conn: Connection, room: Room<Connection>, self: string, message: Message<'kick'>): void {
    if (!conn.hosts) {
      conn.reject('not-host', 'only the host kicks', 'kick');
      return;
    }
    const target = message.peer === self ? undefined : room.peers.get(message.peer);
    if (!target) {
      conn.reject('unknown-peer', `no member ${message.peer} in this room`, 'kick');
      return;
    }
    target.send({ kind: 'kicked', reason: message.reason ?? 'kicked by the host' });
    this.context.membership.kick(target);
    target.closeWith(CLOSE_CODES.kicked, 'kicked');
    this.context.log('kick', { room: room.id, peer: message.peer });
  }
}

/** A frame from `conn` to `to` was dropped because `to` is not reading: `conn` is told, `to` keeps its socket. */
function busy(conn: Connection, to: string, ref: 'signal' | 'relay'): void {
  conn.notice('receiver-busy', `${to} is not reading (too much queued for it): ${ref} dropped`, ref);
}

/** A hello or check at another major version is refused (ref: its kind). */
function sameMajor(conn: Connection, message: { kind: string; version: number }): boolean {
  const expected = SIGNAL_PROTOCOL_VERSION.major;
  if (message.version === expected) return true;
  conn.reject('version', `signaling version ${message.version}, server speaks ${expected}`, message.kind);
  return false;
}
