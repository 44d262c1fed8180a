/**
 * Keeps the server's rooms in its RoomStore as they change, without making anyone wait: a room's
 * record is written when it changes (created, a member admitted or forgotten, the token rotated),
 * its kept view at most once per viewSaveIntervalMs, and both are deleted when it expires. Writes
 * of one room run one after another, so an older record never lands after a newer one (an expired
 * room has nobody left to change it, so its delete is its last write). A failed write is logged; the room lives on in
 * memory.
 */

import type { RoomStore } from './room-store.ts';
import type { Room } from './rooms.ts';
import type { Log } from './signal-config.ts';

/** Views are published every 2 s; one write per 5 s per room keeps a busy server's disk quiet. */
export const VIEW_SAVE_INTERVAL_MS = 5_000;

export class RoomKeeper<Member> {
  /** Each room's last write (in order), by room id. */
  private readonly queues = new Map<string, Promise<void>>();
  private readonly viewTimers = new Map<string, ReturnType<typeof setTimeout>>();

  constructor(
    private readonly store: RoomStore,
    private readonly log: Log,
    private readonly viewSaveIntervalMs = VIEW_SAVE_INTERVAL_MS,
  ) {}

  /** `room`'s record changed: written now (after its earlier writes). */
  roomChanged(room: Room<Member>): void {
    const saved = room.toSaved();
    this.enqueue(room.id, 'save-room', () => this.store.saveRoom(saved));
  }

  /** `room`'s view changed: written within viewSaveIntervalMs, read then with `json`. */
  viewChanged(room: Room<Member>, json: () => string | null): void {
    if (this.viewTimers.has(room.id)) return;
    const timer = setTimeout(() => {
      this.viewTimers.delete(room.id);
      const view = json();
      if (view !== null) this.enqueue(room.id, 'save-view', () => this.store.saveView(room.id, view));
    }, this.viewSaveIntervalMs);
    timer.unref();
    this.viewTimers.set(room.id, timer);
  }

  /** `room` expired: its record and view are deleted (a view write still pending is dropped). */
  roomExpired(room: Room<Member>): void {
    const timer = this.viewTimers.get(room.id);
    if (timer) clearTimeout(timer);
    this.viewTimers.delete(room.id);
    this.enqueue(room.id, 'delete-room', () => this.store.delete(room.id));
  }

  /** Every write queued so far has finished (the server is closing). */
  async flush(): Promise<void> {
    await Promise.all(this.queues.values());
  }

  private enqueue(roomId: string, what: string, write: () => Promise<void>): void {
    const previous = this.queues.get(roomId) ?? Promise.resolve();
    const next = previous.then(write).catch((error: Error) => {
      this.log('store-failed', { room: roomId, what, message: error.message });
    });
    this.queues.set(roomId, next);
    void next.then(() => {
      if (this.queues.get(roomId) === next) this.queues.delete(roomId);
    });
  }
}
