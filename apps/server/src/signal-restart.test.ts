/**
 * Rooms across a server restart: a server with a rooms directory keeps each room on disk and a
 * server started on the same directory takes them back, so the host reclaims, members rejoin as
 * themselves and watchers watch again; a corrupt or hostile file is skipped, an expired room's
 * files are deleted. Plus the rejoin rules, which hold with or without a restart.
 */
import { mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createIdentity } from '@shoal/protocol';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { RunningServer, ServerOptions } from './index.ts';
import { FileRoomStore, savedRoomSchema } from './room-store.ts';
import { roomView, startTestServer, testClients, until } from './test-server.ts';

let server: RunningServer;
let dir: string;
const { client, raw } = testClients(() => server);

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'shoal-rooms-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** A server on `dir` (the port of the one before, when `port` is given), views saved at once. */
function start(options: Partial<ServerOptions> = {}): Promise<RunningServer> {
  return startTestServer({ roomsDir: dir, viewSaveIntervalMs: 10, ...options });
}

async function restart(options: Partial<ServerOptions> = {}): Promise<void> {
  await server.close();
  server = await start({ port: server.port, ...options });
}

describe('rooms across a restart', () => {
  it('keeps each room on disk (0600, no host or member secret) and takes it back after a restart', async () => {
    server = await start();
    expect(server.roomsDir).toBe(dir);
    const host = await client();
    const created = await host.create();
    const member = await client();
    const joined = await member.join(created.roomId, created.joinToken);
    expect(joined.memberSecret).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const token = await host.rotateToken();
    host.publish(roomView(created.roomId, [1_000, 2_000]));
    await until(() => server.signalingStats().viewBytes > 0);
    const viewFile = join(dir, `${created.roomId}.view.json`);
    await expect
      .poll(() =>
        stat(viewFile).then(
          () => true,
          () => false,
        ),
      )
      .toBe(true);

    const roomFile = join(dir, `${created.roomId}.room.json`);
    expect((await stat(roomFile)).mode & 0o777).toBe(0o600);
    expect((await stat(dir)).mode & 0o777).toBe(0o700);
    const text = await readFile(roomFile, 'utf8');
    expect(text).not.toContain(created.hostSecret);
    expect(text).not.toContain(joined.memberSecret);
    const saved = savedRoomSchema.parse(JSON.parse(text));
    expect(saved).toMatchObject({ id: created.roomId, hostId: created.peerId, joinToken: token, hadMember: true });
    expect(Object.keys(saved.members)).toEqual([joined.peerId]);

    await restart();
    expect(server.signalingStats()).toMatchObject({ rooms: 1, peers: 0, restoredRooms: 1, skippedRooms: 0 });
    // the host takes its room back with the same ids and credentials; the member rejoins as itself
    const back = await client();
    const reclaimed = await back.reclaim(created.roomId, created.hostSecret);
    expect(reclaimed).toMatchObject({ peerId: created.peerId, joinToken: token, watchKey: created.watchKey });
    const again = await client();
    const rejoined = await again.rejoin(created.roomId, joined.peerId, joined.memberSecret as string);
    expect(rejoined).toMatchObject({ peerId: joined.peerId, hostId: created.peerId, hostPresent: true });
    expect(rejoined.memberSecret).toBeUndefined();
    expect(rejoined.peers).toEqual([created.peerId]);
    // the kept view came back for watchers and for check
    const watching = await (await client()).watch(created.roomId, created.watchKey as string);
    expect(watching.view?.points.map((p) => p.t)).toEqual([1_000, 2_000]);
    expect((await (await client()).check(created.roomId, token)).status).toBe('running');
  });

  it("keeps each member's key: after a restart a rejoin with another key is refused key-changed", async () => {
    const [hostKeys, aliceKeys, otherKeys] = await Promise.all([createIdentity(), createIdentity(), createIdentity()]);
    server = await start();
    const created = await (await client({ identity: hostKeys })).create();
    const joined = await (await client({ identity: aliceKeys })).join(created.roomId, created.joinToken);
    const secret = joined.memberSecret as string;
    await restart();
    const rekeyed = await raw();
    rekeyed.send({
      kind: 'rejoin',
      version: 1,
      roomId: created.roomId,
      peerId: joined.peerId,
      memberSecret: secret,
      key: otherKeys.key,
    });
    expect(await rekeyed.error()).toBe('key-changed');
    const again = await client({ identity: aliceKeys });
    expect(await again.rejoin(created.roomId, joined.peerId, secret)).toMatchObject({ peerId: joined.peerId });
  });

  it('skips a corrupt or hostile file with a log line and a counter, and takes back the rest', async () => {
    server = await start();
    const created = await (await client()).create();
    await expect.poll(() => readdir(dir)).toContain(`${created.roomId}.room.json`);
    await writeFile(join(dir, 'broken.room.json'), '{"format":"shoal-signal-room",');
    const hostile = { ...JSON.parse(await readFile(join(dir, `${created.roomId}.room.json`), 'utf8')), id: 'other' };
    await writeFile(join(dir, 'other.room.json'), JSON.stringify({ ...hostile, hostSecretDigest: 'x'.repeat(64) }));
    await writeFile(join(dir, 'renamed.room.json'), JSON.stringify({ ...hostile, id: 'elsewhere' }));
    await writeFile(join(dir, `${created.roomId}.view.json`), '{"not":"a view"}');
    const lines: string[] = [];
    await restart({ logger: (line) => lines.push(line) });
    expect(server.signalingStats()).toMatchObject({ rooms: 1, restoredRooms: 1, skippedRooms: 3 });
    expect(server.signalingStats().rejections['bad-room-record']).toBe(3);
    expect(lines.filter((line) => line.includes('"room-skipped"'))).toHaveLength(3);
    expect(lines.some((line) => line.includes('"view-skipped"'))).toBe(true);
  });

  it('lets a room nobody comes back to expire after its grace, and deletes its files', async () => {
    const limits = { emptyRoomGraceMs: 200, neverJoinedRoomGraceMs: 200 };
    server = await start({ limits });
    const host = await client();
    const created = await host.create();
    host.publish(roomView(created.roomId, [1_000]));
    await expect.poll(() => readdir(dir)).toContain(`${created.roomId}.view.json`);
    await restart({ limits });
    expect(server.signalingStats().rooms).toBe(1);
    await until(() => server.signalingStats().rooms === 0, 3_000);
    await expect.poll(() => readdir(dir)).toEqual([]);
    await expect((await client()).reclaim(created.roomId, created.hostSecret)).rejects.toMatchObject({
      code: 'no-such-room',
    });
  });

  it('keeps nothing without a rooms directory', async () => {
    server = await startTestServer({ roomsDir: null });
    expect(server.roomsDir).toBeNull();
    const created = await (await client()).create();
    await server.close();
    server = await startTestServer({ roomsDir: null, port: server.port });
    await expect((await client()).reclaim(created.roomId, created.hostSecret)).rejects.toMatchObject({
      code: 'no-such-room',
    });
  });
});

