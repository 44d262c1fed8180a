/**
 * Every bound the signaling server holds a stranger to, with its default and why, plus the ICE
 * servers it hands out and its structured logger. All of it is configurable through
 * startServer's options; ICE servers also through the SHOAL_ICE_SERVERS environment variable.
 */

import { type IceServer, iceServerSchema } from '@shoal/signaling';
import { z } from 'zod';

export interface SignalingLimits {
  /** Bytes of one WebSocket frame; larger ones close the socket with 1009. 64 KiB. */
  maxFrameBytes: number;
  /** Nesting of a message's JSON, checked before parsing. 32 (the deepest real message nests 4 + SDP/ICE objects). */
  maxJsonDepth: number;
  /**
   * Messages a socket may send per second, and its burst. 50/s with a burst of 200: a member
   * joining a room of 50 opens up to 49 connections, each an offer or answer plus a few trickled
   * ICE candidates (about 4 frames per peer), all in the first second.
   */
  messagesPerSecond: number;
  messageBurst: number;
  /** Messages dropped over budget (each answered once a second with 'rate-limited') before the socket is closed with 1008. 100. */
  maxDroppedMessages: number;
  /**
   * Relay deliveries by the host: a broadcast to n members costs n. 500/s, burst 1000: ten
   * broadcasts a second to a room of 50, twenty at once. Control traffic only; parameters go
   * peer to peer over the mesh, never through the server.
   */
  hostRelayPerSecond: number;
  hostRelayBurst: number;
  /** Relay messages by a member (to the host only). 10/s, burst 20. */
  memberRelayPerSecond: number;
  memberRelayBurst: number;
  /** Bytes of one relay frame: control messages are small. 16 KiB. */
  maxRelayBytes: number;
  /** Sockets in a room, host included. 64: rooms of 50 with headroom. */
  maxPeersPerRoom: number;
  /** Rooms on this server, empty ones in their grace period included. 1000. */
  maxRooms: number;
  /** Open sockets on this server; more are closed with 1013. 4096. */
  maxConnections: number;
  /** A socket must create, reclaim or join a room within this; else 1008. 10 s. */
  helloTimeoutMs: number;
  /** Ping every socket this often. 15 s. */
  heartbeatIntervalMs: number;
  /** A socket with no pong and no message for this long is terminated. 35 s (two missed pings). */
  idleTimeoutMs: number;
  /** An empty room lives this long, so its host can reconnect with the secret. 60 s. */
  emptyRoomGraceMs: number;
  /**
   * Bytes queued to a socket that does not drain. Frames other peers sent it (signal, relay) are
   * dropped once half of it is queued ('receiver-busy' to their sender); beyond all of it, which
   * only the server's own frames to it can reach, the socket is closed with 1008. 1 MiB.
   */
  maxBufferedBytes: number;
  /**
   * Bytes of a host's `publish` frame (its room view), the one frame allowed over maxFrameBytes.
   * 256 KiB: a view of 64 peers, 120 rounds and a few hundred chart points fits several times.
   */
  maxPublishBytes: number;
  /** Publishes per second by a host, and their burst. 4/s, burst 8 (hosts publish every 2 s). */
  publishesPerSecond: number;
  publishBurst: number;
  /** Read-only watchers of one room; they count toward maxConnections too. 64. */
  maxWatchersPerRoom: number;
  /**
   * Bytes (JSON characters) a room keeps of its view for watchers that come later: the latest
   * tables plus the chart points; beyond it the older points are thinned further. Kept as JSON
   * text, not parsed objects, so this is what it costs. 1 MiB, so kept views cost at most
   * maxRooms × max(this, maxPublishBytes).
   */
  maxViewHistoryBytes: number;
  /**
   * Bytes a second relayed to the watchers of one room (views and first snapshots, each frame
   * counted once per watcher), and their burst. 512 KiB/s, burst 4 MiB: a 20 KiB view every 2 s
   * to 50 watchers, or three watchers arriving at once to a full history. Over budget, a watcher
   * misses a view and gets the points it missed with a later one; a `watch` is refused.
   */
  watchBytesPerSecond: number;
  watchBurstBytes: number;
  /**
   * An empty room that no member ever joined lives this long instead (or emptyRoomGraceMs if
   * shorter): 10 s covers a host's page reload, and a client that creates rooms and walks away
   * frees them six times sooner.
   */
  neverJoinedRoomGraceMs: number;
  /**
   * Open sockets from one address (an IPv6 /64 counts as one); more are closed with 1013. 256,
   * 1/16 of maxConnections: a classroom behind one NAT (hosts, volunteers, watchers) fits
   * several times over, and one machine cannot take the server.
   */
  maxConnectionsPerIp: number;
  /**
   * Rooms held by the address that created them, until each expires. 16, under 2% of maxRooms:
   * a host needs one room, a lab behind one NAT a few, and filling the server takes 63 addresses.
   */
  maxRoomsPerIp: number;
  /**
   * Rooms one address may create per minute, and their burst. 6/min, burst 10: restarting
   * `shoal host` or reloading the dashboard a few times in a row is fine; a loop that creates and
   * abandons rooms gets one every 10 s.
   */
  roomCreatesPerMinutePerIp: number;
  roomCreateBurstPerIp: number;
  /**
   * Joins one address may attempt per minute (wrong tokens included), and their burst. 30/min,
   * burst 64: a classroom behind one NAT fills a room at once; a loop that joins and drops gets
   * one every 2 s, and guessing tokens goes no faster.
   */
  joinsPerMinutePerIp: number;
  joinBurstPerIp: number;
  /**
   * Joins one room admits per minute (only with its token), and their burst. 60/min, burst 64: a
   * full room at once, then one a second. With the room's memory of 4 × maxPeersPerRoom members
   * (never freed by evicting absent ones), token holders fill it no faster than this.
   */
  joinsPerMinutePerRoom: number;
  joinBurstPerRoom: number;
  /** Checks one address may make per minute, and their burst. 120/min, burst 32: a join page checks once. */
  checksPerMinutePerIp: number;
  checkBurstPerIp: number;
  /**
   * Bytes of signal frames one peer may have relayed per second, and their burst. 256 KiB/s, burst
   * 1 MiB: a member joining a room of 64 sends an offer (a few KiB) and a few ICE candidates to
   * each of 63 peers at once, about 400 KiB; beyond it its signals are dropped ('signal-budget').
   */
  signalBytesPerSecond: number;
  signalBurstBytes: number;
}

