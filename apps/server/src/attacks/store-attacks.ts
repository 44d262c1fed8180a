/**
 * Attacks on the rooms directory: a stranger who can write the directory
 * plants links, records, huge files or FIFOs there, to receive join tokens and watch keys, take a
 * room over after a restart, read a file through the server's log, or stall or bloat the server.
 * The first line of defence is that the server refuses a directory anyone else can write or
 * replace; each attack also tries the same plant in the server's own directory (as if it got in
 * anyway) to measure the second line: no link followed, only small regular files of the server's
 * user loaded, nothing of a file's contents logged.
 */
import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import {
  chmod,
  chown,
  lstat,
  mkdir,
  mkdtemp,
  open,
  readdir,
  readFile,
  rename,
  rm,
  symlink,
  writeFile,
} from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SignalClient, signalUrl } from '@shoal/signaling';
import { WebSocket } from 'ws';
import { type RunningServer, startServer } from '../index.ts';
import { FileRoomStore, fileStoreBounds, type SavedRoom } from '../room-store.ts';
import { DEFAULT_SIGNALING_LIMITS } from '../signal-config.ts';
import type { ServerAttack, ServerAttackOutcome } from './types.ts';

/** Root may give files away, so it can play a stranger who owns what they plant; others cannot. */
const isRoot = process.getuid?.() === 0;
/** `nobody` on most systems: the stranger, when we are root. */
const STRANGER = 65534;

/** A fresh scratch directory for `use`, removed afterwards whatever happens. */
async function scratch<T>(use: (base: string) => Promise<T>): Promise<T> {
  const base = await mkdtemp(join(tmpdir(), 'shoal-store-attack-'));
  try {
    return await use(base);
  } finally {
    await rm(base, { recursive: true, force: true });
  }
}

/** A directory made with `mode` exactly (mkdir's mode passes through the umask). */
async function directory(path: string, mode: number): Promise<string> {
  await mkdir(path, { recursive: true });
  await chmod(path, mode);
  return path;
}

const digest = (text: string) => createHash('sha256').update(text).digest('hex');

/** A well-formed record of room `id` whose host secret is `hostSecret` (the attacker's, when planted). */
function record(id: string, hostSecret: string, members: Record<string, string> = {}): SavedRoom {
  return {
    format: 'shoal-signal-room',
    version: 1,
    id,
    hostId: 'plantedhost',
    ownerAddress: '127.0.0.1',
    hostSecretDigest: digest(hostSecret),
    joinToken: 'JOINTOKENvictim',
    watchKey: 'WATCHKEYvictim',
    hadMember: false,
    members,
    kicked: [],
  };
}

/** `n` members, ids and digests distinct. */
const manyMembers = (n: number) =>
  Object.fromEntries(Array.from({ length: n }, (_, i) => [`m${i}`, i.toString(16).padStart(64, '0')]));

/** A server on loopback keeping its rooms in `roomsDir`, or the error it refused to start with. */
async function serverOn(roomsDir: string, lines: string[] = []): Promise<RunningServer | Error> {
  return startServer({
    port: 0,
    host: '127.0.0.1',
    staticDir: '/nonexistent',
    roomsDir,
    logger: (line) => lines.push(line),
  }).catch((error: Error) => error);
}

/** The attacker's host secret: well-formed, so only the room's own check can refuse it. */
const ATTACKER_SECRET = randomBytes(32).toString('base64url');

/** What `secret` gets reclaiming room `roomId` on `server`: 'reclaimed', or the refusal's code. */
async function reclaim(server: RunningServer, roomId: string, secret: string): Promise<string> {
  const client = await SignalClient.connect(signalUrl(server.url), WebSocket);
  try {
    await client.reclaim(roomId, secret);
    return 'reclaimed';
  } catch (error) {
    return (error as { code?: string }).code ?? 'error';
  } finally {
    client.close();
  }
}

/**
 * A server on `roomsDir`, where the attacker planted a record of room `victim` with its own host
 * secret: the error it refused to start with, or what the attacker's reclaim got. Only a refusal
 * of the room itself (no-such-room, bad-secret) counts as held; anything else is inconclusive.
 */
