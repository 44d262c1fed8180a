/**
 * Rooms outlive their server and end when their host is gone, in Chromium.
 * This spec runs its own `shoal server` with a rooms directory (the config's webServer is shared
 * by every spec), so that it can SIGKILL it and start it again on the same port.
 *
 * 1. A host dashboard, a volunteer on the CPU engine and the watch link train a small room; the
 *    server dies; every page says in words that it is reconnecting (the watch page drops its
 *    "training" badge, which would no longer be true); the server comes back; every page is back
 *    in the SAME room by itself (the host's URL unchanged, the volunteer under its own peer id),
 *    rounds commit again, the watch page gets live views again; a host reload then takes the same
 *    room back; the room opened in a second tab waits (saying why) until the first closes, then
 *    takes it over; and the host's list of rooms names it once.
 * 2. A host that closes its page for good: its volunteer waits through the grace period
 *    (HOST_GRACE_MS, 2 minutes, passed on the volunteer page's clock), then stops, says why, and
 *    keeps nothing running.
 * 3. A server that keeps no rooms (--no-persist), restarted: the room is gone, every page stops
 *    trying and says so, and the volunteer stops.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Browser, type BrowserContext, expect, type Page, test } from '@playwright/test';
import { eventsOf, type Proc, shoalProcesses } from '../apps/cli/src/test-processes.ts';
import { readState, recordErrors } from './fixtures.ts';

// nano, short rounds, small batches: the CPU engine commits rounds within seconds; a schedule
// long enough that the run does not end by itself (small batches train the default schedule in minutes)
const ROOM_QUERY = 'preset=nano&innerSteps=5&fragments=2&overlap=1&batch=4&seq=32&lr=0.01&steps=1000000';

const { start, until, killAll } = shoalProcesses();
const contexts: BrowserContext[] = [];
const errors: string[] = [];
let roomsDir = '';
let server: Proc;
/** The server's origin: the same port across its restart. */
let origin = '';

test.describe.configure({ mode: 'serial' });

test.beforeAll(async () => {
  roomsDir = mkdtempSync(join(tmpdir(), 'shoal-e2e-restart-'));
  ({ server, origin } = await startServer('server', 0));
});

test.afterAll(async () => {
  for (const context of contexts) await context.close().catch(() => {});
  killAll();
  if (roomsDir) rmSync(roomsDir, { recursive: true, force: true });
});

/**
 * `shoal server` on `port` (0: any free one) keeping its rooms in roomsDir (or, `persist` false, in
 * memory only); resolves with it and its origin once it listens.
 */
async function startServer(name: string, port: number, persist = true): Promise<{ server: Proc; origin: string }> {
  const keep = persist ? ['--rooms-dir', roomsDir] : ['--no-persist'];
  const server = start(name, ['server', '--port', String(port), '--host', '127.0.0.1', ...keep]);
  const running = await until(
    () => server.text.map((line) => /Shoal is running\. Open http:\/\/[^:]+:(\d+)/.exec(line)).find(Boolean),
    30_000,
    `${name} listening`,
  );
  return { server, origin: `http://127.0.0.1:${running?.[1]}` };
}

async function open(browser: Browser, name: string, url: string, fakeClock = false): Promise<Page> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  contexts.push(context);
  // a clock the test can move forward (it runs at the real pace until then)
  if (fakeClock) await context.clock.install();
  const page = await context.newPage();
  recordErrors(page, name, errors);
  await page.goto(url);
  return page;
}

/**
 * A room created on the host form (ROOM_QUERY) with one volunteer on the CPU engine, started and
 * past its first committed round. `suffix` tells the pages' names apart in recorded errors.
 */
