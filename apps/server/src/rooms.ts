/**
 * The server's rooms (RoomRegistry: how many, who holds them, when an empty one expires) and one
 * room: who is in it, who hosts it, who watches it, and its credentials. The host secret proves
 * the host (it reclaims the room after a reconnect); the join token admits new members and can be
 * rotated; each member gets its own member secret, with which it takes its same peer id again
 * after a reconnect (a rotated token strands nobody who already joined); the watch key admits
 * read-only watchers of the host's published view, for the room's whole life. All are 256-bit
 * random base64url strings. The server keeps only the SHA-256 of the host and member secrets and
 * compares every credential in constant time.
 *
 * A room is what SavedRoom (room-store.ts) records plus who is connected now: a restarted server
 * builds each kept room again from its record, with nobody in it.
 *
 * Membership cannot be churned: a room remembers at most `remembered` members and never
 * forgets an absent one to make room for a new one (the join is refused instead), and joins are
 * paced per address and per room. A member's announced key is bound to its peer id for the room's
 * life: a rejoin with another key is refused ('key-changed').
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { PeerKey } from '@shoal/protocol';
import type { IpLimits, Refusal } from './ip-limits.ts';
import type { SavedRoom } from './room-store.ts';
import { membersRemembered, type SignalingLimits } from './signal-config.ts';
import { TokenBucket } from './token-bucket.ts';

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

/** A key as compared for its peer id: algorithm and public key, or none announced. */
function keyText(key: PeerKey | null): string {
  return key ? `${key.algorithm}:${key.publicKey}` : 'none';
}

export class Room<Member> {
  readonly id: string;
  /** Fixed for the room's life, so members keep addressing the host across its reconnects. */
  readonly hostId: string;
  /** The address key of the client that created it, which holds it until it expires. */
  readonly ownerAddress: string;
  private readonly secretDigest: Buffer;
  private tokenDigest: Buffer;
  joinToken: string;
  readonly watchKey: string;
  private readonly watchKeyDigest: Buffer;
  /** Members that may come back with their member secret, oldest first: peer id → its digest. */
  private readonly memberSecrets: Map<string, Buffer>;
  /** Peer ids the host kicked, oldest first. */
  private readonly kicked: Set<string>;
  /**
   * The key each remembered member announced (keyText), fixed for its peer id, kept with the room
   * (a record from before keys were kept has none: a member's first rejoin binds its key then).
   */
  private readonly memberKeys: Map<string, string>;
  /** Everyone connected, host included while present, by peer id. */
  readonly peers = new Map<string, Member>();
  /** Read-only sockets that receive the host's published views; not members, not in `peers`. */
  readonly watchers = new Set<Member>();
  /** The pending deletion of this room while it is empty. */
  cleanup: ReturnType<typeof setTimeout> | null = null;
  /** Whether a member (not the host, not a watcher) ever joined: a room nobody joined expires sooner. */
  hadMember: boolean;

  /** A new room held by `ownerAddress`, with the host secret that only its creator is told. */
  static open<Member>(ownerAddress: string): { room: Room<Member>; hostSecret: string } {
    const hostSecret = randomId(32);
    const room = new Room<Member>({
      format: 'shoal-signal-room',
      version: 1,
      id: randomId(9),
      hostId: randomId(9),
      ownerAddress,
      hostSecretDigest: digest(hostSecret).toString('hex'),
      joinToken: randomId(32),
      watchKey: randomId(32),
      hadMember: false,
      members: {},
      kicked: [],
    });
    return { room, hostSecret };
  }

  /** A room from its record (a new one, or one a restarted server took back): nobody is in it. */
  constructor(saved: SavedRoom) {
    this.id = saved.id;
    this.hostId = saved.hostId;
    this.ownerAddress = saved.ownerAddress;
    this.secretDigest = Buffer.from(saved.hostSecretDigest, 'hex');
    this.joinToken = saved.joinToken;
    this.tokenDigest = digest(saved.joinToken);
    this.watchKey = saved.watchKey;
    this.watchKeyDigest = digest(saved.watchKey);
    this.hadMember = saved.hadMember;
    this.memberSecrets = new Map(Object.entries(saved.members).map(([peer, hex]) => [peer, Buffer.from(hex, 'hex')]));
    this.kicked = new Set(saved.kicked);
    this.memberKeys = new Map(Object.entries(saved.memberKeys ?? {}));
  }

