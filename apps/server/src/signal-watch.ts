/**
 * The read-only side of a room: its host publishes its room view (RoomViewUpdate, from
 * @shoal/protocol), the server keeps it, and watchers holding the room's watch key receive it.
 * Watchers are sockets outside the room: in no peers list, no seat, no signaling.
 *
 * Per room the server keeps the latest update without its points and every point in a thinned
 * series, bounded in count (MAX_VIEW_HISTORY) and, tables and points together, in JSON bytes
 * (maxViewHistoryBytes). They are kept as JSON text rather than parsed objects, so the bytes
 * counted are the bytes held, however long the room lives.
 *
 * What goes out to a room's watchers is bounded too: a byte budget per room (watchBytesPerSecond,
 * a token bucket) pays for every frame to every watcher. When it runs out a watcher misses that
 * view; each watcher has a cursor into the kept points, so its next view carries every point it
 * missed (as kept, perhaps thinned) and none twice, and the watchers furthest behind are served
 * first. A `watch` whose first snapshot the budget cannot pay for is refused with 'watch-budget'.
 * A watcher that is not reading (half of maxBufferedBytes queued) misses views the same way
 * instead of being closed for the host's traffic (counted as 'receiver-busy').
 */
import {
  appendThinned,
  MAX_VIEW_HISTORY,
  type RoomStatus,
  type RoomViewUpdate,
  roomViewUpdateSchema,
} from '@shoal/protocol';
import { CLOSE_CODES, type RoomAbout, type SignalErrorCode } from '@shoal/signaling';
import { roomAbout } from './room-about.ts';
import type { Room } from './rooms.ts';
import type { Log, SignalingLimits } from './signal-config.ts';
import { TokenBucket } from './token-bucket.ts';

interface KeptPoint {
  /** Its place among every point this room's host published (1, 2, …): watchers' cursors. */
  seq: number;
  json: string;
}

/** The latest view of one room and its thinned point history, as JSON text. */
export class RoomViewHistory {
  /** The latest update without its points, as JSON without the closing brace. */
  private latestHead: string | null = null;
  private points: KeptPoint[] = [];
  private pointBytes = 0;
  private seq = 0;

  constructor(private readonly maxBytes: number) {}

  /** Bytes kept (JSON characters): the latest tables plus every kept point. */
  get bytes(): number {
    return (this.latestHead?.length ?? 0) + this.pointBytes;
  }

  /** The seq of the newest point published so far (0 before any). */
  get lastSeq(): number {
    return this.seq;
  }

  add(update: RoomViewUpdate): void {
    const { points, ...tables } = update;
    this.latestHead = JSON.stringify(tables).slice(0, -1);
    const added = points.map((point) => ({ seq: ++this.seq, json: JSON.stringify(point) }));
    this.keep(appendThinned(this.points, added, MAX_VIEW_HISTORY));
    // Thin the older half again until tables and series fit (the newest point always stays).
    while (this.points.length > 1 && this.bytes > this.maxBytes) {
      this.keep(appendThinned(this.points, [], this.points.length - 1));
    }
  }

  /** The latest update as JSON, with the kept points after `afterSeq` (0: all); null before the first publish. */
  json(afterSeq = 0): string | null {
    if (this.latestHead === null) return null;
    const points = this.points.filter((kept) => kept.seq > afterSeq).map((kept) => kept.json);
    return `${this.latestHead},"points":[${points.join(',')}]}`;
  }

  /** json(), parsed. */
  view(afterSeq = 0): RoomViewUpdate | null {
    const json = this.json(afterSeq);
    return json === null ? null : (JSON.parse(json) as RoomViewUpdate);
  }

  private keep(points: KeptPoint[]): void {
    this.points = points;
    this.pointBytes = points.reduce((sum, kept) => sum + kept.json.length, 0);
  }
}

type WatchLimits = Pick<
  SignalingLimits,
  | 'maxPublishBytes'
  | 'publishesPerSecond'
  | 'publishBurst'
  | 'maxWatchersPerRoom'
  | 'maxViewHistoryBytes'
  | 'watchBytesPerSecond'
  | 'watchBurstBytes'
