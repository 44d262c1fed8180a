/**
 * A room: who is in it, who hosts it, who watches it, and the three credentials. The host secret
 * proves the host (it reclaims the room after a reconnect); the join token admits members and can
 * be rotated; the watch key admits read-only watchers of the host's published view, for the
 * room's whole life. All are 256-bit random base64url strings; the server keeps only the secret's
 * SHA-256 and compares all three in constant time.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

/** Random base64url: 9 bytes (72 bits) for room and peer ids, 32 bytes for credentials. */
export function randomId(bytes: number): string {
  return randomBytes(bytes).toString('base64url');
}

function digest(text: string): Buffer {
  return createHash('sha256').update(text).digest();
}

/** Constant-time comparison of two strings of any length (by their hashes). */
export function sameSecret(given: string, expectedDigest: Buffer): boolean {
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

  constructor() {
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
