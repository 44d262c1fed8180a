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
 * room in a directory (and one beside it for the kept view). A deployment that outgrows one
 * process puts another store (Redis, a database) behind the same interface: docs/deployment.md.
 *
 * FileRoomStore trusts nothing on disk: whoever can write the directory could plant a
 * record with their own host-secret digest (and reclaim a room), a link where the server writes
 * (and receive join tokens and watch keys), or a huge record. So the directory must be the
 * server's user's and writable by nobody else, nor movable by anyone else (room-dir.ts's checks
 * below); and even then writes never follow a link and loading reads only the server's own
 * regular files, under a size cap, through a schema with bounded members.
 */
import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { type FileHandle, lstat, mkdir, open, readdir, realpath, rename, rm, stat } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { z } from 'zod';
import { DEFAULT_SIGNALING_LIMITS, membersRemembered, type SignalingLimits } from './signal-config.ts';

const id = z
  .string()
  .min(1)
  .max(128)
  .regex(/^[A-Za-z0-9_-]+$/);
/** A member's key as rooms.ts keeps it: `Ed25519:…` or `ECDSA-P256:…` (base64url, ≤ 88 characters), or `none`. */
const memberKeyText = z.string().regex(/^(none|(Ed25519|ECDSA-P256):[A-Za-z0-9_-]{1,88})$/);
/** A SHA-256 digest as hex. */
const digestHex = z.string().regex(/^[0-9a-f]{64}$/);

/** Peer id → `value`, at most `max` entries (what zod's record does not bound by itself). */
function boundedRecord<T extends z.ZodType<string>>(value: T, max: number, what: string) {
  return z.record(id, value).check((ctx) => {
    if (Object.keys(ctx.value).length <= max) return;
    const message = `more than ${max} ${what}`;
    ctx.issues.push({ code: 'too_big', origin: 'object', maximum: max, inclusive: true, input: ctx.value, message });
  });
}

/** A room record whose members, their keys and kicked ids number at most `maxMembers` each. */
export function savedRoomSchemaFor(maxMembers: number) {
  return z.object({
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
    members: boundedRecord(digestHex, maxMembers, 'members'),
    /** Peer ids the host kicked: they may not come back. */
    kicked: z.array(id).max(maxMembers),
    /**
     * The key each remembered member joined with (`ALGORITHM:base64url`, or `none`), fixed for its
     * peer id across restarts too. Absent in records written before keys were kept.
     */
    memberKeys: boundedRecord(memberKeyText, maxMembers, 'member keys').optional(),
  });
}

/** What a store may hold for a server with these limits: see FileStoreBounds. */
export function fileStoreBounds(
  limits: Pick<SignalingLimits, 'maxPeersPerRoom' | 'maxViewHistoryBytes' | 'maxPublishBytes'>,
): FileStoreBounds {
  return {
    // a room remembers this many members, and forgets the oldest kicked id beyond as many
    maxMembers: membersRemembered(limits),
    // a kept view is its history (maxViewHistoryBytes), or one publish when a single point stays
    maxViewBytes: Math.max(limits.maxViewHistoryBytes, limits.maxPublishBytes),
  };
}

export interface FileStoreBounds {
  /** Members (and kicked ids) a record may name; a record with more is skipped. */
  maxMembers: number;
  /** JSON characters of a kept view (signal-watch.ts); its file may take up to 3 bytes per character. */
  maxViewBytes: number;
}

const DEFAULT_BOUNDS = fileStoreBounds(DEFAULT_SIGNALING_LIMITS);

/** A record of a server with the default limits: 256 members at most. */
export const savedRoomSchema = savedRoomSchemaFor(DEFAULT_BOUNDS.maxMembers);
export type SavedRoom = z.infer<typeof savedRoomSchema>;

/** What a store holds of one room: its record and its kept view (JSON text, or null before any publish). */
export interface StoredRoom {
  room: SavedRoom;
  view: string | null;
}

