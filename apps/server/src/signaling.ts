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
import { RoomRegistry } from './rooms.ts';
import { makeLog, type SignalingLimits, type SignalLogger } from './signal-config.ts';
import { Connection, type ConnectionContext } from './signal-connection.ts';
import { Dispatch } from './signal-dispatch.ts';
import { parseClientFrame } from './signal-frames.ts';
import { Membership } from './signal-membership.ts';
import { WatchHub } from './signal-watch.ts';

interface SignalingOptions {
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
  close(): void;
}

export function attachSignaling(server: Server, options: SignalingOptions): Signaling {
  const { limits, iceServers } = options;
  const now = options.now ?? Date.now;
  const log = makeLog(options.logger, now);
  const counters = new RejectionCounters({ now });
  const connections = new Set<Connection>();
  const ipLimits = new IpLimits(limits, now);
  const watch = new WatchHub<Connection>({ limits, now, log });
  const rooms = new RoomRegistry<Connection>(limits, ipLimits, (room) => {
    watch.roomClosed(room);
    log('room-expired', { room: room.id });
  });
  const clientLimits: ClientLimits = {
    maxFrameBytes: limits.maxFrameBytes,
    messagesPerSecond: limits.messagesPerSecond,
    messageBurst: limits.messageBurst,
    maxPeersPerRoom: limits.maxPeersPerRoom,
    maxPublishBytes: limits.maxPublishBytes,
  };
  const membership = new Membership(rooms, { iceServers, limits: clientLimits }, log);
  const dispatch = new Dispatch({ limits, rooms, membership, watch, log });
  const context: ConnectionContext = {
    limits,
    now,
    counters,
    log,
    onStalled: (conn) => membership.leave(conn, 'closed'),
  };
  let nextId = 1;

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
    wss.handleUpgrade(request, socket, head, (ws) => accept(ws, request));
  };
  server.on('upgrade', onUpgrade);

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

  /** A new socket: admitted under the server's and its address's caps, then given helloTimeoutMs to enter. */
  function accept(socket: WebSocket, request: IncomingMessage): void {
    const address = addressKey(clientAddress(request, options.trustProxy ?? false));
    const conn = new Connection(nextId++, socket, address, context);
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
        onFrame(conn, data, isBinary);
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

  /** One frame, checked cheapest first: the message budget, then parseClientFrame, then the room rules. */
  function onFrame(conn: Connection, data: RawData, isBinary: boolean): void {
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

  return {
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
