/**
 * WebSocket signaling at `/signal`: rooms of one host and its members, relaying WebRTC offers,
 * answers and ICE candidates (and small control messages) between members of the same room.
 *
 * Every frame from a stranger passes, in order: the socket's token bucket (cheap drop before any
 * parsing), text-only, a nesting scan, JSON.parse, the zod union, then the room rules. A failure
 * answers `error` with a reason code and is counted; floods and never-joining sockets are closed
 * with 1008, oversized frames by `ws` with 1009. Only a host's `publish` may exceed maxFrameBytes
 * (up to maxPublishBytes); its room's watchers get it (signal-watch.ts). Memory is bounded by
 * maxConnections × (max(maxFrameBytes, maxPublishBytes) + maxBufferedBytes), maxRooms ×
 * maxPeersPerRoom, and maxRooms × max(maxViewHistoryBytes, maxPublishBytes) of kept views.
 *
 * No one client may take those for everyone (ip-limits.ts): one address holds at most
 * maxConnectionsPerIp sockets and maxRoomsPerIp rooms, and creates rooms at a bounded rate; a
 * room nobody ever joined expires neverJoinedRoomGraceMs after its host left.
 */
import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { type PeerKey, RejectionCounters } from '@shoal/protocol';
import {
  type BoundKey,
  CLOSE_CODES,
  type ClientLimits,
  type ClientMessage,
  type IceServer,
  type PeerLeftReason,
  type ServerMessage,
  SIGNAL_PROTOCOL_VERSION,
  type SignalErrorCode,
} from '@shoal/signaling';
import { type RawData, WebSocket, WebSocketServer } from 'ws';
import { addressKey, clientAddress, IpLimits } from './ip-limits.ts';
import { type Room, RoomRegistry } from './rooms.ts';
import { type LogFields, makeLog, type SignalingLimits, type SignalLogger } from './signal-config.ts';
import { parseClientFrame } from './signal-frames.ts';
import { WatchHub } from './signal-watch.ts';
import { TokenBucket } from './token-bucket.ts';

export const SIGNAL_PATH = '/signal';

export interface SignalingOptions {
  limits: SignalingLimits;
  iceServers: IceServer[];
  logger?: SignalLogger;
  now?: () => number;
  /**
   * The server is behind a reverse proxy that appends the client's address to X-Forwarded-For:
   * per-address limits then use that. Off by default, since anyone can send the header.
   */
  trustProxy?: boolean;
}

export interface SignalingStats {
  connections: number;
  rooms: number;
  peers: number;
  /** Sockets watching a room (not counted in peers). */
  watchers: number;
  /** Client addresses accounted for (ip-limits.ts). */
  addresses: number;
  /** Bytes (JSON characters) of room views kept for watchers, all rooms together. */
  viewBytes: number;
  /** Rejected input by reason code. */
  rejections: Record<string, number>;
}

export interface Signaling {
  stats(): SignalingStats;
  readonly counters: RejectionCounters;
  close(): void;
}

interface Connection {
  readonly id: number;
  readonly socket: WebSocket;
  /** Who it counts against (addressKey of its peer address). */
  readonly address: string;
  readonly bucket: TokenBucket;
  room: Room<Connection> | null;
  peerId: string | null;
  /** The public key bound to peerId while in the room; null when the client announced none. */
  key: PeerKey | null;
  relayBucket: TokenBucket | null;
  dropped: number;
  lastDropAt: number;
  lastRateErrorAt: number;
  lastSeen: number;
  closing: boolean;
  helloTimer: ReturnType<typeof setTimeout> | null;
}