export interface LoadedRooms {
  rooms: StoredRoom[];
  /** Entries that could not be read or failed their schema, each named with why (never with what they hold). */
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

/** The stat fields the directory checks read (an fs.Stats, or a test's). */
export interface DirStat {
  uid: number;
  mode: number;
  isDirectory(): boolean;
}

/**
 * Why the server must not keep rooms in directory `path`, or null: it must be a directory of the
 * server's user (`uid`; null where there are no uids) that nobody else can write, since whoever
 * can write it can plant records and links.
 */
export function roomsDirProblem(path: string, dir: DirStat, uid: number | null): string | null {
  if (!dir.isDirectory()) return `the rooms directory ${path} is not a directory`;
  if (uid !== null && dir.uid !== uid) {
    return (
      `the rooms directory ${path} is owned by uid ${dir.uid}, not this server's user (uid ${uid}), ` +
      `who could plant rooms in it. Run: chown ${uid} ${path} && chmod 700 ${path}, or pick another --rooms-dir`
    );
  }
  if (dir.mode & 0o022) {
    return (
      `the rooms directory ${path} is writable by others (mode ${(dir.mode & 0o777).toString(8)}), ` +
      `who could plant rooms or links in it. Run: chmod 700 ${path}`
    );
  }
  return null;
}

/**
 * Why directory `path` above the rooms directory makes it unsafe, or null: whoever may write a
 * directory may rename what is in it and put their own rooms directory in its place, unless it
 * has the sticky bit (as /tmp does: then only an entry's owner may rename it). So each one above
 * must be root's or the server's user's, and writable by nobody else unless sticky.
 */
export function ancestorProblem(path: string, dir: DirStat, uid: number | null): string | null {
  if (uid !== null && dir.uid !== 0 && dir.uid !== uid) {
    return (
      `${path}, above the rooms directory, is owned by uid ${dir.uid}, who could replace the rooms directory. ` +
      `Keep rooms under directories of root or of this server's user (uid ${uid}): pick another --rooms-dir`
    );
  }
  if (dir.mode & 0o022 && !(dir.mode & 0o1000)) {
    return (
      `${path}, above the rooms directory, is writable by others (mode ${(dir.mode & 0o777).toString(8)}) ` +
      `without the sticky bit, who could replace the rooms directory. Run: chmod o-w,g-w ${path}, or pick another --rooms-dir`
    );
  }
  return null;
}

const ROOM_FILE = /^([A-Za-z0-9_-]{1,128})\.room\.json$/;
/** Temporaries: `.ROOM.room.json.RANDOM.tmp` (and ROOM.room.json.PID.N.tmp of older servers). */
const TEMPORARY = /^\.?[A-Za-z0-9_-]{1,128}\.(room|view)\.json\.[0-9a-f.]+\.tmp$/;

// not on Windows, where there are no links to follow the same way: 0 leaves the flag out
const { O_RDONLY, O_WRONLY, O_CREAT, O_EXCL } = constants;
const O_NOFOLLOW = constants.O_NOFOLLOW ?? 0;
/** Opening a FIFO for reading would wait for a writer: with it, it returns at once (and is then refused). */
const O_NONBLOCK = constants.O_NONBLOCK ?? 0;

/**
 * Bytes of a record with `maxMembers` members, as many member keys and as many kicked ids, ids at
 * their longest (128): a member `"id":"64 hex",` is 198 bytes, a member key `"id":"ECDSA-P256:88
 * base64url",` 234, a kicked `"id",` 131, and the rest under 2 KiB (an owner address of 128
 * characters escaped to 6 bytes each is 768). 148 kB for 256 members.
 */
function maxRecordBytes(maxMembers: number): number {
  return 4096 + maxMembers * (198 + 234 + 131);
}

/** Bytes of a view file: 3 bytes per JSON character at most (UTF-8), plus the points' commas. */
function maxViewFileBytes(maxViewBytes: number): number {
  return 3 * (maxViewBytes + 64 * 1024);
}

const NOT_REGULAR = 'not a regular file (a link, a directory or a device)';

/** Why a file was not read; never anything read from it. */
class Skip {
  constructor(readonly reason: string) {}
}

/**
 * One room per file under `dir`: ROOM.room.json (the record) and ROOM.view.json (the kept view),
 * mode 0600 in a directory of mode 0700. Each write goes to a temporary file first (exclusive
 * create, a random name, no link followed), synced and renamed over the old one, so a crash
 * leaves either the old file or the new one, never half of one.
 */
export class FileRoomStore implements RoomStore {
  /** The directory's real path, once checked (every later use goes by it, not by `dir`). */
  private ready: Promise<string> | null = null;
  private readonly bounds: FileStoreBounds;
  private readonly schema: ReturnType<typeof savedRoomSchemaFor>;
  /** The server's user; null where there are no uids (Windows). */
  private readonly uid = process.getuid?.() ?? null;

  /** `bounds`: a server with other limits than the defaults passes fileStoreBounds(its limits). */
  constructor(
    readonly dir: string,
    bounds: Partial<FileStoreBounds> = {},
  ) {
    this.bounds = { ...DEFAULT_BOUNDS, ...bounds };
    this.schema = savedRoomSchemaFor(this.bounds.maxMembers);
  }

