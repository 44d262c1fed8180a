/**
 * The file store trusts nothing on disk: a rooms directory others can write is refused, writes
 * never follow a planted link, and loading reads only the server's own regular files, under a
 * size cap, through a schema with bounded members, naming what it skipped without its contents.
 */
import { execFileSync } from 'node:child_process';
import { chmod, chown, lstat, mkdir, mkdtemp, readdir, readFile, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { FileRoomStore, roomsDirProblem, type SavedRoom } from './room-store.ts';

let base: string;
/** The rooms directory (0700, the test's own). */
let dir: string;
/** Files of "the attacker", outside the rooms directory. */
let outside: string;

beforeEach(async () => {
  base = await mkdtemp(join(tmpdir(), 'shoal-store-'));
  dir = join(base, 'rooms');
  outside = join(base, 'attacker');
  await mkdir(dir, { mode: 0o700 });
  await mkdir(outside);
});
afterEach(async () => {
  await rm(base, { recursive: true, force: true });
});

const hex = (n: number) => n.toString(16).padStart(64, '0');

/** A valid record, or one with too many members (not parsed: the schema would refuse it). */
function record(id: string, extra: Partial<SavedRoom> = {}): SavedRoom {
  return {
    format: 'shoal-signal-room',
    version: 1,
    id,
    hostId: 'h1',
    ownerAddress: '127.0.0.1',
    hostSecretDigest: 'a'.repeat(64),
    joinToken: 'token1',
    watchKey: 'watch1',
    hadMember: false,
    members: {},
    kicked: [],
    ...extra,
  };
}

/** `n` members with distinct ids and digests. */
function members(n: number): Record<string, string> {
  return Object.fromEntries(Array.from({ length: n }, (_, i) => [`member${i}`, hex(i)]));
}

describe('FileRoomStore writes', () => {
  it('writes through a temporary file and leaves none behind', async () => {
    const store = new FileRoomStore(join(dir, 'nested'));
    expect(await store.loadAll()).toEqual({ rooms: [], skipped: [] });
    await Promise.all([store.saveRoom(record('r1')), store.saveRoom(record('r1', { hadMember: true }))]);
    await store.saveView('r1', '{}');
    expect((await readdir(join(dir, 'nested'))).sort()).toEqual(['r1.room.json', 'r1.view.json']);
    expect((await store.loadAll()).rooms).toHaveLength(1);
    await store.delete('r1');
    expect(await readdir(join(dir, 'nested'))).toEqual([]);
  });

  it('creates a missing directory 0700 and its records 0600', async () => {
    const store = new FileRoomStore(join(dir, 'new'));
    await store.saveRoom(record('r1'));
    expect((await stat(join(dir, 'new'))).mode & 0o777).toBe(0o700);
    expect((await stat(join(dir, 'new', 'r1.room.json'))).mode & 0o777).toBe(0o600);
  });

  it('never writes through a link planted at a temporary name, and leaves the record a regular file', async () => {
    // the names the store used to write to: ROOM.room.json.PID.N.tmp, N counting from 1
    const target = join(dir, 'r1.room.json');
    for (let n = 1; n <= 20; n++) await symlink(join(outside, `stolen-${n}`), `${target}.${process.pid}.${n}.tmp`);
    const store = new FileRoomStore(dir);
    await store.saveRoom(record('r1'));
    await store.saveView('r1', '{"view":1}');
    expect(await readdir(outside)).toEqual([]);
    expect((await lstat(target)).isFile()).toBe(true);
    expect(JSON.parse(await readFile(target, 'utf8')).joinToken).toBe('token1');
  });

  it('replaces a link planted at the record name instead of writing through it', async () => {
    const victim = join(outside, 'victim');
    await writeFile(victim, 'untouched');
    await symlink(victim, join(dir, 'r1.room.json'));
    await symlink(victim, join(dir, 'r1.view.json'));
    const store = new FileRoomStore(dir);
    await store.saveRoom(record('r1'));
    await store.saveView('r1', '{}');
    expect(await readFile(victim, 'utf8')).toBe('untouched');
    expect((await lstat(join(dir, 'r1.room.json'))).isFile()).toBe(true);
    expect((await lstat(join(dir, 'r1.view.json'))).isFile()).toBe(true);
  });
});

describe('FileRoomStore refuses a directory others control', () => {
  it('refuses a world- or group-writable directory, saying what to chmod', async () => {
    for (const mode of [0o777, 0o770, 0o702]) {
      await chmod(dir, mode);
      const store = new FileRoomStore(dir);
      await expect(store.loadAll()).rejects.toThrow(`chmod 700 ${dir}`);
      await expect(store.saveRoom(record('r1'))).rejects.toThrow(/writable by others/);
    }
    expect(await readdir(dir)).toEqual([]);
  });

  it('refuses a directory inside one that others can write without the sticky bit', async () => {
    const open = join(base, 'open');
    await mkdir(join(open, 'rooms'), { recursive: true, mode: 0o700 });
    await chmod(open, 0o777);
    await expect(new FileRoomStore(join(open, 'rooms')).loadAll()).rejects.toThrow(`chmod o-w,g-w ${open}`);
    // /tmp's sticky bit keeps others from renaming what they do not own: fine
    await chmod(open, 0o1777);
    expect(await new FileRoomStore(join(open, 'rooms')).loadAll()).toEqual({ rooms: [], skipped: [] });
  });

  it('names the owner and what to chown for a directory another user owns (injected stat)', () => {
    const directory = { uid: 1001, mode: 0o40700, isDirectory: () => true };
    expect(roomsDirProblem('/srv/rooms', directory, 1000)).toMatch(
      /\/srv\/rooms is owned by uid 1001, not this server's user \(uid 1000\).*chown 1000 \/srv\/rooms/,
    );
    expect(roomsDirProblem('/srv/rooms', { ...directory, uid: 1000 }, 1000)).toBeNull();
    expect(roomsDirProblem('/srv/rooms', { ...directory, uid: 1000, mode: 0o40777 }, 1000)).toMatch(
      /writable by others \(mode 777\).*chmod 700 \/srv\/rooms/,
    );
    expect(
      roomsDirProblem('/srv/rooms', { ...directory, uid: 1000, mode: 0o100600, isDirectory: () => false }, 1000),
    ).toMatch(/not a directory/);
  });

  it('refuses a real directory another user owns (when the test may chown)', async () => {
    if (process.getuid?.() !== 0) return; // only root can give a directory away; the injected-stat test covers the rest
    await chown(dir, 65534, 65534);
    await expect(new FileRoomStore(dir).loadAll()).rejects.toThrow(/owned by uid 65534/);
  });
});

describe('FileRoomStore loads only what it could have written', () => {
  async function loadWith(name: string, text: string) {
    await writeFile(join(dir, name), text, { mode: 0o600 });
    return new FileRoomStore(dir).loadAll();
  }

  it('skips a record that is a symlink, and a view that is one', async () => {
    const elsewhere = join(outside, 'r1.json');
    await writeFile(elsewhere, JSON.stringify(record('r1')));
    await symlink(elsewhere, join(dir, 'r1.room.json'));
    await writeFile(join(dir, 'r2.room.json'), JSON.stringify(record('r2')));
    await writeFile(join(outside, 'view'), '{"secret view":1}');
    await symlink(join(outside, 'view'), join(dir, 'r2.view.json'));
    const loaded = await new FileRoomStore(dir).loadAll();
    expect(loaded.rooms).toEqual([]);
    expect(loaded.skipped).toEqual([
      { name: 'r1.room.json', reason: 'not a regular file (a link, a directory or a device)' },
      { name: 'r2.room.json', reason: 'its view: not a regular file (a link, a directory or a device)' },
    ]);
  });

  it('removes the temporaries a crash left (a link without touching its target), and starts despite a directory so named', async () => {
    const kept = join(outside, 'kept');
    await writeFile(kept, 'kept');
    await writeFile(join(dir, '.r1.room.json.0123abcd.tmp'), '{}');
    await symlink(kept, join(dir, `r1.view.json.${process.pid}.1.tmp`));
    await mkdir(join(dir, '.r2.room.json.0123abcd.tmp'));
    expect(await new FileRoomStore(dir).loadAll()).toEqual({ rooms: [], skipped: [] });
    expect(await readdir(dir)).toEqual(['.r2.room.json.0123abcd.tmp']);
    expect(await readFile(kept, 'utf8')).toBe('kept');
  });

  it('skips a FIFO without waiting for a writer', { timeout: 5_000 }, async () => {
    execFileSync('mkfifo', [join(dir, 'r1.room.json')]);
    const loaded = await new FileRoomStore(dir).loadAll();
    expect(loaded.skipped).toEqual([
      { name: 'r1.room.json', reason: 'not a regular file (a link, a directory or a device)' },
    ]);
  });

  it('skips a record larger than the largest one the server writes, without reading it whole', async () => {
    // 20,000 members: 1.7 MB, where 256 members (4 × 64 seats) and 256 kicked ids take under 90 kB
    const loaded = await loadWith('r1.room.json', JSON.stringify(record('r1', { members: members(20_000) })));
    expect(loaded.rooms).toEqual([]);
    expect(loaded.skipped).toEqual([
      { name: 'r1.room.json', reason: expect.stringMatching(/^larger than \d+ bytes$/) },
    ]);
  });

  it('skips a record with more members or kicked ids than the server keeps', async () => {
    const store = new FileRoomStore(dir);
    await store.saveRoom(record('full', { members: members(256), kicked: Object.keys(members(256)) }));
    await writeFile(join(dir, 'r1.room.json'), JSON.stringify(record('r1', { members: members(257) })));
    await writeFile(join(dir, 'r2.room.json'), JSON.stringify(record('r2', { kicked: Object.keys(members(257)) })));
    const loaded = await store.loadAll();
    expect(loaded.rooms.map((stored) => stored.room.id)).toEqual(['full']);
    expect(loaded.skipped).toEqual([
      { name: 'r1.room.json', reason: 'not a room record (members: too_big)' },
      { name: 'r2.room.json', reason: 'not a room record (kicked: too_big)' },
    ]);
    // a server with larger rooms keeps more: its store takes the bound from the server's limits
    expect((await new FileRoomStore(dir, { maxMembers: 300 }).loadAll()).rooms).toHaveLength(3);
  });

  it('skips an oversized view, and the room with it', async () => {
    await writeFile(join(dir, 'r1.room.json'), JSON.stringify(record('r1')));
    await writeFile(join(dir, 'r1.view.json'), `"${'x'.repeat(250_000)}"`);
    const loaded = await new FileRoomStore(dir, { maxViewBytes: 1_000 }).loadAll();
    expect(loaded.skipped).toEqual([{ name: 'r1.room.json', reason: 'its view: larger than 199608 bytes' }]);
  });

  it('never puts a file’s contents in a skip reason', async () => {
    const secret = 'root:x:0:0:SECRET-LINE';
    await writeFile(join(outside, 'passwd'), `${secret}\n`);
    await symlink(join(outside, 'passwd'), join(dir, 'a.room.json'));
    await writeFile(join(dir, 'b.room.json'), `${secret}\n`);
    await writeFile(join(dir, 'c.room.json'), `{"x":"${secret}`);
    await writeFile(join(dir, 'd.room.json'), JSON.stringify({ ...record('d'), members: { [secret]: hex(1) } }));
    await writeFile(join(dir, 'e.room.json'), JSON.stringify({ ...record('e'), joinToken: secret }));
    await writeFile(join(dir, 'f.room.json'), JSON.stringify({ ...record('f'), format: secret }));
    await writeFile(join(dir, 'g.room.json'), JSON.stringify(record('SECRETLINE')));
    const loaded = await new FileRoomStore(dir).loadAll();
    expect(loaded.rooms).toEqual([]);
    expect(loaded.skipped.map((skip) => skip.name)).toEqual(
      ['a', 'b', 'c', 'd', 'e', 'f', 'g'].map((n) => `${n}.room.json`),
    );
    const reasons = JSON.stringify(loaded.skipped);
    expect(reasons).not.toMatch(/SECRET|root:x/);
    expect(loaded.skipped.map((skip) => skip.reason)).toEqual([
      'not a regular file (a link, a directory or a device)',
      'not JSON',
      'not JSON',
      'not a room record (members: invalid_key)',
      'not a room record (joinToken: invalid_format)',
      'not a room record (format: invalid_value)',
      'its id is not its file name',
    ]);
  });

  it('skips a record another user owns (when the test may chown)', async () => {
    if (process.getuid?.() !== 0) return; // only root can give a file away
    await writeFile(join(dir, 'r1.room.json'), JSON.stringify(record('r1')));
    await chown(join(dir, 'r1.room.json'), 65534, 65534);
    expect((await new FileRoomStore(dir).loadAll()).skipped).toEqual([
      { name: 'r1.room.json', reason: "owned by uid 65534, not this server's user" },
    ]);
  });
});