describe('rejoin', () => {
  it('seats a member as itself with its secret, after the token rotated; refuses a wrong secret, an id in use, a kicked member, an unknown room', async () => {
    server = await startTestServer();
    const host = await client();
    const created = await host.create();
    const member = await client();
    const joined = await member.join(created.roomId, created.joinToken);
    const secret = joined.memberSecret as string;
    await host.rotateToken();

    const twin = await client();
    await expect(twin.rejoin(created.roomId, joined.peerId, secret)).rejects.toMatchObject({ code: 'peer-present' });
    await expect(twin.rejoin(created.roomId, joined.peerId, created.hostSecret)).rejects.toMatchObject({
      code: 'bad-secret',
    });
    await expect(twin.rejoin(created.roomId, 'somebodyelse', secret)).rejects.toMatchObject({ code: 'bad-secret' });
    await expect(twin.rejoin(created.roomId, created.peerId, secret)).rejects.toMatchObject({ code: 'bad-secret' });
    await expect(twin.rejoin('nosuchroom', joined.peerId, secret)).rejects.toMatchObject({ code: 'no-such-room' });

    const events: string[] = [];
    host.on('peer-joined', ({ peer }) => events.push(`joined ${peer}`));
    member.close();
    await until(() => server.signalingStats().peers === 1);
    const rejoined = await twin.rejoin(created.roomId, joined.peerId, secret);
    expect(rejoined.peerId).toBe(joined.peerId);
    await until(() => events.length === 1);
    expect(events).toEqual([`joined ${joined.peerId}`]);

    host.kick(joined.peerId);
    await until(() => server.signalingStats().peers === 1);
    await expect((await client()).rejoin(created.roomId, joined.peerId, secret)).rejects.toMatchObject({
      code: 'kicked',
    });
  });

  it('forgets a member that left for good', async () => {
    server = await startTestServer();
    const created = await (await client()).create();
    const member = await client();
    const joined = await member.join(created.roomId, created.joinToken);
    member.leave();
    await until(() => server.signalingStats().peers === 1);
    await expect(
      (await client()).rejoin(created.roomId, joined.peerId, joined.memberSecret as string),
    ).rejects.toMatchObject({ code: 'bad-secret' });
  });
});

describe('FileRoomStore', () => {
  it('writes through a temporary file and leaves none behind', async () => {
    const store = new FileRoomStore(join(dir, 'nested'));
    expect(await store.loadAll()).toEqual({ rooms: [], skipped: [] });
    const room = savedRoomSchema.parse({
      format: 'shoal-signal-room',
      version: 1,
      id: 'r1',
      hostId: 'h1',
      ownerAddress: '127.0.0.1',
      hostSecretDigest: 'a'.repeat(64),
      joinToken: 't1',
      watchKey: 'w1',
      hadMember: false,
      members: {},
      kicked: [],
    });
    await Promise.all([store.saveRoom(room), store.saveRoom({ ...room, hadMember: true }), store.saveView('r1', '{}')]);
    expect((await readdir(join(dir, 'nested'))).sort()).toEqual(['r1.room.json', 'r1.view.json']);
    const loaded = await store.loadAll();
    expect(loaded.rooms).toHaveLength(1);
    await store.delete('r1');
    expect(await readdir(join(dir, 'nested'))).toEqual([]);
  });
});