async function plantedReclaim(roomsDir: string) {
  const server = await serverOn(roomsDir);
  if (server instanceof Error) return { refused: server.message, held: true, got: 'no server' };
  try {
    const got = await reclaim(server, 'victim', ATTACKER_SECRET);
    return { refused: null, held: got === 'no-such-room' || got === 'bad-secret', got };
  } finally {
    await server.close();
  }
}

const storeSymlinkTemp: ServerAttack = {
  name: 'store-symlink-temp',
  family: 'store',
  summary:
    'plants links at the temporary names and the record name the server writes, to receive join tokens and watch keys',
  run: () =>
    scratch(async (base) => {
      const attacker = await directory(join(base, 'attacker'), 0o700);
      const rooms = await directory(join(base, 'rooms'), 0o777);
      const target = join(rooms, 'victim.room.json');
      const plant = async () => {
        // the names servers used to write to (ROOM.room.json.PID.N.tmp), and the record itself
        for (let n = 1; n <= 32; n++) await symlink(join(attacker, `tmp-${n}`), `${target}.${process.pid}.${n}.tmp`);
        await symlink(join(attacker, 'record'), target);
      };
      // the server loads its rooms first; the links are planted after, for its writes to find
      const save = async () => {
        const store = new FileRoomStore(rooms);
        await store.loadAll();
        await plant();
        await store.saveRoom(record('victim', 'the real host'));
        await store.saveView('victim', '{"view":"WATCHKEYvictim"}');
      };
      const refused = await save().then(
        () => false,
        () => true,
      );
      // again in the server's own 0700 directory, the links planted as if it had got in anyway
      await chmod(rooms, 0o700);
      await rm(rooms, { recursive: true });
      await directory(rooms, 0o700);
      const ownDirError = await save().then(
        () => null,
        (error: Error) => error.message,
      );
      let leaked = 0;
      for (const name of await readdir(attacker)) {
        const text = await readFile(join(attacker, name), 'utf8').catch(() => '');
        if (text.includes('JOINTOKENvictim') || text.includes('WATCHKEYvictim')) leaked++;
      }
      const recordIsLink = (await lstat(target)).isSymbolicLink();
      return {
        stopped: leaked === 0 && !recordIsLink && ownDirError === null,
        detected: refused,
        refusals: refused ? 1 : 0,
        detail:
          `world-writable directory ${refused ? 'refused' : 'used'}; in the server's own directory with 33 links ` +
          `planted: ${leaked} attacker files got a token or watch key, the record is ${recordIsLink ? 'a link' : 'a regular file'}` +
          (ownDirError ? `, the write failed: ${ownDirError}` : ''),
      };
    }),
};

const storePlantedRecord: ServerAttack = {
  name: 'store-planted-record',
  family: 'store',
  summary: 'plants a record with its own host-secret digest in a rooms directory it can write, then reclaims the room',
  run: () =>
    scratch(async (base) => {
      const phases: { where: string; refused: string | null; held: boolean; got: string }[] = [];
      const rooms = await directory(join(base, 'open'), 0o777);
      await writeFile(join(rooms, 'victim.room.json'), JSON.stringify(record('victim', ATTACKER_SECRET)));
      phases.push({ where: 'world-writable', ...(await plantedReclaim(rooms)) });
      if (isRoot) {
        const theirs = await directory(join(base, 'theirs'), 0o700);
        await writeFile(join(theirs, 'victim.room.json'), JSON.stringify(record('victim', ATTACKER_SECRET)));
        await chown(theirs, STRANGER, STRANGER);
        phases.push({ where: `uid ${STRANGER}'s`, ...(await plantedReclaim(theirs)) });
      }
      const refusals = phases.filter((phase) => phase.refused !== null).length;
      return {
        stopped: phases.every((phase) => phase.held),
        detected: refusals === phases.length,
        refusals,
        detail:
          phases
            .map(
              (p) =>
                `${p.where} directory: ${p.refused ? 'server refused to start' : `server started, the attacker's reclaim got ${p.got}`}`,
            )
            .join('; ') + (isRoot ? '' : ' (not root: a directory of another user was not tried)'),
      };
    }),
};