export function attachSignaling(server: Server, options: SignalingOptions): Signaling {
  const { limits, iceServers } = options;
  const now = options.now ?? Date.now;
  const log = makeLog(options.logger, now);
  const counters = new RejectionCounters({ now });
  const connections = new Set<Connection>();
  const ipLimits = new IpLimits(limits, now);
  const clientLimits: ClientLimits = {
    maxFrameBytes: limits.maxFrameBytes,
    messagesPerSecond: limits.messagesPerSecond,
    messageBurst: limits.messageBurst,
    maxPeersPerRoom: limits.maxPeersPerRoom,
    maxPublishBytes: limits.maxPublishBytes,
  };
  let nextId = 1;
  const count = (conn: Connection, code: SignalErrorCode, detail: string) =>
    counters.record({ from: who(conn), reason: code, detail });
  const watch = new WatchHub<Connection>({ limits, now, sendText, reject, count, close: closeWith, log });
  const rooms = new RoomRegistry<Connection>(limits, ipLimits, (room) => {
    watch.roomClosed(room);
    log('room-expired', { room: room.id });
  });

  // perMessageDeflate stays off: compressed frames would let 64 KiB inflate to megabytes. ws takes
  // frames up to the larger limit (a host's publish); onFrame holds the others to maxFrameBytes.
  const maxPayload = Math.max(limits.maxFrameBytes, limits.maxPublishBytes);
  const wss = new WebSocketServer({ noServer: true, maxPayload, perMessageDeflate: false });
  wss.on('error', (error) => log('wss-error', { message: error.message }));

  const onUpgrade = (request: IncomingMessage, socket: Duplex, head: Buffer) => {
    socket.on('error', () => socket.destroy());
    if ((request.url ?? '').split('?')[0] !== SIGNAL_PATH) {
      socket.end('HTTP/1.1 404 Not Found\r\nConnection: close\r\n\r\n');
      return;
    }
    wss.handleUpgrade(request, socket, head, (ws) => accept(ws, request));
  };
  server.on('upgrade', onUpgrade);

  const heartbeat = setInterval(() => {
    const t = now();
    for (const conn of connections) {
      if (t - conn.lastSeen > limits.idleTimeoutMs) {
        log('idle-timeout', { conn: conn.id, peer: conn.peerId });
        drop(conn, 'timeout');
        conn.socket.terminate();
      } else if (conn.socket.readyState === WebSocket.OPEN) {
        conn.socket.ping();
      }
    }
    ipLimits.sweep();
  }, limits.heartbeatIntervalMs);
  heartbeat.unref();

  function accept(socket: WebSocket, request: IncomingMessage): void {
    const conn: Connection = {
      id: nextId++,
      socket,
      address: addressKey(clientAddress(request, options.trustProxy ?? false)),
      bucket: new TokenBucket(limits.messagesPerSecond, limits.messageBurst, now),
      room: null,
      peerId: null,
      key: null,
      relayBucket: null,
      dropped: 0,
      lastDropAt: 0,
      lastRateErrorAt: -Infinity,
      lastSeen: now(),
      closing: false,
      helloTimer: null,
    };
    socket.on('error', (error) => log('socket-error', { conn: conn.id, message: error.message }));
    if (connections.size >= limits.maxConnections) {
      reject(conn, 'server-full', `at most ${limits.maxConnections} connections`);
      closeWith(conn, CLOSE_CODES.tryAgainLater, 'server full');
      return;
    }
    const refused = ipLimits.connect(conn.address);
    if (refused) {
      reject(conn, refused.code, refused.message);
      closeWith(conn, CLOSE_CODES.tryAgainLater, 'too many connections from this address');
      return;
    }
    connections.add(conn);
    log('connect', { conn: conn.id, ip: conn.address });
    conn.helloTimer = setTimeout(() => {
      if (conn.room || watch.isWatching(conn)) return;
      reject(conn, 'hello-timeout', `create, reclaim, join or watch a room within ${limits.helloTimeoutMs} ms`);
      closeWith(conn, CLOSE_CODES.policy, 'hello timeout');
    }, limits.helloTimeoutMs);
    conn.helloTimer.unref();
    socket.on('pong', () => {
      conn.lastSeen = now();
    });
    socket.on('message', (data, isBinary) => {
      try {
        onFrame(conn, data, isBinary);
      } catch (error) {
        // a bug of ours must not take the server down; the sender hears about it
        log('internal-error', { conn: conn.id, message: (error as Error).message });
        reject(conn, 'internal', 'the server failed to handle this message');
      }
    });
    socket.on('close', (code) => {
      if (conn.helloTimer) clearTimeout(conn.helloTimer);
      drop(conn, 'closed');
      watch.leave(conn);
      connections.delete(conn);
      ipLimits.disconnect(conn.address);
      log('disconnect', { conn: conn.id, code });
    });
  }

  function onFrame(conn: Connection, data: RawData, isBinary: boolean): void {
    if (conn.closing) return;
    conn.lastSeen = now();
    if (!conn.bucket.take()) {
      onOverBudget(conn);
      return;
    }
    const isHost = conn.room !== null && conn.peerId === conn.room.hostId;
    const frame = parseClientFrame(data, isBinary, limits, isHost);
    if (!frame.ok) {
      reject(conn, frame.code, frame.message, frame.ref);
      return;
    }
    handle(conn, frame.message, frame.bytes);
  }

  /** Drops the frame; answers at most once a second; closes a socket that keeps flooding. */
  function onOverBudget(conn: Connection): void {
    const t = now();
    if (t - conn.lastDropAt > 10_000) conn.dropped = 0; // a flood is continuous drops
    conn.lastDropAt = t;
    conn.dropped++;
    if (conn.dropped > limits.maxDroppedMessages) {
      counters.record({ from: who(conn), reason: 'flood', detail: `${conn.dropped} messages over budget` });
      log('flood', { conn: conn.id, peer: conn.peerId });
      closeWith(conn, CLOSE_CODES.policy, 'message rate exceeded');
      return;
    }
    if (t - conn.lastRateErrorAt >= 1000) {
      conn.lastRateErrorAt = t;
      reject(
        conn,
        'rate-limited',
        `at most ${limits.messagesPerSecond} messages a second (burst ${limits.messageBurst})`,
      );
    } else {
      counters.record({ from: who(conn), reason: 'rate-limited', detail: 'dropped' });
    }
  }

  function handle(conn: Connection, message: ClientMessage, bytes: number): void {
    const { room } = conn;
    switch (message.kind) {
      case 'create':
      case 'reclaim':
      case 'join':
      case 'watch': {
        if (room || watch.isWatching(conn)) {
          reject(conn, 'already-in-room', 'this socket is already in a room or watching one', message.kind);
          return;
        }
        if (message.version !== SIGNAL_PROTOCOL_VERSION.major) {
          const expected = SIGNAL_PROTOCOL_VERSION.major;
          reject(conn, 'version', `signaling version ${message.version}, server speaks ${expected}`, message.kind);
          return;
        }
        if (message.kind === 'create') {
          create(conn, message.key ?? null);
          return;
        }
        if (message.kind === 'reclaim') {
          reclaim(conn, message.roomId, message.hostSecret, message.key ?? null);
          return;
        }
        if (message.kind === 'watch') {
          // a watcher stays outside the room: no peer id, no seat, no signaling
          if (watch.watch(conn, message.roomId, rooms.get(message.roomId), message.key) && conn.helloTimer) {
            clearTimeout(conn.helloTimer);
            conn.helloTimer = null;
          }
          return;
        }
        join(conn, message.roomId, message.token, message.key ?? null);
        return;
      }
      case 'leave':
        if (room) drop(conn, 'left');
        closeWith(conn, CLOSE_CODES.normal, 'left');
        return;
    }
    if (!room || !conn.peerId) {
      reject(conn, 'not-in-room', 'create or join a room first', message.kind);
      return;
    }
    const self = conn.peerId;
    const isHost = self === room.hostId;
    switch (message.kind) {
      case 'signal': {
        const target = message.to === self ? undefined : room.peers.get(message.to);
        if (!target) {
          reject(conn, 'unknown-peer', `no peer ${message.to} in this room`, 'signal');
          return;
        }
        send(target, { kind: 'signal', from: self, data: message.data });
        return;
      }
      case 'relay': {
        if (bytes > limits.maxRelayBytes) {
          reject(conn, 'too-big', `relay frames are at most ${limits.maxRelayBytes} bytes`, 'relay');
          return;
        }
        let targets: Connection[];
        if (isHost) {
          const one = message.to === undefined ? undefined : room.peers.get(message.to);
          if (message.to !== undefined && (!one || message.to === self)) {
            reject(conn, 'unknown-peer', `no member ${message.to} in this room`, 'relay');
            return;
          }
          targets = one ? [one] : [...room.peers.values()].filter((member) => member !== conn);
        } else {
          const host = room.peers.get(room.hostId);
          if (message.to !== undefined && message.to !== room.hostId) {
            reject(conn, 'unknown-peer', 'members relay to the host only', 'relay');
            return;
          }
          if (!host) {
            reject(conn, 'unknown-peer', 'the host is not connected', 'relay');
            return;
          }
          targets = [host];
        }
        if (!conn.relayBucket?.take(Math.max(1, targets.length))) {
          reject(conn, 'relay-budget', 'relay budget spent; send control messages over the mesh', 'relay');
          return;
        }
        for (const target of targets) send(target, { kind: 'relay', from: self, data: message.data });
        return;
      }
      case 'publish':
        if (!isHost) {
          reject(conn, 'not-host', 'only the host publishes the room view', 'publish');
          return;
        }
        watch.publish(conn, room, message.data, bytes);
        return;
      case 'rotate-token':
        if (!isHost) {
          reject(conn, 'not-host', 'only the host rotates the token', 'rotate-token');
          return;
        }
        send(conn, { kind: 'token', joinToken: room.rotateToken() });
        log('token-rotated', { room: room.id });
        return;
      case 'kick': {
        if (!isHost) {
          reject(conn, 'not-host', 'only the host kicks', 'kick');
          return;
        }
        const target = message.peer === self ? undefined : room.peers.get(message.peer);
        if (!target) {
          reject(conn, 'unknown-peer', `no member ${message.peer} in this room`, 'kick');
          return;
        }
        send(target, { kind: 'kicked', reason: message.reason ?? 'kicked by the host' });
        drop(target, 'kicked');
        closeWith(target, CLOSE_CODES.kicked, 'kicked');
        log('kick', { room: room.id, peer: message.peer });
        return;
      }
    }
  }

  function create(conn: Connection, key: PeerKey | null): void {
    const room = rooms.create(conn.address);
    if ('code' in room) {
      reject(conn, room.code, room.message, 'create');
      return;
    }
    enter(conn, room, room.hostId, key);
    log('room-created', { room: room.id, conn: conn.id });
    send(conn, {
      kind: 'created',
      roomId: room.id,
      peerId: room.hostId,
      hostSecret: room.hostSecret,
      joinToken: room.joinToken,
      watchKey: room.watchKey,
      iceServers,
      limits: clientLimits,
    });
  }

  function reclaim(conn: Connection, roomId: string, secret: string, key: PeerKey | null): void {
    const room = rooms.forReclaim(roomId, secret);
    if ('code' in room) {
      reject(conn, room.code, room.message, 'reclaim');
      return;
    }
    enter(conn, room, room.hostId, key);
    log('host-reclaimed', { room: room.id, conn: conn.id });
    send(conn, {
      kind: 'reclaimed',
      roomId: room.id,
      peerId: room.hostId,
      joinToken: room.joinToken,
      watchKey: room.watchKey,
      peers: room.othersThan(room.hostId),
      keys: keysOf(room, room.hostId),
      iceServers,
      limits: clientLimits,
    });
    broadcast(room, { kind: 'peer-joined', peer: room.hostId, key }, conn);
  }

  function join(conn: Connection, roomId: string, token: string, key: PeerKey | null): void {
    const room = rooms.forJoin(roomId, token);
    if ('code' in room) {
      reject(conn, room.code, room.message, 'join');
      return;
    }
    const peerId = room.newPeerId();
    room.hadMember = true;
    enter(conn, room, peerId, key);
    log('peer-joined', { room: room.id, peer: peerId, conn: conn.id });
    send(conn, {
      kind: 'joined',
      roomId: room.id,
      peerId,
      hostId: room.hostId,
      hostPresent: room.hostPresent,
      peers: room.othersThan(peerId),
      keys: keysOf(room, peerId),
      iceServers,
      limits: clientLimits,
    });
    broadcast(room, { kind: 'peer-joined', peer: peerId, key }, conn);
  }

  /** The keys bound to everyone in `room` but `self` who announced one. */
  function keysOf(room: Room<Connection>, self: string): BoundKey[] {
    const keys: BoundKey[] = [];
    for (const [peer, member] of room.peers) if (peer !== self && member.key) keys.push({ peer, key: member.key });
    return keys;
  }

  /** Seats `conn` in `room` as `peerId`, bound to `key` for as long as it stays. */
  function enter(conn: Connection, room: Room<Connection>, peerId: string, key: PeerKey | null): void {
    rooms.occupied(room);
    conn.room = room;
    conn.peerId = peerId;
    conn.key = key;
    const host = peerId === room.hostId;
    conn.relayBucket = host
      ? new TokenBucket(limits.hostRelayPerSecond, limits.hostRelayBurst, now)
      : new TokenBucket(limits.memberRelayPerSecond, limits.memberRelayBurst, now);
    room.peers.set(peerId, conn);
    if (conn.helloTimer) clearTimeout(conn.helloTimer);
    conn.helloTimer = null;
  }

  /** Takes the socket out of its room (idempotent), tells the others, schedules an empty room's end. */
  function drop(conn: Connection, reason: PeerLeftReason): void {
    const { room, peerId } = conn;
    if (!room || !peerId) return;
    conn.room = null;
    conn.peerId = null;
    conn.key = null;
    if (room.peers.get(peerId) !== conn) return;
    room.peers.delete(peerId);
    log('peer-left', { room: room.id, peer: peerId, reason });
    broadcast(room, { kind: 'peer-left', peer: peerId, reason });
    if (room.peers.size === 0) rooms.emptied(room);
  }

  function broadcast(room: Room<Connection>, message: ServerMessage, except?: Connection): void {
    for (const member of room.peers.values()) if (member !== except) send(member, message);
  }

  function send(conn: Connection, message: ServerMessage): void {
    sendText(conn, JSON.stringify(message));
  }

  /** A frame already encoded (a view sent to every watcher is stringified once). */
  function sendText(conn: Connection, text: string): void {
    if (conn.closing || conn.socket.readyState !== WebSocket.OPEN) return;
    if (conn.socket.bufferedAmount > limits.maxBufferedBytes) {
      // a reader that does not drain would make us queue without bound
      counters.record({
        from: who(conn),
        reason: 'backpressure',
        detail: `${conn.socket.bufferedAmount} bytes queued`,
      });
      log('backpressure', { conn: conn.id, peer: conn.peerId, queued: conn.socket.bufferedAmount });
      drop(conn, 'closed');
      closeWith(conn, CLOSE_CODES.policy, 'not reading');
      conn.socket.terminate();
      return;
    }
    conn.socket.send(text);
  }

  function reject(conn: Connection, code: SignalErrorCode, message: string, ref?: string): void {
    counters.record({ from: who(conn), reason: code, detail: message });
    const fields: LogFields = { conn: conn.id, peer: conn.peerId, code, ref };
    log('rejected', fields);
    send(conn, ref === undefined ? { kind: 'error', code, message } : { kind: 'error', code, message, ref });
  }

  function closeWith(conn: Connection, code: number, reason: string): void {
    if (conn.closing) return;
    conn.closing = true;
    conn.socket.close(code, reason);
  }

  function who(conn: Connection): string {
    return conn.peerId ?? `conn-${conn.id}`;
  }

  return {
    counters,
    stats: () => ({
      connections: connections.size,
      rooms: rooms.size,
      peers: [...rooms.values()].reduce((sum, room) => sum + room.peers.size, 0),
      watchers: watch.count,
      addresses: ipLimits.size,
      viewBytes: [...rooms.values()].reduce((sum, room) => sum + watch.keptBytes(room), 0),
      rejections: counters.byReason(),
    }),
    close: () => {
      clearInterval(heartbeat);
      server.off('upgrade', onUpgrade);
      for (const conn of connections) conn.socket.terminate();
      rooms.clear();
      wss.close();
    },
  };
}
