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
 * maxConnectionsPerIp sockets and maxRoomsPerIp rooms, and creates rooms, joins and checks at a
 * bounded rate; a room nobody ever joined expires neverJoinedRoomGraceMs after its host left.
 *
 * No peer may take another's place or connection: a room never forgets an absent
 * member to seat a new one (rooms.ts), a member's key is fixed for its peer id, signals have a
 * byte budget per sender, and frames relayed from other peers are dropped, not queued, once a
 * receiver has half of maxBufferedBytes waiting (signal-connection.ts), so only a socket's failure
 * to read the server's own frames closes it.
 *
 * This file wires the parts and runs each socket's life (admit, heartbeat, frames, close):
 * signal-connection.ts is one socket (its budgets and its outgoing side), signal-frames.ts checks
 * a frame, signal-dispatch.ts acts on it by kind, signal-membership.ts seats sockets in rooms
 * (rooms.ts), and signal-watch.ts serves the watchers.
 */
import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { RejectionCounters } from '@shoal/protocol';
import { CLOSE_CODES, type ClientLimits, type IceServer, SIGNAL_PATH } from '@shoal/signaling';
import { type RawData, WebSocket, WebSocketServer } from 'ws';
import { addressKey, clientAddress, IpLimits } from './ip-limits.ts';
import { RoomKeeper } from './room-keeper.ts';
import type { LoadedRooms, RoomStore } from './room-store.ts';
import { type Room, RoomRegistry } from './rooms.ts';
import { type Log, makeLog, type SignalingLimits, type SignalLogger } from './signal-config.ts';
import { Connection, type ConnectionContext } from './signal-connection.ts';
import { Dispatch } from './signal-dispatch.ts';
import { parseClientFrame } from './signal-frames.ts';
import { Membership } from './signal-membership.ts';
import { WatchHub } from './signal-watch.ts';

interface SignalingOptions {
  limits: SignalingLimits;
  iceServers: IceServer[];
  /** Where rooms are kept as they change, and what it held when the server started (taken back, empty). */
  store: RoomStore;
  loaded: LoadedRooms;
  /** How often at most a room's kept view is written to the store (default VIEW_SAVE_INTERVAL_MS). */
  viewSaveIntervalMs?: number;
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
  /** Rooms taken back from the store at start, and entries of it skipped (unreadable or invalid). */
  restoredRooms: number;
  skippedRooms: number;
  /** Rejected input by reason code. */
  rejections: Record<string, number>;
}

export interface Signaling {
  stats(): SignalingStats;
  /** Stops everything; resolves once the store has every write queued before. */
  close(): Promise<void>;
}

export function attachSignaling(server: Server, options: SignalingOptions): Signaling {
  const parts = wireParts(options);
  const { limits, log, connections, rooms, watch, ipLimits, keeper, counters } = parts;
  const { restoredRooms, skippedRooms } = restore(parts, options.loaded);

  // perMessageDeflate stays off: compressed frames would let 64 KiB inflate to megabytes. ws takes
  // frames up to the larger limit (a host's publish); parseClientFrame holds the others to maxFrameBytes.
  const maxPayload = Math.max(limits.maxFrameBytes, limits.maxPublishBytes);
  const wss = new WebSocketServer({ noServer: true, maxPayload, perMessageDeflate: false });
  wss.on('error', (error) => log('wss-error', { message: error.message }));

  const onUpgrade = (request: IncomingMessage, socket: Duplex, head: Buffer) => {
    socket.on('error', () => socket.destroy());
    if ((request.url ?? '').split('?')[0] !== SIGNAL_PATH) {
      socket.end('HTTP/1.1 404 Not Found\r\nConnection: close\r\n\r\n');
      return;
    }
    wss.handleUpgrade(request, socket, head, (ws) => accept(parts, ws, request));
  };
  server.on('upgrade', onUpgrade);
  const heartbeat = startHeartbeat(parts);

  return {
    stats: () => ({
      connections: connections.size,
      rooms: rooms.size,
      peers: [...rooms.values()].reduce((sum, room) => sum + room.peers.size, 0),
      watchers: watch.count,
      addresses: ipLimits.size,
      viewBytes: [...rooms.values()].reduce((sum, room) => sum + watch.keptBytes(room), 0),
      restoredRooms,
      skippedRooms,
      rejections: counters.byReason(),
    }),
    close: async () => {
      clearInterval(heartbeat);
      server.off('upgrade', onUpgrade);
      for (const conn of connections) conn.socket.terminate();
      rooms.clear();
      wss.close();
      await keeper.flush();
    },
  };
}