async function trainingRoom(browser: Browser, suffix: string, volunteerClock = false, at = origin) {
  const host = await open(browser, `host${suffix}`, `${at}/host?${ROOM_QUERY}`);
  await host.getByRole('button', { name: 'Create room' }).click();
  const joinUrl = await host.getByTestId('join-url').inputValue();
  const watchUrl = await host.getByTestId('watch-url').inputValue();
  const roomId = (await readState(host)).roomId as string;
  expect(host.url()).toBe(`${at}/host/${roomId}`);

  const volunteer = await open(browser, `volunteer${suffix}`, joinUrl, volunteerClock);
  // the CPU engine: far faster than the software WebGPU adapter, whatever the probe finds
  const cpu = volunteer.locator('input[name=engine][value=cpu]');
  if (await cpu.count()) await cpu.check();
  await volunteer.getByRole('button', { name: /^Join/ }).first().click();
  await expect(volunteer.getByTestId('volunteer-phase')).toHaveText(/waiting|training/, { timeout: 90_000 });
  await expect.poll(async () => (await readState(host)).peers.length, { timeout: 60_000 }).toBe(1);
  const [volunteerId] = (await readState(host)).peers.map((peer) => peer.peer) as [string];
  await expect(volunteer.getByTestId('volunteer-id')).toContainText(volunteerId);

  await host.getByRole('button', { name: 'Start' }).click();
  await expect
    .poll(async () => (await readState(host)).metrics.roundsCommitted ?? 0, { timeout: 60_000 })
    .toBeGreaterThan(0);
  return { host, volunteer, roomId, volunteerId, watchUrl };
}

/** What this spec reads of a page's state beyond fixtures.ts's RoomState. */
async function pageState(page: Page) {
  return (await page.evaluate(() => (window as unknown as { shoal: { getState(): unknown } }).shoal.getState())) as {
    connection: 'connected' | 'reconnecting' | 'lost';
    volunteer: { innerStep: number } | null;
  };
}

/** Chromium reports each refused WebSocket while the server is down; nothing else may go wrong. */
function expectNoErrors() {
  expect(errors.filter((error) => !/WebSocket connection to .* failed/.test(error))).toEqual([]);
}

const connection = async (page: Page) => (await pageState(page)).connection;

