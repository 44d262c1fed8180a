/**
 * Who sits in which room: the four ways in (a host creates a room or reclaims it with its secret,
 * a member joins with the join token or rejoins as itself with its member secret), the one way out (leave: left, closed, kicked or timed out),
 * and what the others in the room hear of both. A peer's announced key is bound to its peer id
 * and told to everyone in the room with it (joined, reclaimed, peer-joined); a member's stays
 * bound for the room's life (a rejoin must announce it again), the host's while it is present.
 */
import type { PeerKey } from '@shoal/protocol';
import type { BoundKey, ClientLimits, IceServer, PeerLeftReason, ServerMessage } from '@shoal/signaling';
import type { Refusal } from './ip-limits.ts';
import type { Room, RoomRegistry } from './rooms.ts';
import type { Log } from './signal-config.ts';
import type { Connection } from './signal-connection.ts';

/** What every created, reclaimed and joined reply carries besides the room: how to connect, what to respect. */
interface Welcome {
  iceServers: IceServer[];
  limits: ClientLimits;
}

export class Membership {
  constructor(
    private readonly rooms: RoomRegistry<Connection>,
    private readonly welcome: Welcome,
    private readonly log: Log,
    /** A room's record changed (room-keeper.ts writes it to the store). */
    private readonly changed: (room: Room<Connection>) => void,
  ) {}

  /** A new room with `conn` as its host. */
  create(conn: Connection, key: PeerKey | null): void {
    const opened = this.rooms.create(conn.address);
    if (refused(conn, opened, 'create')) return;
    const { room, hostSecret } = opened;
    this.changed(room);
    this.enter(conn, room, room.hostId, key);
    this.log('room-created', { room: room.id, conn: conn.id });
    conn.send({
      kind: 'created',
      roomId: room.id,
      peerId: room.hostId,
      hostSecret,
      joinToken: room.joinToken,
      watchKey: room.watchKey,
      ...this.welcome,
    });
  }

  /** The host back after a reconnect, into its old seat (same peer id), told who is there. */
  reclaim(conn: Connection, roomId: string, secret: string, key: PeerKey | null): void {
    const room = this.rooms.forReclaim(roomId, secret);
    if (refused(conn, room, 'reclaim')) return;
    this.enter(conn, room, room.hostId, key);
    this.log('host-reclaimed', { room: room.id, conn: conn.id });
    conn.send({
      kind: 'reclaimed',
      roomId: room.id,
      peerId: room.hostId,
      joinToken: room.joinToken,
      watchKey: room.watchKey,
      peers: room.othersThan(room.hostId),
      keys: keysOf(room, room.hostId),
      ...this.welcome,
    });
    broadcast(room, { kind: 'peer-joined', peer: room.hostId, key }, conn);
  }

  /** A member with a fresh peer id and its member secret, told who is there (the host's seat may be empty). */
  join(conn: Connection, roomId: string, token: string, key: PeerKey | null): void {
    const room = this.rooms.forJoin(roomId, token, conn.address);
    if (refused(conn, room, 'join')) return;
    const { peerId, memberSecret } = room.admitMember(key);
    this.changed(room);
    this.seatMember(conn, room, peerId, key, memberSecret);
  }

  /** A member back after a reconnect, in its old seat (same peer id) with its same key, told who is there. */
  rejoin(conn: Connection, roomId: string, peerId: string, secret: string, key: PeerKey | null): void {
    const room = this.rooms.forRejoin(roomId, peerId, secret, key);
    if (refused(conn, room, 'rejoin')) return;
    this.seatMember(conn, room, peerId, key, undefined);
  }

  /** The host removed `conn`'s member: it may not rejoin. Then it leaves as kicked. */
  kick(conn: Connection): void {
    const { room, peerId } = conn;
    if (room && peerId) {
      room.forgetMember(peerId, true, this.rooms.remembered);
      this.changed(room);
    }
    this.leave(conn, 'kicked');
  }

  private seatMember(
    conn: Connection,
    room: Room<Connection>,
    peerId: string,
    key: PeerKey | null,
    memberSecret: string | undefined,
  ): void {
    this.enter(conn, room, peerId, key);
    this.log('peer-joined', { room: room.id, peer: peerId, conn: conn.id, rejoin: memberSecret === undefined });
    conn.send({
      kind: 'joined',
      roomId: room.id,
      peerId,
      ...(memberSecret === undefined ? {} : { memberSecret }),
      hostId: room.hostId,
      hostPresent: room.hostPresent,
      peers: room.othersThan(peerId),
      keys: keysOf(room, peerId),
      ...this.welcome,
    });
    broadcast(room, { kind: 'peer-joined', peer: peerId, key }, conn);
  }

  /** Takes `conn` out of its room (idempotent), tells the others, schedules an empty room's end. */
  leave(conn: Connection, reason: PeerLeftReason): void {
    const { room, peerId } = conn;
    if (!room || !peerId) return;
    conn.unseat();
    if (room.peers.get(peerId) !== conn) return;
    room.peers.delete(peerId);
    if (reason === 'left' && peerId !== room.hostId) {
      // a member that said goodbye will not rejoin
      room.forgetMember(peerId, false, this.rooms.remembered);
      this.changed(room);
    }
    this.log('peer-left', { room: room.id, peer: peerId, reason });
    broadcast(room, { kind: 'peer-left', peer: peerId, reason });
    if (room.peers.size === 0) this.rooms.emptied(room);
  }

  /** Seats `conn` in `room` as `peerId`, bound to `key` for as long as it stays. */
  private enter(conn: Connection, room: Room<Connection>, peerId: string, key: PeerKey | null): void {
    this.rooms.occupied(room);
    conn.seat(room, peerId, key);
    room.peers.set(peerId, conn);
  }
}

/** Everyone in `room` but `except` hears `message`. */
function broadcast(room: Room<Connection>, message: ServerMessage, except?: Connection): void {
  for (const member of room.peers.values()) if (member !== except) member.send(message);
}

/** The registry refused `conn` a room: it is told why (the refusal answers its `ref` request). */
function refused<T extends object>(conn: Connection, outcome: T | Refusal, ref: string): outcome is Refusal {
  if (!('code' in outcome)) return false;
  conn.reject(outcome.code, outcome.message, ref);
  return true;
}

/** The keys bound to everyone in `room` but `self` who announced one. */
function keysOf(room: Room<Connection>, self: string): BoundKey[] {
  const keys: BoundKey[] = [];
  for (const [peer, member] of room.peers) if (peer !== self && member.key) keys.push({ peer, key: member.key });
  return keys;
}