export const DEFAULT_SIGNALING_LIMITS: Readonly<SignalingLimits> = {
  maxFrameBytes: 64 * 1024,
  maxJsonDepth: 32,
  messagesPerSecond: 50,
  messageBurst: 200,
  maxDroppedMessages: 100,
  hostRelayPerSecond: 500,
  hostRelayBurst: 1000,
  memberRelayPerSecond: 10,
  memberRelayBurst: 20,
  maxRelayBytes: 16 * 1024,
  maxPeersPerRoom: 64,
  maxRooms: 1000,
  maxConnections: 4096,
  helloTimeoutMs: 10_000,
  heartbeatIntervalMs: 15_000,
  idleTimeoutMs: 35_000,
  emptyRoomGraceMs: 60_000,
  maxBufferedBytes: 1024 * 1024,
  maxPublishBytes: 256 * 1024,
  publishesPerSecond: 4,
  publishBurst: 8,
  maxWatchersPerRoom: 64,
  maxViewHistoryBytes: 1024 * 1024,
  watchBytesPerSecond: 512 * 1024,
  watchBurstBytes: 4 * 1024 * 1024,
  neverJoinedRoomGraceMs: 10_000,
  maxConnectionsPerIp: 256,
  maxRoomsPerIp: 16,
  roomCreatesPerMinutePerIp: 6,
  roomCreateBurstPerIp: 10,
  joinsPerMinutePerIp: 30,
  joinBurstPerIp: 64,
  joinsPerMinutePerRoom: 60,
  joinBurstPerRoom: 64,
  checksPerMinutePerIp: 120,
  checkBurstPerIp: 32,
  signalBytesPerSecond: 256 * 1024,
  signalBurstBytes: 1024 * 1024,
};

/** Defaults filled in, every field checked; throws a RangeError naming the bad one. */
export function resolveSignalingLimits(limits: Partial<SignalingLimits> = {}): SignalingLimits {
  const resolved = { ...DEFAULT_SIGNALING_LIMITS, ...limits };
  for (const [name, value] of Object.entries(resolved)) {
    if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) {
      throw new RangeError(`Signaling limit ${name} must be a positive number, got ${value}`);
    }
  }
  return resolved;
}

/**
 * ICE servers: the option if given, else SHOAL_ICE_SERVERS (a JSON array of RTCIceServer), else
 * none (loopback and LAN peers need none). Throws with the reason when the JSON is malformed.
 */
export function resolveIceServers(option: IceServer[] | undefined, env: string | undefined): IceServer[] {
  if (option) return z.array(iceServerSchema).parse(option);
  if (!env?.trim()) return [];
  let parsed: unknown;
  try {
    parsed = JSON.parse(env);
  } catch (error) {
    throw new Error(`SHOAL_ICE_SERVERS is not JSON: ${(error as Error).message}`);
  }
  const result = z.array(iceServerSchema).max(16).safeParse(parsed);
  if (!result.success) {
    throw new Error(
      `SHOAL_ICE_SERVERS must be an array of {urls, username?, credential?}: ${z.prettifyError(result.error)}`,
    );
  }
  return result.data;
}

/** One event: its name and fields. Written as one JSON line with a timestamp. */
type LogFields = Record<string, string | number | boolean | null | undefined>;
/** Receives one JSON line per event. */
export type SignalLogger = (line: string) => void;
/** Logs one event (nothing without a logger). */
export type Log = (event: string, fields?: LogFields) => void;

export function makeLog(logger: SignalLogger | undefined, now: () => number): Log {
  if (!logger) return () => {};
  return (event, fields = {}) => {
    logger(JSON.stringify({ t: new Date(now()).toISOString(), event, ...fields }));
  };
}

/**
 * Members a room remembers for coming back: 4 per seat, since a seat's member may reconnect. An
 * absent member is never forgotten to make room for a new one (one token holder joining and
 * dropping in a loop would strand the others, and right after a restart every member is absent):
 * the join is refused instead, until members leave for good or are kicked. The room store bounds
 * a record's members by the same number.
 */
export function membersRemembered(limits: Pick<SignalingLimits, 'maxPeersPerRoom'>): number {
  return 4 * limits.maxPeersPerRoom;
}
