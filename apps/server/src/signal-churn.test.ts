/**
 * Membership cannot be churned: a token holder that joins and drops in a loop
 * never evicts absent members (right after a restart every member is absent), and joins are
 * paced per address and per room, each refusal with its own reason code and counter.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ServerMessageOf } from '@shoal/signaling';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { RunningServer } from './index.ts';
import { startTestServer, testClients } from './test-server.ts';

let server: RunningServer;
let dir: string;
const { client, raw } = testClients(() => server);

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'shoal-churn-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true, maxRetries: 5, retryDelay: 100 });
});

/** One join from `from` on a fresh socket that then drops: 'joined' or the refusal's code. */
async function joinAndDrop(roomId: string, token: string, from?: string): Promise<string> {
  const c = await raw(from ? { from } : {});
  c.send({ kind: 'join', version: 1, roomId, token });
  const outcome = await c.outcome();
  c.close();
  return outcome;
}

describe('membership under churn', () => {
  it('never evicts absent members to make room for new joins, even right after a restart', async () => {
    // 4 seats: the room remembers 16 members
    const limits = { maxPeersPerRoom: 4 };
    server = await startTestServer({ roomsDir: dir, viewSaveIntervalMs: 10, limits });
    const created = await (await client()).create();
    const members: ServerMessageOf<'joined'>[] = [];
    for (let i = 0; i < 3; i++) members.push(await (await client()).join(created.roomId, created.joinToken));
    const port = server.port;
    await server.close();
    server = await startTestServer({ roomsDir: dir, viewSaveIntervalMs: 10, limits, port });

    // everyone is absent now; one token holder joins and drops 40 times
    const outcomes: string[] = [];
    for (let i = 0; i < 40; i++) outcomes.push(await joinAndDrop(created.roomId, created.joinToken));
    expect(outcomes.filter((o) => o === 'joined').length).toBeLessThanOrEqual(16 - 3);
    expect(outcomes.filter((o) => o !== 'joined').every((o) => o === 'room-full' || o === 'join-rate-limited')).toBe(
      true,
    );

    // every member that was there before takes its seat back as itself
    for (const member of members) {
      const back = await (await client()).rejoin(created.roomId, member.peerId, member.memberSecret as string);
      expect(back.peerId).toBe(member.peerId);
    }
    expect(server.signalingStats().peers).toBe(3);
  });

  it('refuses a join when the room remembers as many members as it may, with a reason that says so', async () => {
    server = await startTestServer({ limits: { maxPeersPerRoom: 2 } }); // remembers 8
    const created = await (await client()).create();
    const outcomes: string[] = [];
    for (let i = 0; i < 10; i++) outcomes.push(await joinAndDrop(created.roomId, created.joinToken));
    expect(outcomes).toEqual([...Array(8).fill('joined'), 'room-full', 'room-full']);
    const c = await raw();
    c.send({ kind: 'join', version: 1, roomId: created.roomId, token: created.joinToken });
    expect((await c.next('error')).message).toMatch(/remembers at most 8 members/);
    expect(server.signalingStats().rejections['room-full']).toBe(3);
  });

  it('paces joins per address (wrong tokens included) and per room (admitted joins only)', async () => {
    let t = 1_000_000;
    const limits = { joinsPerMinutePerIp: 6, joinBurstPerIp: 3, joinsPerMinutePerRoom: 12, joinBurstPerRoom: 4 };
    server = await startTestServer({ limits, now: () => t });
    const created = await (await client()).create();
    const { roomId, joinToken } = created;

    const first = [];
    for (let i = 0; i < 4; i++) first.push(await joinAndDrop(roomId, joinToken, '127.0.0.2'));
    expect(first).toEqual(['joined', 'joined', 'joined', 'join-rate-limited']);
    // wrong tokens spend the address's budget too (no guessing at full speed)
    expect(await joinAndDrop(roomId, 'wrong', '127.0.0.3')).toBe('bad-token');
    expect(await joinAndDrop(roomId, 'wrong', '127.0.0.3')).toBe('bad-token');
    expect(await joinAndDrop(roomId, 'wrong', '127.0.0.3')).toBe('bad-token');
    expect(await joinAndDrop(roomId, joinToken, '127.0.0.3')).toBe('join-rate-limited');
    t += 10_000; // one more join for each address
    expect(await joinAndDrop(roomId, joinToken, '127.0.0.2')).toBe('joined');
    // the room: 3 admitted of its burst 4, 2 refilled in 10 s, 1 more admitted: two more, then refused
    expect(await joinAndDrop(roomId, joinToken, '127.0.0.4')).toBe('joined');
    expect(await joinAndDrop(roomId, joinToken, '127.0.0.4')).toBe('joined');
    const refused = await raw({ from: '127.0.0.4' });
    refused.send({ kind: 'join', version: 1, roomId, token: joinToken });
    const error = await refused.next('error');
    expect(error).toMatchObject({ code: 'join-rate-limited', ref: 'join' });
    expect(error.message).toMatch(/room/);
    expect(server.signalingStats().rejections['join-rate-limited']).toBe(3);
  });
});
