/**
 * Where the server keeps its rooms so that a restarted server takes them back: a RoomStore. What
 * is kept is what a room needs to admit the same people again — its id, its host's peer id, the
 * credentials, the members' ids with their secrets' digests — plus the host's latest published
 * view (for watch links and `check`). Not kept: sockets, who is connected, rate-limit budgets.
 *
 * Credentials the server only compares (the host secret, each member secret) are kept as SHA-256
 * digests; the join token and watch key are kept as given, since the server hands them back to
 * a host that reclaims its room.
 *
 * Two stores: MemoryRoomStore (nothing survives the process) and FileRoomStore, one JSON file per
 * room in a directory (and one beside it for the kept view), written to a temporary file and
 * renamed, mode 0600. A deployment that outgrows one process puts another store (Redis, a
 * database) behind the same interface: docs/deployment.md.
 */
import { mkdir, open, readdir, readFile, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';

const id = z
  .string()
  .min(1)
  .max(128)
  .regex(/^[A-Za-z0-9_-]+$/);
/** A SHA-256 digest as hex. */
const digestHex = z.string().regex(/^[0-9a-f]{64}$/);

export const savedRoomSchema = z.object({
  format: z.literal('shoal-signal-room'),
  version: z.literal(1),
  id,
  hostId: id,
  /** The address key that created it (ip-limits.ts), which holds it until it expires. */
  ownerAddress: z.string().max(128),
  hostSecretDigest: digestHex,
  joinToken: id,
  watchKey: id,
  hadMember: z.boolean(),
  /** Members that may come back with their member secret: peer id → the secret's digest. */
  members: z.record(id, digestHex),
  /** Peer ids the host kicked: they may not come back. */
  kicked: z.array(id).max(100_000),
});
export type SavedRoom = z.infer<typeof savedRoomSchema>;

/** What a store holds of one room: its record and its kept view (JSON text, or null before any publish). */
export interface StoredRoom {
  room: SavedRoom;
  view: string | null;
}

export interface LoadedRooms {
  rooms: StoredRoom[];
  /** Entries that could not be read or failed their schema, each named with why. */
  skipped: { name: string; reason: string }[];
}

export interface RoomStore {
  /** Every room kept; an entry that cannot be read is skipped, never thrown. */
  loadAll(): Promise<LoadedRooms>;
  saveRoom(room: SavedRoom): Promise<void>;
  /** The room's latest view with its kept points, as JSON text. */
  saveView(roomId: string, view: string): Promise<void>;
  /** The room and its view are gone (it expired). */
  delete(roomId: string): Promise<void>;
}

/** Nothing outlives the process: the store of tests and of `shoal server --no-persist`. */
export class MemoryRoomStore implements RoomStore {
  private readonly rooms = new Map<string, StoredRoom>();

  async loadAll(): Promise<LoadedRooms> {
    return { rooms: [...this.rooms.values()].map((stored) => structuredClone(stored)), skipped: [] };
  }

  async saveRoom(room: SavedRoom): Promise<void> {
    this.rooms.set(room.id, { room: structuredClone(room), view: this.rooms.get(room.id)?.view ?? null });
  }

  async saveView(roomId: string, view: string): Promise<void> {
    const stored = this.rooms.get(roomId);
    if (stored) stored.view = view;
  }

  async delete(roomId: string): Promise<void> {
    this.rooms.delete(roomId);
  }
}

const ROOM_FILE = /^([A-Za-z0-9_-]{1,128})\.room\.json$/;

/**
 * One room per file under `dir`: ROOM.room.json (the record) and ROOM.view.json (the kept view).
 * Each write goes to a temporary file first and is renamed over the old one, so a crash leaves
 * either the old file or the new one, never half of one.
 */
export class FileRoomStore implements RoomStore {
  private ready: Promise<void> | null = null;
  private temporaries = 0;

  constructor(readonly dir: string) {}

  async loadAll(): Promise<LoadedRooms> {
    await this.ensureDir();
    const loaded: LoadedRooms = { rooms: [], skipped: [] };
    for (const name of (await readdir(this.dir)).sort()) {
      const match = ROOM_FILE.exec(name);
      if (!match) continue;
      const roomId = match[1] as string;
      try {
        const room = savedRoomSchema.parse(JSON.parse(await readFile(join(this.dir, name), 'utf8')));
        if (room.id !== roomId) throw new Error(`names room ${room.id}`);
        loaded.rooms.push({ room, view: await this.readView(roomId) });
      } catch (error) {
        loaded.skipped.push({ name, reason: (error as Error).message.slice(0, 300) });
      }
    }
    return loaded;
  }

  async saveRoom(room: SavedRoom): Promise<void> {
    await this.write(`${room.id}.room.json`, JSON.stringify(room));
  }

  async saveView(roomId: string, view: string): Promise<void> {
    await this.write(`${roomId}.view.json`, view);
  }

  async delete(roomId: string): Promise<void> {
    await rm(join(this.dir, `${roomId}.room.json`), { force: true });
    await rm(join(this.dir, `${roomId}.view.json`), { force: true });
  }

  /** The view beside a room, or null when there is none (a view that cannot be read is the caller's to check). */
  private async readView(roomId: string): Promise<string | null> {
    try {
      return await readFile(join(this.dir, `${roomId}.view.json`), 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw error;
    }
  }

  private ensureDir(): Promise<void> {
    // 0700: the records hold join tokens and watch keys
    this.ready ??= mkdir(this.dir, { recursive: true, mode: 0o700 }).then(() => {});
    return this.ready;
  }

  private async write(name: string, text: string): Promise<void> {
    await this.ensureDir();
    const target = join(this.dir, name);
    const temporary = `${target}.${process.pid}.${++this.temporaries}.tmp`;
    const file = await open(temporary, 'w', 0o600);
    try {
      await file.writeFile(text, 'utf8');
      await file.sync();
    } finally {
      await file.close();
    }
    await rename(temporary, target);
  }
}