/** One server's parts, wired together, and the sockets it has open. */
interface Parts {
  limits: SignalingLimits;
  now: () => number;
  log: Log;
  trustProxy: boolean;
  counters: RejectionCounters;
  connections: Set<Connection>;
  ipLimits: IpLimits;
  keeper: RoomKeeper<Connection>;
  watch: WatchHub<Connection>;
  rooms: RoomRegistry<Connection>;
  membership: Membership;
  dispatch: Dispatch;
  context: ConnectionContext;
  /** The id of the next socket accepted. */
  nextId: number;
}

/** The parts of a server: rooms, watchers, the store's keeper, per-address limits, membership and dispatch. */
function wireParts(options: SignalingOptions): Parts {
  const { limits, iceServers } = options;
  const now = options.now ?? Date.now;
  const log = makeLog(options.logger, now);
  const counters = new RejectionCounters({ now });
  const ipLimits = new IpLimits(limits, now);
  const keeper = new RoomKeeper<Connection>(options.store, log, options.viewSaveIntervalMs);
  const watch = new WatchHub<Connection>({
    limits,
    now,
    log,
    viewChanged: (room) => keeper.viewChanged(room, () => watch.keptJson(room)),
  });
  const rooms = new RoomRegistry<Connection>(
    limits,
    ipLimits,
    (room) => {
      watch.roomClosed(room);
      keeper.roomExpired(room);
      log('room-expired', { room: room.id });
    },
    now,
  );
  const clientLimits: ClientLimits = {
    maxFrameBytes: limits.maxFrameBytes,
    messagesPerSecond: limits.messagesPerSecond,
    messageBurst: limits.messageBurst,
    maxPeersPerRoom: limits.maxPeersPerRoom,
    maxPublishBytes: limits.maxPublishBytes,
  };
  const changed = (room: Room<Connection>) => keeper.roomChanged(room);
  const membership = new Membership(rooms, { iceServers, limits: clientLimits }, log, changed);
  const dispatch = new Dispatch({ limits, rooms, ipLimits, membership, watch, log, changed });
  const context: ConnectionContext = {
    limits,
    now,
    counters,
    log,
    onStalled: (conn) => membership.leave(conn, 'closed'),
  };
  const connections = new Set<Connection>();
  const trustProxy = options.trustProxy ?? false;
  return {
    limits,
    now,
    log,
    trustProxy,
    counters,
    connections,
    ipLimits,
    keeper,
    watch,
    rooms,
    membership,
    dispatch,
    context,
    nextId: 1,
  };
}

/** Every heartbeatIntervalMs: idle sockets closed, the others pinged, stale addresses swept. */
function startHeartbeat({ limits, now, log, connections, membership, ipLimits }: Parts): NodeJS.Timeout {
  const heartbeat = setInterval(() => {
    const t = now();
    for (const conn of connections) {
      if (t - conn.lastSeen > limits.idleTimeoutMs) {
        log('idle-timeout', { conn: conn.id, peer: conn.peerId });
        membership.leave(conn, 'timeout');
        conn.socket.terminate();
      } else if (conn.socket.readyState === WebSocket.OPEN) {
        conn.socket.ping();
      }
    }
    ipLimits.sweep();
  }, limits.heartbeatIntervalMs);
  heartbeat.unref();
  return heartbeat;
}