test('a server restart: every page reconnects by itself to the same room, and training goes on', async ({
  browser,
}) => {
  test.setTimeout(180_000);
  const port = Number(new URL(origin).port);
  const { host, volunteer, roomId, volunteerId, watchUrl } = await trainingRoom(browser, '');
  const hostUrl = host.url();
  const watcher = await open(browser, 'watcher', watchUrl);
  await expect(watcher.getByTestId('room-status')).toHaveText('training', { timeout: 30_000 });

  // The server dies (no goodbye to anyone: SIGKILL).
  server.child.kill('SIGKILL');
  await server.exit;
  const pages = { host, volunteer, watcher };
  for (const [name, page] of Object.entries(pages)) {
    await expect
      .poll(() => connection(page), { message: `${name} reconnecting`, timeout: 30_000 })
      .toBe('reconnecting');
    // in words: the badge beside the room's name, and the error box saying what goes on
    await expect(page.getByTestId('connection')).toHaveText('reconnecting…');
    await expect(page.getByRole('alert').filter({ hasText: 'reconnecting' })).toContainText(
      'The Shoal server went away; reconnecting',
    );
  }
  // the watch page no longer claims a live "training" it cannot see
  await expect(watcher.getByTestId('room-status')).toHaveCount(0);
  // as the words say, training goes on with the peers already connected: rounds commit without the server
  const roundsAtKill = (await readState(host)).metrics.roundsCommitted ?? 0;
  await expect
    .poll(async () => (await readState(host)).metrics.roundsCommitted ?? 0, { timeout: 30_000 })
    .toBeGreaterThan(roundsAtKill);
  const roundsBefore = (await readState(host)).metrics.roundsCommitted ?? 0;

  // The server comes back on the same port and rooms directory, and takes the room back.
  ({ server } = await startServer('server again', port));
  const restarted = Date.now();
  expect(server.text.join('\n')).toContain('(1 taken back)');
  for (const [name, page] of Object.entries(pages)) {
    await expect.poll(() => connection(page), { message: `${name} connected`, timeout: 60_000 }).toBe('connected');
    await expect(page.getByTestId('connection')).toHaveCount(0);
    // the words about the outage are gone with it
    await expect(page.getByRole('alert')).toHaveCount(0);
    expect((await readState(page)).roomId).toBe(roomId);
  }
  console.log(`every page back in room ${roomId} ${((Date.now() - restarted) / 1000).toFixed(1)} s after the restart`);
  // the same room and the same people: the host reclaimed it (no new room), the volunteer rejoined as itself
  expect(host.url()).toBe(hostUrl);
  await until(() => eventsOf(server, 'host-reclaimed').length > 0, 10_000, 'the host reclaiming its room');
  expect(eventsOf(server, 'host-reclaimed').map((line) => line.room)).toEqual([roomId]);
  expect(eventsOf(server, 'room-created')).toEqual([]);
  await until(
    () => eventsOf(server, 'peer-joined').some((line) => line.peer === volunteerId && line.rejoin === true),
    10_000,
    'the volunteer rejoining',
  );
  await expect(volunteer.getByTestId('volunteer-id')).toContainText(volunteerId);
  expect((await readState(host)).peers.map((peer) => peer.peer)).toEqual([volunteerId]);

  // Rounds commit again, and the watch page sees them in live views (not only the kept one).
  await expect
    .poll(async () => (await readState(host)).metrics.roundsCommitted ?? 0, { timeout: 60_000 })
    .toBeGreaterThan(roundsBefore + 1);
  await expect
    .poll(async () => (await readState(watcher)).metrics.roundsCommitted ?? 0, { timeout: 30_000 })
    .toBeGreaterThan(roundsBefore + 1);
  await expect(watcher.getByTestId('room-status')).toHaveText('training');
  console.log(
    `rounds committed: ${roundsBefore} by the restart, ${(await readState(host)).metrics.roundsCommitted} after`,
  );
  await expect(volunteer.getByTestId('volunteer-phase')).toHaveText('training');

  // A host reload after the restart takes the same room back (not a new one), with its volunteer.
  const roundsAtReload = (await readState(host)).metrics.roundsCommitted ?? 0;
  await host.reload();
  await expect.poll(async () => (await readState(host)).resumedFrom, { timeout: 60_000 }).not.toBeNull();
  expect(host.url()).toBe(hostUrl);
  expect((await readState(host)).roomId).toBe(roomId);
  await expect.poll(async () => (await readState(host)).peers.length, { timeout: 60_000 }).toBe(1);
  await expect
    .poll(async () => (await readState(host)).metrics.roundsCommitted ?? 0, { timeout: 60_000 })
    .toBeGreaterThan(roundsAtReload);
  expect(eventsOf(server, 'host-reclaimed').map((line) => line.room)).toEqual([roomId, roomId]);
  expect(eventsOf(server, 'room-created')).toEqual([]);

  // The same room opened in a second tab while this one hosts it: the second waits and says why;
  // it neither takes the room nor opens another one in its place.
  const second = await host.context().newPage();
  recordErrors(second, 'host, second tab', errors);
  await second.goto(hostUrl);
  await expect(second.getByRole('alert')).toContainText('is hosted from another tab or window', { timeout: 30_000 });
  expect(second.url()).toBe(hostUrl);
  expect(eventsOf(server, 'room-created')).toEqual([]);
  expect((await readState(host)).peers.length).toBe(1);
  // once the first tab closes, the second takes the room over, volunteer and all
  const roundsAtHandOver = (await readState(host)).metrics.roundsCommitted ?? 0;
  await host.close();
  await expect(second.getByRole('alert')).toHaveCount(0, { timeout: 30_000 });
  expect((await readState(second)).roomId).toBe(roomId);
  await expect.poll(async () => (await readState(second)).peers.length, { timeout: 60_000 }).toBe(1);
  await expect
    .poll(async () => (await readState(second)).metrics.roundsCommitted ?? 0, { timeout: 60_000 })
    .toBeGreaterThan(roundsAtHandOver);
  expect(eventsOf(server, 'host-reclaimed').map((line) => line.room)).toEqual([roomId, roomId, roomId]);
  expect(eventsOf(server, 'room-created')).toEqual([]);

  // The host's list of rooms (this browser's IndexedDB) names the room once.
  const list = await second.context().newPage();
  await list.goto(`${origin}/host`);
  const rows = list.getByTestId('hosted-rooms').locator('tbody tr');
  await expect(rows).toHaveCount(1);
  await expect(rows.first()).toContainText(roomId);
  await list.close();

  expectNoErrors();
});