  /** Throws when the directory is not safe (roomsDirProblem, ancestorProblem): the server must not start. */
  async loadAll(): Promise<LoadedRooms> {
    const dir = await this.checkedDir();
    const loaded: LoadedRooms = { rooms: [], skipped: [] };
    for (const name of (await readdir(dir)).sort()) {
      if (TEMPORARY.test(name)) {
        // left by a crash: removed (a link itself, never what it points to); anything else is left alone
        await rm(join(dir, name), { force: true }).catch(() => {});
        continue;
      }
      const match = ROOM_FILE.exec(name);
      if (!match) continue;
      const stored = await this.load(dir, name, match[1] as string);
      if (stored instanceof Skip) loaded.skipped.push({ name, reason: stored.reason });
      else loaded.rooms.push(stored);
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
    const dir = await this.checkedDir();
    await rm(join(dir, `${roomId}.room.json`), { force: true });
    await rm(join(dir, `${roomId}.view.json`), { force: true });
  }

  /** Room `roomId` from file `name`, or why not. Reasons name a check, never what the file holds. */
  private async load(dir: string, name: string, roomId: string): Promise<StoredRoom | Skip> {
    const text = await this.read(join(dir, name), maxRecordBytes(this.bounds.maxMembers));
    if (text instanceof Skip) return text;
    if (text === null) return new Skip('gone while loading');
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      return new Skip('not JSON'); // V8's message quotes the text
    }
    const parsed = this.schema.safeParse(json);
    if (!parsed.success) {
      // zod's message quotes keys and values: only the field and the check are named
      const issue = parsed.error.issues[0];
      const field = issue?.path[0];
      const known = typeof field === 'string' && Object.hasOwn(this.schema.shape, field) ? field : 'record';
      return new Skip(`not a room record (${known}: ${issue?.code ?? 'invalid'})`);
    }
    if (parsed.data.id !== roomId) return new Skip('its id is not its file name');
    const view = await this.read(join(dir, `${roomId}.view.json`), maxViewFileBytes(this.bounds.maxViewBytes));
    if (view instanceof Skip) return new Skip(`its view: ${view.reason}`);
    return { room: parsed.data, view };
  }

  /**
   * The text of `path` if it is a regular file of the server's user of at most `maxBytes`; null if
   * there is none. lstat first, so a device is never opened; then opened without following a link
   * and checked again on the open file, so a file swapped in between is not read either.
   */
  private async read(path: string, maxBytes: number): Promise<string | Skip | null> {
    let before: Awaited<ReturnType<typeof lstat>>;
    try {
      before = await lstat(path);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
      return new Skip(`cannot be read (${(error as NodeJS.ErrnoException).code})`);
    }
    if (!before.isFile()) return new Skip(NOT_REGULAR);
    let file: FileHandle;
    try {
      file = await open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'ELOOP' || code === 'EMLINK') return new Skip(NOT_REGULAR);
      return code === 'ENOENT' ? null : new Skip(`cannot be read (${code})`);
    }
    try {
      const opened = await file.stat();
      if (!opened.isFile() || opened.ino !== before.ino || opened.dev !== before.dev) return new Skip(NOT_REGULAR);
      if (this.uid !== null && opened.uid !== this.uid)
        return new Skip(`owned by uid ${opened.uid}, not this server's user`);
      if (opened.size > maxBytes) return new Skip(`larger than ${maxBytes} bytes`);
      // one byte more than it said it holds: a file that grew since is caught, not cut short
      const buffer = Buffer.allocUnsafe(opened.size + 1);
      let filled = 0;
      for (;;) {
        const { bytesRead } = await file.read(buffer, filled, buffer.length - filled, filled);
        if (bytesRead === 0) break;
        filled += bytesRead;
        if (filled === buffer.length) return new Skip('changed while being read');
      }
      return buffer.toString('utf8', 0, filled);
    } finally {
      await file.close();
    }
  }

  /** The directory's real path, created 0700 if missing, after its checks; rejects for good if they fail. */
  private checkedDir(): Promise<string> {
    this.ready ??= this.prepare();
    return this.ready;
  }

  private async prepare(): Promise<string> {
    // 0700 (and the parents it makes): the records hold join tokens and watch keys. An existing
    // directory, perhaps someone else's made just now, is left as it is and checked below.
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    const real = await realpath(this.dir);
    if (process.platform === 'win32') return real; // ACLs, not modes: nothing here to check
    const problem = roomsDirProblem(real, await stat(real), this.uid);
    if (problem) throw new Error(problem);
    for (let above = dirname(real); ; above = dirname(above)) {
      const problemAbove = ancestorProblem(above, await stat(above), this.uid);
      if (problemAbove) throw new Error(problemAbove);
      if (dirname(above) === above) break;
    }
    return real;
  }

  private async write(name: string, text: string): Promise<void> {
    const dir = await this.checkedDir();
    const target = join(dir, name);
    // a name nobody can guess, created here or not at all, and never through a link
    const temporary = join(dir, `.${name}.${randomBytes(16).toString('hex')}.tmp`);
    const file = await open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600);
    try {
      await file.writeFile(text, 'utf8');
      await file.sync();
    } catch (error) {
      await file.close();
      await rm(temporary, { force: true });
      throw error;
    }
    await file.close();
    // rename replaces whatever is at `target` (a link included) and never follows it
    await rename(temporary, target);
  }
}