const storeReplacedDir: ServerAttack = {
  name: 'store-replaced-dir',
  family: 'store',
  summary:
    "moves the server's private rooms directory aside (its parent is writable by all, not sticky) and puts its own in its place",
  run: () =>
    scratch(async (base) => {
      const parent = await directory(join(base, 'shared'), 0o777);
      const rooms = await directory(join(parent, 'rooms'), 0o700);
      await rename(rooms, join(parent, 'rooms.moved'));
      await directory(rooms, 0o700);
      await writeFile(join(rooms, 'victim.room.json'), JSON.stringify(record('victim', ATTACKER_SECRET)));
      // left the server's user's (not chowned to a stranger) so that only the check of the parent can catch it
      const { refused, held, got } = await plantedReclaim(rooms);
      return {
        stopped: held,
        detected: refused !== null,
        refusals: refused ? 1 : 0,
        detail: `${refused ? `server refused to start: ${refused.slice(0, 160)}` : `server started, the attacker's reclaim got ${got}`}`,
      };
    }),
};

const storeSymlinkLeak: ServerAttack = {
  name: 'store-symlink-leak',
  family: 'store',
  summary: "plants a link to a private file, the file's text and a record quoting it, to read it in the server's log",
  run: () =>
    scratch(async (base) => {
      // V8 quotes only the first characters of text that is not JSON: the marker comes first
      const secret = 'SECRETLEAK:x:0:0:root:/root:/bin/sh';
      const attacker = await directory(join(base, 'attacker'), 0o700);
      await writeFile(join(attacker, 'passwd'), `${secret}\n`);
      const plant = async (rooms: string) => {
        await symlink(join(attacker, 'passwd'), join(rooms, 'a.room.json'));
        await writeFile(join(rooms, 'b.room.json'), `${secret}\n`);
        await writeFile(
          join(rooms, 'c.room.json'),
          JSON.stringify({ ...record('c', 'x'), members: { [secret]: digest('x') } }),
        );
      };
      const lines: string[] = [];
      const open = await directory(join(base, 'open'), 0o777);
      await plant(open);
      const refused = await serverOn(open, lines);
      if (!(refused instanceof Error)) await refused.close();
      else lines.push(refused.message);
      const own = await directory(join(base, 'own'), 0o700);
      await plant(own);
      const server = await serverOn(own, lines);
      let restored = 0;
      if (!(server instanceof Error)) {
        restored = server.signalingStats().restoredRooms;
        await server.close();
      } else lines.push(server.message);
      const leaks = lines.filter((line) => line.includes('SECRETLEAK')).length;
      const skipped = lines.filter((line) => line.includes('"room-skipped"')).length;
      return {
        stopped: leaks === 0 && restored === 0,
        detected: skipped === 3,
        refusals: skipped + (refused instanceof Error ? 1 : 0),
        detail:
          `world-writable directory ${refused instanceof Error ? 'refused' : 'used'}; own directory: ${skipped} room-skipped lines, ` +
          `${restored} rooms restored; ${leaks} of ${lines.length} log lines quote the file`,
      };
    }),
};

/** Loads `planted` (file name → text) from the server's own directory: what came back, what was skipped, how long it took. */
async function loadPlanted(planted: Record<string, string>) {
  return scratch(async (base) => {
    const rooms = await directory(join(base, 'rooms'), 0o700);
    for (const [name, text] of Object.entries(planted)) await writeFile(join(rooms, name), text);
    const rssBefore = process.memoryUsage().rss;
    const started = performance.now();
    const loaded = await new FileRoomStore(rooms).loadAll();
    return {
      ms: performance.now() - started,
      rssMB: (process.memoryUsage().rss - rssBefore) / 2 ** 20,
      members: loaded.rooms.reduce((sum, stored) => sum + Object.keys(stored.room.members).length, 0),
      rooms: loaded.rooms.length,
      skipped: loaded.skipped,
    };
  });
}