test('a host gone for good: after the grace period the volunteer stops, says why, and keeps nothing running', async ({
  browser,
}) => {
  test.setTimeout(120_000);
  const { host, volunteer, roomId, volunteerId } = await trainingRoom(browser, ' 2', true);
  await expect(volunteer.getByTestId('volunteer-phase')).toHaveText('training');
  expect(volunteer.workers().map((worker) => worker.url())).toContainEqual(expect.stringContaining('room.worker'));

  // The host closes its page for good: the server and the mesh both see it gone.
  await host.context().close();
  // within the grace period the room goes on (the host may reload and take it back): a few
  // seconds in which the page would have ended it, were it not waiting
  await volunteer.waitForTimeout(3_000);
  await expect(volunteer.getByTestId('volunteer-end')).toHaveCount(0);
  expect((await readState(volunteer)).error).toBeNull();

  // Past the grace period on the page's clock (the timer started once it saw the host gone,
  // whose moment the test cannot see: the clock moves on in steps until the page ends the room).
  await expect
    .poll(
      async () => {
        await volunteer.clock.fastForward('00:30');
        return volunteer.getByTestId('volunteer-end').count();
      },
      { timeout: 30_000, intervals: [1_000] },
    )
    .toBe(1);
  await expect(volunteer.getByRole('alert')).toContainText(
    'The host has been gone for 2 minutes, so this room has ended. Thank you — you can close this tab.',
  );
  await expect(volunteer.getByTestId('volunteer-end')).toContainText('Nothing runs on this page any more.');
  // nothing runs: the room's worker thread is gone (its steps stand still), the socket is closed
  await expect.poll(() => volunteer.workers().length, { timeout: 10_000 }).toBe(0);
  const stepAtEnd = (await pageState(volunteer)).volunteer?.innerStep;
  await volunteer.waitForTimeout(1_000);
  expect((await pageState(volunteer)).volunteer?.innerStep).toBe(stepAtEnd);
  await until(
    () => eventsOf(server, 'peer-left').some((line) => line.room === roomId && line.peer === volunteerId),
    10_000,
    'the volunteer leaving the room on the server',
  );
  expectNoErrors();
});

test('a server that keeps no rooms, restarted: every page says the room has ended, and the volunteer stops', async ({
  browser,
}) => {
  test.setTimeout(120_000);
  const forgetful = await startServer('server without rooms dir', 0, false);
  const port = Number(new URL(forgetful.origin).port);
  const { host, volunteer, watchUrl } = await trainingRoom(browser, ' 3', false, forgetful.origin);
  const watcher = await open(browser, 'watcher 3', watchUrl);
  await expect(watcher.getByTestId('room-status')).toHaveText('training', { timeout: 30_000 });

  forgetful.server.child.kill('SIGKILL');
  await forgetful.server.exit;
  await startServer('server without rooms dir, again', port, false);
  // refused for good (no such room): no more tries, and each page says what that means for it
  for (const [name, page] of Object.entries({ host, volunteer, watcher })) {
    await expect.poll(() => connection(page), { message: `${name} lost`, timeout: 60_000 }).toBe('lost');
    await expect(page.getByTestId('connection')).toHaveText('disconnected from the server');
  }
  await expect(host.getByRole('alert')).toContainText('The Shoal server no longer has this room');
  await expect(watcher.getByRole('alert')).toContainText('has ended: the server no longer has it');
  await expect(volunteer.getByRole('alert')).toContainText(
    'The Shoal server no longer has this room (no-such-room), so it has ended. Thank you — you can close this tab.',
  );
  await expect(volunteer.getByTestId('volunteer-end')).toBeVisible();
  await expect.poll(() => volunteer.workers().length, { timeout: 10_000 }).toBe(0);
  expectNoErrors();
});