  /** What a store keeps of it. */
  toSaved(): SavedRoom {
    return {
      format: 'shoal-signal-room',
      version: 1,
      id: this.id,
      hostId: this.hostId,
      ownerAddress: this.ownerAddress,
      hostSecretDigest: this.secretDigest.toString('hex'),
      joinToken: this.joinToken,
      watchKey: this.watchKey,
      hadMember: this.hadMember,
      members: Object.fromEntries([...this.memberSecrets].map(([peer, hash]) => [peer, hash.toString('hex')])),
      kicked: [...this.kicked],
      memberKeys: Object.fromEntries(this.memberKeys),
    };
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

  /** Members it remembers for coming back, present or not. */
  get memberCount(): number {
    return this.memberSecrets.size;
  }

  /**
   * A new member announcing `key`: a fresh peer id, unique in this room, bound to that key, and its
   * member secret (told once, to it). The registry has checked that the room may remember one more.
   */
  admitMember(key: PeerKey | null): { peerId: string; memberSecret: string } {
    let peerId: string;
    do peerId = randomId(9);
    while (peerId === this.hostId || this.peers.has(peerId) || this.memberSecrets.has(peerId));
    const memberSecret = randomId(32);
    this.memberSecrets.set(peerId, digest(memberSecret));
    this.memberKeys.set(peerId, keyText(key));
    this.hadMember = true;
    return { peerId, memberSecret };
  }

  /**
   * Whether `peerId` may take its seat again with `secret`, announcing `key`: the key it joined with
   * (a member whose binding a restart lost binds `key` now). Only the secret's holder learns of a
   * key mismatch.
   */
  checkMember(peerId: string, secret: string, key: PeerKey | null): 'ok' | 'kicked' | 'bad-secret' | 'key-changed' {
    if (this.kicked.has(peerId)) return 'kicked';
    const expected = this.memberSecrets.get(peerId);
    // compared even when the id is unknown, so the time taken tells nothing about which ids exist
    const ok = sameSecret(secret, expected ?? this.secretDigest) && expected !== undefined;
    if (!ok) return 'bad-secret';
    const bound = this.memberKeys.get(peerId);
    if (bound !== undefined && bound !== keyText(key)) return 'key-changed';
    this.memberKeys.set(peerId, keyText(key));
    return 'ok';
  }

  /** `peerId` will not come back: it left for good, or (`kicked`) the host removed it. */
  forgetMember(peerId: string, kicked: boolean, remembered: number): void {
    this.memberSecrets.delete(peerId);
    this.memberKeys.delete(peerId);
    if (!kicked) return;
    this.kicked.add(peerId);
    for (const old of this.kicked) {
      if (this.kicked.size <= remembered) break;
      this.kicked.delete(old);
    }
  }

  /** Ids of everyone present except `self`. */
  othersThan(self: string): string[] {
    return [...this.peers.keys()].filter((id) => id !== self);
  }
}

type RegistryLimits = Pick<
  SignalingLimits,
  | 'maxRooms'
  | 'maxPeersPerRoom'
  | 'emptyRoomGraceMs'
  | 'neverJoinedRoomGraceMs'
  | 'joinsPerMinutePerRoom'
  | 'joinBurstPerRoom'
>;

/**
 * Every room on the server, by id. A room is counted against the address that created it (see
 * ip-limits.ts) until it expires: an empty room lives emptyRoomGraceMs so that its host can come
 * back, or neverJoinedRoomGraceMs if no member ever joined it (most likely abandoned, or one of
 * many created to fill the server).
 */
export class RoomRegistry<Member> {
  private readonly rooms = new Map<string, Room<Member>>();
  /** Joins each room admits (only those its token admits are paced). */
  private readonly joinBuckets = new WeakMap<Room<Member>, TokenBucket>();

  constructor(
    private readonly limits: RegistryLimits,
    private readonly ipLimits: IpLimits,
    /** A room has expired (it is already gone from the registry). */
    private readonly onExpired: (room: Room<Member>) => void,
    private readonly now: () => number = Date.now,
  ) {}

  get size(): number {
    return this.rooms.size;
  }

  /** Members a room remembers for coming back (membersRemembered). */
  get remembered(): number {
    return membersRemembered(this.limits);
  }

  get(id: string): Room<Member> | undefined {
    return this.rooms.get(id);
  }

  values(): IterableIterator<Room<Member>> {
    return this.rooms.values();
  }