const storeOversizedRecord: ServerAttack = {
  name: 'store-oversized-record',
  family: 'store',
  summary: 'plants a 15 MB record with 200,000 members to bloat the server when it loads its rooms',
  run: async () => {
    // spliced as text: building 200,000 entries as an object first takes seconds
    const digests = Array.from({ length: 16 }, (_, i) => digest(String(i)));
    const entries = Array.from({ length: 200_000 }, (_, i) => `"m${i}":"${digests[i % 16]}"`);
    const text = JSON.stringify(record('huge', 'x')).replace('"members":{}', `"members":{${entries.join(',')}}`);
    const result = await loadPlanted({ 'huge.room.json': text });
    return {
      stopped: result.rooms === 0,
      detected: result.skipped.length === 1,
      refusals: result.skipped.length,
      detail:
        `${(text.length / 1e6).toFixed(1)} MB record: ${result.rooms} rooms with ${result.members} members loaded ` +
        `in ${result.ms.toFixed(0)} ms (RSS +${result.rssMB.toFixed(0)} MB); skipped: ${result.skipped.map((s) => s.reason).join(', ') || 'none'}`,
    };
  },
};

const storeTooManyMembers: ServerAttack = {
  name: 'store-too-many-members',
  family: 'store',
  summary: 'plants a small record with one member more than a room keeps (and as many kicked ids)',
  run: async () => {
    const { maxMembers } = fileStoreBounds(DEFAULT_SIGNALING_LIMITS);
    const crowded = manyMembers(maxMembers + 1);
    const result = await loadPlanted({
      'members.room.json': JSON.stringify(record('members', 'x', crowded)),
      'kicked.room.json': JSON.stringify({ ...record('kicked', 'x'), kicked: Object.keys(crowded) }),
    });
    return {
      stopped: result.rooms === 0,
      detected: result.skipped.length === 2,
      refusals: result.skipped.length,
      detail: `${maxMembers + 1} members / kicked ids (a room keeps ${maxMembers}): ${result.rooms} of 2 records loaded; skipped: ${result.skipped.map((s) => s.reason).join(', ') || 'none'}`,
    };
  },
};

const storeFifoRecord: ServerAttack = {
  name: 'store-fifo-record',
  family: 'store',
  summary:
    'plants a FIFO as a record, so that loading the rooms waits for a writer for ever and the server never starts',
  run: () =>
    scratch(async (base): Promise<ServerAttackOutcome> => {
      const rooms = await directory(join(base, 'rooms'), 0o700);
      const fifo = join(rooms, 'stall.room.json');
      try {
        execFileSync('mkfifo', [fifo], { stdio: 'ignore' });
      } catch {
        return { stopped: true, detected: false, refusals: 0, detail: 'no mkfifo here: no FIFO to plant' };
      }
      const started = performance.now();
      const load = new FileRoomStore(rooms).loadAll();
      const timedOut = Symbol('timed out');
      let timer: ReturnType<typeof setTimeout> | undefined;
      const result = await Promise.race([
        load,
        new Promise<typeof timedOut>((resolve) => {
          timer = setTimeout(() => resolve(timedOut), 2_000);
        }),
      ]);
      clearTimeout(timer);
      if (result === timedOut) {
        // release the reader still blocked on it (a thread of the pool), so this process can go on
        const writer = await open(fifo, constants.O_WRONLY | constants.O_NONBLOCK).catch(() => null);
        await writer?.close();
        await load.catch(() => {});
        return {
          stopped: false,
          detected: false,
          refusals: 0,
          detail: 'loading the rooms still waited on the FIFO after 2 s',
        };
      }
      return {
        stopped: true,
        detected: result.skipped.length === 1,
        refusals: result.skipped.length,
        detail: `loaded in ${(performance.now() - started).toFixed(0)} ms; skipped: ${result.skipped.map((s) => s.reason).join(', ')}`,
      };
    }),
};

/** One per way the issue (and this file's header) found to abuse the rooms directory. */
export const STORE_ATTACKS: ServerAttack[] = [
  storeSymlinkTemp,
  storePlantedRecord,
  storeReplacedDir,
  storeSymlinkLeak,
  storeOversizedRecord,
  storeTooManyMembers,
  storeFifoRecord,
];
