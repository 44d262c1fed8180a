/**
 * The server's rooms (RoomRegistry: how many, who holds them, when an empty one expires) and one
 * room: who is in it, who hosts it, who watches it, and the three credentials. The host secret
 * proves the host (it reclaims the room after a reconnect); the join token admits members and can
 * be rotated; the watch key admits read-only watchers of the host's published view, for the
 * room's whole life. All are 256-bit random base64url strings; the server keeps only the secret's
 * SHA-256 and compares all three in constant time.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { IpLimits, Refusal } from './ip-limits.ts';
import type { SignalingLimits } from './signal-config.ts';

/** Random base64url: 9 bytes (72 bits) for room and peer ids, 32 bytes for credentials. */
function randomId(bytes: number): string {
  return randomBytes(bytes).toString('base64url');
}

function digest(text: string): Buffer {
  return createHash('sha256').update(text).digest();
}

/** Constant-time comparison of two strings of any length (by their hashes). */
function sameSecret(given: string, expectedDigest: Buffer): boolean {
  return timingSafeEqual(digest(given), expectedDigest);
}

export class Room<Member> {
  readonly id = randomId(9);
  /** Fixed for the room's life, so members keep addressing the host across its reconnects. */
  readonly hostId = randomId(9);
  readonly hostSecret = randomId(32);
  private readonly secretDigest = digest(this.hostSecret);
  private tokenDigest: Buffer;
  joinToken: string;
  readonly watchKey = randomId(32);
  private readonly watchKeyDigest = digest(this.watchKey);
  /** Everyone connected, host included while present, by peer id. */
  readonly peers = new Map<string, Member>();
  /** Read-only sockets that receive the host's published views; not members, not in `peers`. */
  readonly watchers = new Set<Member>();
  /** The pending deletion of this room while it is empty. */
  cleanup: ReturnType<typeof setTimeout> | null = null;
  /** Whether a member (not the host, not a watcher) ever joined: a room nobody joined expires sooner. */
  hadMember = false;

  /** `ownerAddress`: the address key of the client that created it, which holds it until it expires. */
  constructor(readonly ownerAddress: string) {
    this.joinToken = randomId(32);
    this.tokenDigest = digest(this.joinToken);
  }

  get hostPresent(): boolean {
    return this.peers.has(this.hostId);
  }

  rotateToken(): string {
    this.joinToken = randomId(32);
    this.tokenDigest = digest(this.joinToken);
    return this.joinToken;
  }

  checkToken(token: string): boolean {
    return sameSecret(token, this.tokenDigest);
  }

  checkSecret(secret: string): boolean {
    return sameSecret(secret, this.secretDigest);
  }

  checkWatchKey(key: string): boolean {
    return sameSecret(key, this.watchKeyDigest);
  }

  /** A fresh member id, unique in this room. */
  newPeerId(): string {
    for (;;) {
      const id = randomId(9);
      if (id !== this.hostId && !this.peers.has(id)) return id;
    }
  }

  /** Ids of everyone present except `self`. */
  othersThan(self: string): string[] {
    return [...this.peers.keys()].filter((id) => id !== self);
  }
}

type RegistryLimits = Pick<
  SignalingLimits,
  'maxRooms' | 'maxPeersPerRoom' | 'emptyRoomGraceMs' | 'neverJoinedRoomGraceMs'
>;

/**
 * Every room on the server, by id. A room is counted against the address that created it (see
 * ip-limits.ts) until it expires: an empty room lives emptyRoomGraceMs so that its host can come
 * back, or neverJoinedRoomGraceMs if no member ever joined it (most likely abandoned, or one of
 * many created to fill the server).
 */
export class RoomRegistry<Member> {
  private readonly rooms = new Map<string, Room<Member>>();

  constructor(
    private readonly limits: RegistryLimits,
    private readonly ipLimits: IpLimits,
    /** A room has expired (it is already gone from the registry). */
    private readonly onExpired: (room: Room<Member>) => void,
  ) {}

  get size(): number {
    return this.rooms.size;
  }

  get(id: string): Room<Member> | undefined {
    return this.rooms.get(id);
  }

  values(): IterableIterator<Room<Member>> {
    return this.rooms.values();
  }

  /** A new room held by `address`, or why not: the server is full, or the address holds or creates too many. */
  create(address: string): Room<Member> | Refusal {
    const { maxRooms } = this.limits;
    if (this.rooms.size >= maxRooms)
      return { code: 'too-many-rooms', message: `this server holds at most ${maxRooms} rooms` };
    const refused = this.ipLimits.admitRoom(address);
    if (refused) return refused;
    const room = new Room<Member>(address);
    this.rooms.set(room.id, room);
    return room;
  }

  /** Room `roomId` for its host coming back with `secret`, or why not. */
  forReclaim(roomId: string, secret: string): Room<Member> | Refusal {
    const room = this.rooms.get(roomId);
    if (!room) return { code: 'no-such-room', message: 'no such room (it may have expired)' };
    if (!room.checkSecret(secret)) return { code: 'bad-secret', message: 'wrong host secret' };
    if (room.hostPresent) return { code: 'host-present', message: 'the room already has its host connected' };
    return room;
  }

  /** Room `roomId` for a member with `token`, or why not (the host's seat stays free while it is away). */
  forJoin(roomId: string, token: string): Room<Member> | Refusal {
    const room = this.rooms.get(roomId);
    const { maxPeersPerRoom } = this.limits;
    if (!room) return { code: 'no-such-room', message: 'no such room (it may have expired)' };
    if (!room.checkToken(token)) return { code: 'bad-token', message: 'wrong or rotated join token' };
    if (room.peers.size + (room.hostPresent ? 0 : 1) >= maxPeersPerRoom) {
      return { code: 'room-full', message: `a room holds at most ${maxPeersPerRoom} peers` };
    }
    return room;
  }

  /** Someone entered `room`: it no longer expires. */
  occupied(room: Room<Member>): void {
    if (room.cleanup) clearTimeout(room.cleanup);
    room.cleanup = null;
  }

  /** `room` is empty now: it expires after its grace period unless someone enters it. */
  emptied(room: Room<Member>): void {
    if (this.rooms.get(room.id) !== room) return;
    const { emptyRoomGraceMs, neverJoinedRoomGraceMs } = this.limits;
    const graceMs = room.hadMember ? emptyRoomGraceMs : Math.min(emptyRoomGraceMs, neverJoinedRoomGraceMs);
    this.occupied(room); // one pending expiry at most
    room.cleanup = setTimeout(() => {
      if (room.peers.size > 0) return;
      this.rooms.delete(room.id);
      this.ipLimits.roomEnded(room.ownerAddress);
      this.onExpired(room);
    }, graceMs);
    room.cleanup.unref();
  }

  /** Every room gone at once, without expiry callbacks (the server is closing). */
  clear(): void {
    for (const room of this.rooms.values()) this.occupied(room);
    this.rooms.clear();
  }
}