  /**
   * A new room held by `address` with its host secret, or why not: the server is full, or the
   * address holds or creates too many.
   */
  create(address: string): { room: Room<Member>; hostSecret: string } | Refusal {
    const { maxRooms } = this.limits;
    if (this.rooms.size >= maxRooms)
      return { code: 'too-many-rooms', message: `this server holds at most ${maxRooms} rooms` };
    const refused = this.ipLimits.admitRoom(address);
    if (refused) return refused;
    const opened = Room.open<Member>(address);
    this.rooms.set(opened.room.id, opened.room);
    return opened;
  }

  /**
   * A room a restarted server took back from its store: empty, so it expires after its grace
   * unless someone comes back. False when the server is full or already holds that id.
   */
  restore(saved: SavedRoom): Room<Member> | null {
    if (this.rooms.size >= this.limits.maxRooms || this.rooms.has(saved.id)) return null;
    const room = new Room<Member>(saved);
    this.rooms.set(room.id, room);
    this.ipLimits.roomRestored(room.ownerAddress);
    this.emptied(room);
    return room;
  }

  /** Room `roomId` for its host coming back with `secret`, or why not. */
  forReclaim(roomId: string, secret: string): Room<Member> | Refusal {
    const room = this.rooms.get(roomId);
    if (!room) return noSuchRoom;
    if (!room.checkSecret(secret)) return { code: 'bad-secret', message: 'wrong host secret' };
    if (room.hostPresent) return { code: 'host-present', message: 'the room already has its host connected' };
    return room;
  }

  /**
   * Room `roomId` for a member from `address` with `token`, or why not, cheapest first: the
   * address's join rate (every attempt spends it, so tokens are not guessed at speed), the room,
   * the token, a free seat (the host's stays free while it is away), room in the room's memory of
   * members, and the room's join rate (spent only by joins it would admit).
   */
  forJoin(roomId: string, token: string, address: string): Room<Member> | Refusal {
    const paced = this.ipLimits.admitJoin(address);
    if (paced) return paced;
    const room = this.rooms.get(roomId);
    if (!room) return noSuchRoom;
    if (!room.checkToken(token)) return { code: 'bad-token', message: 'wrong or rotated join token' };
    const full = this.roomFull(room);
    if (full) return full;
    if (room.memberCount >= this.remembered) {
      const message =
        `this room remembers at most ${this.remembered} members and keeps each one's seat for its return; ` +
        'it takes new members once some leave for good or the host kicks them';
      return { code: 'room-full', message };
    }
    if (!this.joinBucket(room).take()) {
      const message = `this room admits at most ${this.limits.joinsPerMinutePerRoom} joins a minute; try again shortly`;
      return { code: 'join-rate-limited', message };
    }
    return room;
  }

  /**
   * Room `roomId` for member `peerId` coming back with its member secret, or why not: a wrong
   * secret (or an id the room does not know), a kicked member, its id still seated, a full room.
   */
  forRejoin(roomId: string, peerId: string, secret: string, key: PeerKey | null): Room<Member> | Refusal {
    const room = this.rooms.get(roomId);
    if (!room) return noSuchRoom;
    const member = room.checkMember(peerId, secret, key);
    if (member === 'kicked') return { code: 'kicked', message: 'the host removed this member from the room' };
    if (member === 'bad-secret') return { code: 'bad-secret', message: 'wrong member secret for this peer id' };
    if (member === 'key-changed') {
      return {
        code: 'key-changed',
        message: 'a member rejoins with the key it joined with (or none, if it announced none)',
      };
    }
    if (room.peers.has(peerId)) return { code: 'peer-present', message: 'this peer id is connected already' };
    return this.roomFull(room) ?? room;
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

  private joinBucket(room: Room<Member>): TokenBucket {
    let bucket = this.joinBuckets.get(room);
    if (!bucket) {
      const { joinsPerMinutePerRoom, joinBurstPerRoom } = this.limits;
      bucket = new TokenBucket(joinsPerMinutePerRoom / 60, joinBurstPerRoom, this.now);
      this.joinBuckets.set(room, bucket);
    }
    return bucket;
  }

  /** The refusal when `room` has no seat for one more member (the host's seat stays free while it is away). */
  private roomFull(room: Room<Member>): Refusal | null {
    const { maxPeersPerRoom } = this.limits;
    if (room.peers.size + (room.hostPresent ? 0 : 1) < maxPeersPerRoom) return null;
    return { code: 'room-full', message: `a room holds at most ${maxPeersPerRoom} peers` };
  }
}

const noSuchRoom: Refusal = { code: 'no-such-room', message: 'no such room (it may have expired)' };