>;

/** What the hub needs of a socket (the server's Connection, signal-connection.ts). */
interface WatchSocket {
  readonly id: number;
  /** One text frame (with the server's backpressure check). */
  sendText(text: string): void;
  /** It has half of maxBufferedBytes queued (it is not reading): relayed frames skip it. */
  readonly backlogged: boolean;
  reject(code: SignalErrorCode, message: string, ref?: string): void;
  /** Counts something refused on this socket's account without answering it. */
  count(reason: SignalErrorCode, detail: string): void;
  closeWith(code: number, reason: string): void;
}

interface WatchHubOptions<C> {
  limits: WatchLimits;
  now: () => number;
  log: Log;
  /** A room's kept view changed (room-keeper.ts writes it to the store, now and then). */
  viewChanged?: (room: Room<C>) => void;
}

/** What `checked` tells of a room from its latest view (both null before the host's first publish). */
export interface RoomSummary {
  status: RoomStatus | null;
  about: RoomAbout | null;
}

interface RoomWatch {
  history: RoomViewHistory;
  summary: RoomSummary;
  /** Publishes of this room's host (per room, so a reconnecting host gets no fresh burst). */
  bucket: TokenBucket;
  /** Bytes sent to this room's watchers, each frame counted once per watcher. */
  fanOut: TokenBucket;
}

interface Watching<C> {
  conn: C;
  room: Room<C>;
  /** The seq of the newest point this watcher has been sent. */
  seenSeq: number;
}

export class WatchHub<C extends WatchSocket> {
  private readonly watching = new Map<C, Watching<C>>();
  private readonly rooms = new WeakMap<Room<C>, RoomWatch>();

  constructor(private readonly options: WatchHubOptions<C>) {}

  /** Sockets watching a room, on this server. */
  get count(): number {
    return this.watching.size;
  }

  isWatching(conn: C): boolean {
    return this.watching.has(conn);
  }

  /** A `watch` from a socket in no room: true when it now watches `room`. */
  watch(conn: C, roomId: string, room: Room<C> | undefined, key: string): boolean {
    const { limits } = this.options;
    if (!room) {
      conn.reject('no-such-room', 'no such room (it may have expired)', 'watch');
      return false;
    }
    if (!room.checkWatchKey(key)) {
      conn.reject('bad-key', 'wrong watch key', 'watch');
      return false;
    }
    if (room.watchers.size >= limits.maxWatchersPerRoom) {
      conn.reject('room-full', `a room has at most ${limits.maxWatchersPerRoom} watchers`, 'watch');
      return false;
    }
    const { history, fanOut } = this.state(room);
    // ServerMessage 'watching', built from the kept JSON without parsing it again
    const reply = `{"kind":"watching","roomId":${JSON.stringify(roomId)},"view":${history.json() ?? 'null'}}`;
    if (!fanOut.spend(reply.length)) {
      const why = `this room's watchers have used its ${limits.watchBytesPerSecond} bytes a second; try again soon`;
      conn.reject('watch-budget', why, 'watch');
      return false;
    }
    room.watchers.add(conn);
    this.watching.set(conn, { conn, room, seenSeq: history.lastSeq });
    this.options.log('watching', { room: roomId, conn: conn.id, watchers: room.watchers.size });
    conn.sendText(reply);
    return true;
  }

  /** A host's `publish` (schema-checked): kept, then sent to the watchers the room's budget pays for. */
  publish(conn: C, room: Room<C>, update: RoomViewUpdate, bytes: number): void {
    const { limits } = this.options;
    if (bytes > limits.maxPublishBytes) {
      conn.reject('too-big', `publish frames are at most ${limits.maxPublishBytes} bytes`, 'publish');
      return;
    }
    if (update.roomId !== room.id) {
      conn.reject('schema', `data.roomId: this room is ${room.id}`, 'publish');
      return;
    }
    const state = this.state(room);
    if (!state.bucket.take()) {
      conn.reject('rate-limited', `at most ${limits.publishesPerSecond} publishes a second`, 'publish');
      return;
    }
    this.keep(state, update);
    this.options.viewChanged?.(room);
    if (room.watchers.size > 0) this.fanOut(conn, room, state);
  }

