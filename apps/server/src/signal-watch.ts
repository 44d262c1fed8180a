/**
 * The read-only side of a room: its host publishes its room view (RoomViewUpdate, from
 * @shoal/protocol), the server keeps it, and watchers holding the room's watch key receive it.
 * Watchers are sockets outside the room: in no peers list, no seat, no signaling.
 *
 * Per room the server keeps the latest update without its points and every point in a thinned
 * series, bounded in count (MAX_VIEW_HISTORY) and in JSON bytes (maxViewHistoryBytes), so what a
 * host publishes costs the server a bounded amount of memory however long the room lives.
 */
import { appendThinned, MAX_VIEW_HISTORY, type RoomViewPoint, type RoomViewUpdate } from '@shoal/protocol';
import type { Room } from './rooms.ts';
import type { LogFields, SignalingLimits } from './signal-config.ts';
import { CLOSE_CODES, type ServerMessage, type SignalErrorCode } from './signal-messages.ts';
import { TokenBucket } from './token-bucket.ts';

interface KeptPoint {
  point: RoomViewPoint;
  /** Its JSON length. */
  bytes: number;
}

/** The latest view of one room and its thinned point history. */
export class RoomViewHistory {
  private latest: RoomViewUpdate | null = null;
  private points: KeptPoint[] = [];

  constructor(private readonly maxBytes: number) {}

  add(update: RoomViewUpdate): void {
    this.latest = { ...update, points: [] };
    const added = update.points.map((point) => ({ point, bytes: JSON.stringify(point).length }));
    this.points = appendThinned(this.points, added, MAX_VIEW_HISTORY);
    const total = () => this.points.reduce((sum, kept) => sum + kept.bytes, 0);
    // Thin the older half again until the series fits (the newest point always stays).
    while (this.points.length > 1 && total() > this.maxBytes) {
      this.points = appendThinned(this.points, [], this.points.length - 1);
    }
  }

  /** The latest update with every kept point; null before the first publish. */
  view(): RoomViewUpdate | null {
    return this.latest && { ...this.latest, points: this.points.map((kept) => kept.point) };
  }
}

type WatchLimits = Pick<
  SignalingLimits,
  'maxPublishBytes' | 'publishesPerSecond' | 'publishBurst' | 'maxWatchersPerRoom' | 'maxViewHistoryBytes'
>;

export interface WatchHubOptions<C> {
  limits: WatchLimits;
  now: () => number;
  /** One text frame to a socket (with the server's backpressure check). */
  sendText(conn: C, text: string): void;
  reject(conn: C, code: SignalErrorCode, message: string, ref?: string): void;
  close(conn: C, code: number, reason: string): void;
  log(event: string, fields: LogFields): void;
}

interface RoomWatch {
  history: RoomViewHistory;
  /** Publishes of this room's host (per room, so a reconnecting host gets no fresh burst). */
  bucket: TokenBucket;
}

export class WatchHub<C extends { readonly id: number }> {
  private readonly watching = new Map<C, Room<C>>();
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
    const { reject, limits } = this.options;
    if (!room) {
      reject(conn, 'no-such-room', 'no such room (it may have expired)', 'watch');
      return false;
    }
    if (!room.checkWatchKey(key)) {
      reject(conn, 'bad-key', 'wrong watch key', 'watch');
      return false;
    }
    if (room.watchers.size >= limits.maxWatchersPerRoom) {
      reject(conn, 'room-full', `a room has at most ${limits.maxWatchersPerRoom} watchers`, 'watch');
      return false;
    }
    room.watchers.add(conn);
    this.watching.set(conn, room);
    this.options.log('watching', { room: roomId, conn: conn.id, watchers: room.watchers.size });
    const reply: ServerMessage = { kind: 'watching', roomId, view: this.state(room).history.view() };
    this.options.sendText(conn, JSON.stringify(reply));
    return true;
  }

  /** A host's `publish` (schema-checked): kept, then sent to every watcher with its own points. */
  publish(conn: C, room: Room<C>, update: RoomViewUpdate, bytes: number): void {
    const { reject, limits } = this.options;
    if (bytes > limits.maxPublishBytes) {
      reject(conn, 'too-big', `publish frames are at most ${limits.maxPublishBytes} bytes`, 'publish');
      return;
    }
    if (update.roomId !== room.id) {
      reject(conn, 'schema', `data.roomId: this room is ${room.id}`, 'publish');
      return;
    }
    const state = this.state(room);
    if (!state.bucket.take()) {
      reject(conn, 'rate-limited', `at most ${limits.publishesPerSecond} publishes a second`, 'publish');
      return;
    }
    state.history.add(update);
    if (room.watchers.size === 0) return;
    const text = JSON.stringify({ kind: 'view', data: update } satisfies ServerMessage); // once for all
    for (const watcher of room.watchers) this.options.sendText(watcher, text);
  }

  /** The socket closed: it watches no more. */
  leave(conn: C): void {
    const room = this.watching.get(conn);
    if (!room) return;
    this.watching.delete(conn);
    room.watchers.delete(conn);
  }

  /** The room ended: its watchers' sockets are closed with 4002. */
  roomClosed(room: Room<C>): void {
    for (const watcher of [...room.watchers]) {
      this.leave(watcher);
      this.options.close(watcher, CLOSE_CODES.roomClosed, 'room closed');
    }
    this.rooms.delete(room);
  }

  private state(room: Room<C>): RoomWatch {
    let state = this.rooms.get(room);
    if (!state) {
      const { limits, now } = this.options;
      state = {
        history: new RoomViewHistory(limits.maxViewHistoryBytes),
        bucket: new TokenBucket(limits.publishesPerSecond, limits.publishBurst, now),
      };
      this.rooms.set(room, state);
    }
    return state;
  }
}