/** A new socket: admitted under the server's and its address's caps, then given helloTimeoutMs to enter. */
function accept(parts: Parts, socket: WebSocket, request: IncomingMessage): void {
  const { limits, now, log, connections, ipLimits, watch, membership } = parts;
  const address = addressKey(clientAddress(request, parts.trustProxy));
  const conn = new Connection(parts.nextId++, socket, address, parts.context);
  socket.on('error', (error) => log('socket-error', { conn: conn.id, message: error.message }));
  if (connections.size >= limits.maxConnections) {
    conn.reject('server-full', `at most ${limits.maxConnections} connections`);
    conn.closeWith(CLOSE_CODES.tryAgainLater, 'server full');
    return;
  }
  const refused = ipLimits.connect(conn.address);
  if (refused) {
    conn.reject(refused.code, refused.message);
    conn.closeWith(CLOSE_CODES.tryAgainLater, 'too many connections from this address');
    return;
  }
  connections.add(conn);
  log('connect', { conn: conn.id, ip: conn.address });
  conn.helloTimer = setTimeout(() => {
    if (conn.room || watch.isWatching(conn)) return;
    conn.reject('hello-timeout', `create, reclaim, join or watch a room within ${limits.helloTimeoutMs} ms`);
    conn.closeWith(CLOSE_CODES.policy, 'hello timeout');
  }, limits.helloTimeoutMs);
  conn.helloTimer.unref();
  socket.on('pong', () => {
    conn.lastSeen = now();
  });
  socket.on('message', (data, isBinary) => {
    try {
      onFrame(parts, conn, data, isBinary);
    } catch (error) {
      // a bug of ours must not take the server down; the sender hears about it
      log('internal-error', { conn: conn.id, message: (error as Error).message });
      conn.reject('internal', 'the server failed to handle this message');
    }
  });
  socket.on('close', (code) => {
    conn.stopHelloTimer();
    membership.leave(conn, 'closed');
    watch.leave(conn);
    connections.delete(conn);
    ipLimits.disconnect(conn.address);
    log('disconnect', { conn: conn.id, code });
  });
}

/**
 * The rooms the store kept, back in the registry with nobody in them (each expires after its
 * grace unless its people come back), their views back for watchers. A store entry that is not
 * a valid room was skipped by the store; it is logged and counted here.
 */
function restore(
  { log, counters, rooms, watch }: Parts,
  loaded: LoadedRooms,
): { restoredRooms: number; skippedRooms: number } {
  let skippedRooms = loaded.skipped.length;
  for (const { name, reason } of loaded.skipped) {
    log('room-skipped', { file: name, reason });
    counters.record({ from: 'store', reason: 'bad-room-record', detail: `${name}: ${reason}` });
  }
  let restoredRooms = 0;
  for (const { room: saved, view } of loaded.rooms) {
    const room = rooms.restore(saved);
    if (!room) {
      skippedRooms++;
      log('room-skipped', { room: saved.id, reason: 'server full or id taken' });
      continue;
    }
    if (view !== null && !watch.restore(room, view)) log('view-skipped', { room: room.id });
    restoredRooms++;
    log('room-restored', { room: room.id });
  }
  return { restoredRooms, skippedRooms };
}

/** One frame, checked cheapest first: the message budget, then parseClientFrame, then the room rules. */
function onFrame({ limits, now, dispatch }: Parts, conn: Connection, data: RawData, isBinary: boolean): void {
  if (conn.closing) return;
  conn.lastSeen = now();
  if (!conn.admitFrame()) return;
  const frame = parseClientFrame(data, isBinary, limits, conn.hosts);
  if (!frame.ok) {
    conn.reject(frame.code, frame.message, frame.ref);
    return;
  }
  dispatch.handle(conn, frame.message, frame.bytes);
}
