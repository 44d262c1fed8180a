/**
 * Per-address accounting, so that one client cannot take what the server holds for everyone:
 * the sockets an address has open, the rooms it created and still holds, and the rate at which it
 * creates more, joins rooms (wrong tokens included) and checks them. Addresses are the socket's peer address (X-Forwarded-For only behind a proxy the
 * operator vouches for), and an IPv6 /64 counts as one address, since one machine usually holds
 * a whole /64.
 */
import type { IncomingMessage } from 'node:http';
import { isIP } from 'node:net';
import type { SignalErrorCode } from '@shoal/signaling';
import type { SignalingLimits } from './signal-config.ts';
import { TokenBucket } from './token-bucket.ts';

/**
 * Why a socket, a room or a request was refused (here, by address; rooms.ts, by room): its reason
 * code and what to tell the client.
 */
export interface Refusal {
  code: SignalErrorCode;
  message: string;
}

type IpLimitSettings = Pick<
  SignalingLimits,
  | 'maxConnectionsPerIp'
  | 'maxRoomsPerIp'
  | 'roomCreatesPerMinutePerIp'
  | 'roomCreateBurstPerIp'
  | 'joinsPerMinutePerIp'
  | 'joinBurstPerIp'
  | 'checksPerMinutePerIp'
  | 'checkBurstPerIp'
>;

/**
 * The address a request came from. Behind a reverse proxy every socket comes from the proxy, so
 * with `trustProxy` the last X-Forwarded-For entry (the one the proxy appended) is taken; the
 * entries before it are whatever the client claimed, and are never read.
 */
export function clientAddress(request: IncomingMessage, trustProxy: boolean): string {
  const socketAddress = request.socket.remoteAddress ?? 'unknown';
  if (!trustProxy) return socketAddress;
  const header = request.headers['x-forwarded-for'];
  const forwarded = (Array.isArray(header) ? header.join(',') : (header ?? '')).split(',').at(-1)?.trim() ?? '';
  return isIP(forwarded) ? forwarded : socketAddress;
}

/** What one client is accounted as: IPv4 as is (IPv4-mapped IPv6 too), IPv6 by its /64 prefix. */
export function addressKey(address: string): string {
  const bare = address.split('%')[0] ?? address; // no zone id (fe80::1%eth0)
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(bare);
  if (mapped?.[1]) return mapped[1];
  if (isIP(bare) !== 6) return bare;
  return `${ipv6Groups(bare).slice(0, 4).join(':')}::/64`;
}

/** The eight 16-bit groups of an IPv6 address, in lowercase hex without leading zeros. */
function ipv6Groups(address: string): string[] {
  let text = address;
  const v4Tail = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text); // 64:ff9b::192.0.2.1: two groups
  if (v4Tail) {
    const [a, b, c, d] = v4Tail.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, v4Tail.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head = '', tail] = text.split('::');
  const headGroups = head ? head.split(':') : [];
  const tailGroups = tail ? tail.split(':') : [];
  const zeros = tail === undefined ? [] : Array(8 - headGroups.length - tailGroups.length).fill('0');
  return [...headGroups, ...zeros, ...tailGroups].map((group) => Number.parseInt(group, 16).toString(16));
}

interface AddressUse {
  connections: number;
  rooms: number;
  /** Room creations; kept after the address goes quiet until it has refilled, so reconnecting gives no fresh burst. */
  creates: TokenBucket;
  /** Join attempts, admitted or not (kept the same way). */
  joins: TokenBucket;
  /** Checks, answered or not (kept the same way). */
  checks: TokenBucket;
}

export class IpLimits {
  private readonly byAddress = new Map<string, AddressUse>();

  constructor(
    private readonly limits: IpLimitSettings,
    private readonly now: () => number,
  ) {}

  /** Addresses with an open socket, a room, or a room-creation budget not yet refilled. */
  get size(): number {
    return this.byAddress.size;
  }

  /** A socket from `address` opens: counted and null, or the refusal (nothing counted). */
  connect(address: string): Refusal | null {
    const use = this.use(address);
    if (use.connections >= this.limits.maxConnectionsPerIp) {
      const message = `at most ${this.limits.maxConnectionsPerIp} connections from one address`;
      return { code: 'too-many-connections-per-ip', message };
    }
    use.connections++;
    return null;
  }

  /** A socket that connect() admitted has closed. */
  disconnect(address: string): void {
    const use = this.byAddress.get(address);
    if (!use) return;
    use.connections--;
    this.forgetIfIdle(address, use);
  }

  /** A `create` from `address`: counted as a held room and null, or the refusal (nothing counted). */
  admitRoom(address: string): Refusal | null {
    const use = this.use(address);
    const { maxRoomsPerIp, roomCreatesPerMinutePerIp } = this.limits;
    if (use.rooms >= maxRoomsPerIp) {
      const message = `one address holds at most ${maxRoomsPerIp} rooms; a room expires once empty`;
      return { code: 'too-many-rooms-per-ip', message };
    }
    if (!use.creates.take()) {
      return {
        code: 'room-rate-limited',
        message: `one address creates at most ${roomCreatesPerMinutePerIp} rooms a minute`,
      };
    }
    use.rooms++;
    return null;
  }

  /** A `join` from `address`, before its room or token is looked at: null, or the refusal. */
  admitJoin(address: string): Refusal | null {
    if (this.use(address).joins.take()) return null;
    const message = `one address joins rooms at most ${this.limits.joinsPerMinutePerIp} times a minute; try again shortly`;
    return { code: 'join-rate-limited', message };
  }

  /** A `check` from `address`: null, or the refusal. */
  admitCheck(address: string): Refusal | null {
    if (this.use(address).checks.take()) return null;
    const message = `one address checks rooms at most ${this.limits.checksPerMinutePerIp} times a minute; try again shortly`;
    return { code: 'check-rate-limited', message };
  }

  /** A room a restarted server took back from its store: held by `address` again, without a creation. */
  roomRestored(address: string): void {
    this.use(address).rooms++;
  }

  /** A room that admitRoom() or roomRestored() counted has expired. */
  roomEnded(address: string): void {
    const use = this.byAddress.get(address);
    if (!use) return;
    use.rooms--;
    this.forgetIfIdle(address, use);
  }

  /** Forgets quiet addresses whose creation budget has refilled (call now and then). */
  sweep(): void {
    for (const [address, use] of this.byAddress) this.forgetIfIdle(address, use);
  }

  private use(address: string): AddressUse {
    let use = this.byAddress.get(address);
    if (!use) {
      const { limits, now } = this;
      use = {
        connections: 0,
        rooms: 0,
        creates: new TokenBucket(limits.roomCreatesPerMinutePerIp / 60, limits.roomCreateBurstPerIp, now),
        joins: new TokenBucket(limits.joinsPerMinutePerIp / 60, limits.joinBurstPerIp, now),
        checks: new TokenBucket(limits.checksPerMinutePerIp / 60, limits.checkBurstPerIp, now),
      };
      this.byAddress.set(address, use);
    }
    return use;
  }

  private forgetIfIdle(address: string, use: AddressUse): void {
    const refilled = use.creates.full && use.joins.full && use.checks.full;
    if (use.connections <= 0 && use.rooms <= 0 && refilled) this.byAddress.delete(address);
  }
}
