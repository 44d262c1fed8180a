/**
 * Room ids and join tokens are random base64url, so one in 64 begins with `-`: the chaos run's
 * worker and `shoal worker` must take such values on their command line (`--token -x…`), as
 * given. Unit: the chaos worker's parser. Processes: both join a real server's room whose id and
 * token begin with `-` (kept in the server's store, so the test needs no luck).
 */
import { createHash, randomBytes } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { type RunningServer, startServer } from '../../apps/server/src/index.ts';
import { MemoryRoomStore } from '../../apps/server/src/room-store.ts';
import { type Proc, startChaosWorker, startShoal } from './processes.ts';
import { parseChaosWorkerArgs } from './worker-args.ts';

const ROOM = `-${randomBytes(8).toString('base64url')}`;
const TOKEN = `-${randomBytes(31).toString('base64url')}`;

describe("the chaos worker's arguments", () => {
  it('takes a room id and a token that begin with -, as given', () => {
    const args = parseChaosWorkerArgs(['--server', 'http://x', '--room', ROOM, '--token', TOKEN, '--hostile']);
    expect(args).toMatchObject({ server: 'http://x', room: ROOM, token: TOKEN, hostile: true, delayMs: 0, seed: 1 });
    expect(parseChaosWorkerArgs(['--server=h', `--room=${ROOM}`, `--token=${TOKEN}`])).toMatchObject({
      room: ROOM,
      token: TOKEN,
    });
  });

  it('refuses a missing option and a bad number, naming it', () => {
    expect(() => parseChaosWorkerArgs(['--server', 'h', '--room', ROOM])).toThrow(/--token/);
    expect(() => parseChaosWorkerArgs(['--server', 'h', '--room', 'r', '--token', 't', '--delay-ms', 'soon'])).toThrow(
      /--delay-ms/,
    );
  });
});

describe('a room whose id and join token begin with -', () => {
  let server: RunningServer;
  const procs: Proc[] = [];
  afterAll(async () => {
    for (const p of procs) p.child.kill('SIGKILL');
    await server?.close();
  });

  it('is joined by the chaos worker and by shoal worker', { timeout: 60_000 }, async () => {
    const store = new MemoryRoomStore();
    await store.saveRoom({
      format: 'shoal-signal-room',
      version: 1,
      id: ROOM,
      hostId: 'host',
      ownerAddress: '127.0.0.1',
      hostSecretDigest: createHash('sha256').update('host secret').digest('hex'),
      joinToken: TOKEN,
      watchKey: randomBytes(32).toString('base64url'),
      hadMember: false,
      members: {},
      kicked: [],
    });
    server = await startServer({
      port: 0,
      host: '127.0.0.1',
      staticDir: '/nonexistent',
      logger: null,
      roomStore: store,
    });
    const args = ['--server', server.url, '--room', ROOM, '--token', TOKEN];
    const started = [
      startChaosWorker('chaos worker', args, () => 0),
      startShoal('shoal worker', ['worker', ...args, '--backend', 'cpu', '--json'], () => 0),
    ];
    procs.push(...started);
    const joined = await Promise.all(
      started.map(
        (proc) =>
          new Promise<Record<string, unknown>>((resolve, reject) => {
            proc.onLine((line) => {
              if (line.json?.event === 'joined') resolve(line.json);
            });
            void proc.exit.then((code) =>
              reject(new Error(`${proc.name} exited (${code}) before joining:\n${proc.stderr}`)),
            );
          }),
      ),
    );
    // both are in the room: the server admitted the token, and each got a peer id of its own
    expect(server.signalingStats()).toMatchObject({ rooms: 1 });
    expect(new Set(joined.map((line) => line.peer)).size).toBe(2);
  });
});