  /**
   * The view a restarted server kept for `room` (JSON from its store), taken back as if its host
   * had published it. False when it is not a valid view of this room (it is then left out).
   */
  restore(room: Room<C>, json: string): boolean {
    let parsed: unknown;
    try {
      parsed = JSON.parse(json);
    } catch {
      return false;
    }
    const view = roomViewUpdateSchema.safeParse(parsed);
    if (!view.success || view.data.roomId !== room.id) return false;
    this.keep(this.state(room), view.data);
    return true;
  }

  /** The room's latest view with every kept point, as JSON; null before any publish. */
  keptJson(room: Room<C>): string | null {
    return this.rooms.get(room)?.history.json() ?? null;
  }

  private keep(state: RoomWatch, update: RoomViewUpdate): void {
    state.history.add(update);
    state.summary = { status: update.status, about: roomAbout(update.config) };
  }

  /** The room's status and what it trains, from its latest view. */
  summary(room: Room<C>): RoomSummary {
    return this.rooms.get(room)?.summary ?? { status: null, about: null };
  }

  /** Bytes (JSON characters) of the view kept for `room`. */
  keptBytes(room: Room<C>): number {
    return this.rooms.get(room)?.history.bytes ?? 0;
  }

  /**
   * The latest view to every watcher the budget pays for, each with the points it has not had.
   * Watchers with the same cursor share one encoding (normally all of them: one stringify).
   */
  private fanOut(host: C, room: Room<C>, state: RoomWatch): void {
    const latest = state.history.lastSeq;
    const byCursor = new Map<number, Watching<C>[]>();
    for (const watcher of room.watchers) {
      const entry = this.watching.get(watcher);
      if (!entry) continue;
      const group = byCursor.get(entry.seenSeq);
      if (group) group.push(entry);
      else byCursor.set(entry.seenSeq, [entry]);
    }
    let skipped = 0;
    // furthest behind first: whoever the budget left out last time is served first this time
    for (const cursor of [...byCursor.keys()].sort((a, b) => a - b)) {
      const text = `{"kind":"view","data":${state.history.json(cursor)}}`; // ServerMessage 'view'
      for (const entry of byCursor.get(cursor) ?? []) {
        // a watcher that is not reading misses this view (its points come with a later one); the
        // host's views never get it closed, only its own silence does (the heartbeat)
        if (entry.conn.backlogged) {
          entry.conn.count('receiver-busy', 'view skipped: not reading');
          continue;
        }
        if (!state.fanOut.spend(text.length)) {
          skipped++;
          continue;
        }
        entry.conn.sendText(text);
        entry.seenSeq = latest;
      }
    }
    if (skipped > 0) {
      const detail = `${skipped} of ${room.watchers.size} watchers skipped over ${this.options.limits.watchBytesPerSecond} B/s`;
      host.count('watch-budget', detail);
      this.options.log('watch-thinned', { room: room.id, skipped, watchers: room.watchers.size });
    }
  }

  /** The socket closed: it watches no more. */
  leave(conn: C): void {
    const entry = this.watching.get(conn);
    if (!entry) return;
    this.watching.delete(conn);
    entry.room.watchers.delete(conn);
  }

  /** The room ended: its watchers' sockets are closed with 4002. */
  roomClosed(room: Room<C>): void {
    for (const watcher of [...room.watchers]) {
      this.leave(watcher);
      watcher.closeWith(CLOSE_CODES.roomClosed, 'room closed');
    }
    this.rooms.delete(room);
  }

  private state(room: Room<C>): RoomWatch {
    let state = this.rooms.get(room);
    if (!state) {
      const { limits, now } = this.options;
      state = {
        history: new RoomViewHistory(limits.maxViewHistoryBytes),
        summary: { status: null, about: null },
        bucket: new TokenBucket(limits.publishesPerSecond, limits.publishBurst, now),
        fanOut: new TokenBucket(limits.watchBytesPerSecond, limits.watchBurstBytes, now),
      };
      this.rooms.set(room, state);
    }
    return state;
  }
}
