/**
 * Where the run is and what the room is doing, in words, on every page: a host starts a room
 * before anyone joins (it waits for volunteers, it does not train), two CPU volunteers and the
 * watch link join; every page shows "Step X of N", the tokens and the time left; a volunteer sees
 * its processor use, the memory Shoal holds and its own loss and speed over time; paused, the
 * speeds read 0 and nothing counts down; one volunteer leaves and its page no longer trains; the
 * host stops, and the final validation loss reads the same on the dashboard, the watch page and
 * the page of the volunteer who stayed.
 */
import { type Browser, type BrowserContext, expect, type Page, test } from '@playwright/test';
import { readState, recordErrors } from './fixtures.ts';

test.describe.configure({ mode: 'serial' });

// nano, small batches, short rounds and a long schedule: it runs until the test stops it
const ROOM_QUERY = 'preset=nano&innerSteps=5&fragments=2&overlap=1&batch=4&seq=32&lr=0.01&steps=20000';

const contexts: BrowserContext[] = [];
const errors: string[] = [];
let host: Page;
let watcher: Page;
let volunteer: Page;
let leaver: Page;
let joinUrl = '';

test.afterAll(async () => {
  for (const context of contexts) await context.close().catch(() => {});
});

async function open(browser: Browser, name: string, url: string): Promise<Page> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  contexts.push(context);
  const page = await context.newPage();
  recordErrors(page, name, errors);
  await page.goto(url);
  return page;
}

test('a started room waits for volunteers; then every page shows the step of the schedule and the time left', async ({
  browser,
}) => {
  test.setTimeout(180_000);
  host = await open(browser, 'host', `/host?${ROOM_QUERY}`);
  // the form says how long the schedule takes, or that it is not known yet
  await expect(host.getByTestId('schedule-time')).toContainText('20,000 schedule steps');
  await host.getByRole('button', { name: 'Create room' }).click();
  joinUrl = await host.getByTestId('join-url').inputValue();
  await expect(host.getByTestId('run-progress')).toHaveText(/^Step 0 of 20,000/);

  // Start with nobody in the room: it waits for volunteers, it does not say it trains
  await host.getByRole('button', { name: 'Start' }).click();
  await expect(host.getByTestId('room-status')).toHaveText('waiting for volunteers');
  await expect(host.getByTestId('host-phase')).toContainText('no volunteer is in the room yet');
  await expect(host.getByTestId('run-progress')).toHaveText(/^Step 0 of 20,000 · 0 tokens · waiting for volunteers$/);

  watcher = await open(browser, 'watcher', (await readState(host)).watchUrl as string);
  volunteer = await open(browser, 'volunteer', joinUrl);
  leaver = await open(browser, 'leaver', joinUrl);
  for (const page of [volunteer, leaver]) {
    // the CPU engine: far faster than a software WebGPU adapter
    await page.getByRole('radio', { name: /^CPU/ }).check();
    await page.getByRole('button', { name: 'Join', exact: true }).click();
  }
  for (const page of [volunteer, leaver]) {
    await expect(page.getByTestId('volunteer-phase')).toHaveText('training', { timeout: 90_000 });
  }
  await expect(host.getByTestId('room-status')).toHaveText('training', { timeout: 30_000 });
  await expect(watcher.getByTestId('room-status')).toHaveText('training', { timeout: 30_000 });

  // every page: "Step X of N · tokens · time left", from the measured speed
  for (const page of [host, watcher, volunteer]) {
    await expect(page.getByTestId('run-progress')).toHaveText(
      /^Step [\d,]+ of 20,000 · [\d.]+[kM]? tokens · ~[\d.]+ (s|min|h) left$/,
      { timeout: 60_000 },
    );
  }
});

test('a volunteer sees its processor use, the memory Shoal holds and its own progress over time', async () => {
  await expect(volunteer.getByTestId('own-busy')).toHaveText(/^[\d.]+% busy · cap 100%$/, { timeout: 30_000 });
  await expect(volunteer.getByTestId('own-memory')).toHaveText(/^[\d.]+ ?[kMG]i?B$/);
  await expect(volunteer.getByTestId('own-sent')).not.toHaveText('—');
  for (const chart of ['chart-own-loss', 'chart-own-speed']) {
    await expect(volunteer.getByTestId(chart).locator('canvas').first()).toBeVisible();
  }
  await volunteer.screenshot({ path: 'test-results/screenshots/volunteer-own.png', fullPage: true });
  await host.screenshot({ path: 'test-results/screenshots/dashboard-progress.png' });
});

test('a volunteer on the software GPU, far slower than the others: warned, left out of rounds and told why; rounds go on', async ({
  browser,
}) => {
  test.setTimeout(240_000);
  const slow = await open(browser, 'slow', joinUrl);
  await expect(slow.getByTestId('engine-verdict')).toContainText('→ using the CPU', { timeout: 90_000 });
  await slow.getByRole('radio', { name: /^GPU/ }).check();
  await expect(slow.getByTestId('engine-warning')).toContainText('slower');
  await slow.getByRole('button', { name: 'Join', exact: true }).click();
  await expect(slow.getByTestId('volunteer-phase')).toHaveText('training', { timeout: 120_000 });
  const peer = (await readState(slow)).volunteer?.peer ?? '';
  // once its heartbeats tell its speed, the host leaves it out of rounds, with both speeds, on both pages
  await expect
    .poll(async () => (await readState(host)).peers.find((p) => p.peer === peer)?.reason ?? '', { timeout: 120_000 })
    .toMatch(/^too slow for rounds: [\d,]+ tokens\/s against [\d,]+ for the others/);
  await expect(slow.getByTestId('left-out')).toContainText('too slow for rounds', { timeout: 30_000 });
  // and the others' rounds go on without it
  const before = (await readState(host)).metrics.roundsCommitted ?? 0;
  await expect
    .poll(async () => (await readState(host)).metrics.roundsCommitted ?? 0, { timeout: 60_000 })
    .toBeGreaterThanOrEqual(before + 2);
  const rounds = (await readState(host)).rounds.filter((r) => r.outcome === 'committed').slice(-2);
  expect(rounds.every((r) => r.participants === 2)).toBe(true);
  await slow.context().close();
  await expect(host.getByTestId('volunteer-count')).toHaveText('2', { timeout: 60_000 });
});

test('paused, the speeds read 0 and nothing counts down', async () => {
  await host.getByRole('button', { name: 'Pause' }).click();
  await expect(host.getByTestId('room-status')).toHaveText('paused');
  for (const page of [host, watcher]) {
    await expect(page.getByTestId('room-speed')).toHaveText('0 tok/s', { timeout: 30_000 });
    await expect(page.getByTestId('next-rounds')).toHaveCount(0);
    await expect(page.getByTestId('run-progress')).toContainText('paused');
  }
  await expect(volunteer.getByTestId('own-speed')).toHaveText('0 tok/s', { timeout: 30_000 });
  await expect(volunteer.getByTestId('run-progress')).toContainText('paused');
  await host.getByRole('button', { name: 'Resume' }).click();
  await expect(host.getByTestId('room-status')).toHaveText('training');
});

test('after Leave the volunteer page no longer trains; after Stop every page agrees on the loss', async () => {
  await leaver.getByRole('button', { name: 'Leave the room' }).click();
  await expect(leaver.getByTestId('volunteer-phase')).toHaveText('left');
  await expect(leaver.getByTestId('own-speed')).toHaveText('— (left)');
  await expect(leaver.getByText(/Room: training/)).toHaveCount(0);
  await expect(leaver.getByTestId('run-progress')).toHaveCount(0);
  await expect(leaver.getByTestId('volunteer-end')).toContainText('You have left the room.');
  await expect(host.getByTestId('volunteer-count')).toHaveText('1', { timeout: 60_000 });

  await host.getByRole('button', { name: 'Stop', exact: true }).click();
  await host.getByTestId('stop-dialog').getByRole('button', { name: 'Stop the run' }).click();
  await expect(host.getByTestId('room-status')).toHaveText('stopped');
  await expect(host.getByTestId('run-progress')).toHaveText(/^Step [\d,]+ of 20,000 · .* · ended$/);
  // the last evaluation comes after Stop (rounds in flight finish): the volunteer who stayed hears it too
  const loss = (page: Page) => page.getByTestId('eval-loss').first().textContent();
  await expect
    .poll(
      async () => {
        const shown = [await loss(host), await loss(watcher), await loss(volunteer)];
        return shown.every((l) => l === shown[0]);
      },
      { timeout: 30_000 },
    )
    .toBe(true);
  await expect(volunteer.getByTestId('volunteer-end')).toContainText('The room has finished.');
  // the host's figure stands: a late one would differ
  await host.waitForTimeout(5_000);
  expect(await loss(volunteer)).toBe(await loss(host));
  expect(await loss(watcher)).toBe(await loss(host));
});

test('a stopped room reloaded: no count goes back, and it still says it ended', async () => {
  const counts = async () => {
    const { metrics, roomBytes } = await readState(host);
    return { tokens: metrics.tokens, rounds: metrics.roundsCommitted, hostBytes: metrics.bytesSent, roomBytes };
  };
  const before = await counts();
  await host.reload();
  await expect.poll(async () => (await readState(host)).resumedFrom, { timeout: 60_000 }).not.toBeNull();
  await expect(host.getByTestId('room-status')).toHaveText('stopped', { timeout: 30_000 });
  await expect.poll(async () => (await counts()).roomBytes, { timeout: 30_000 }).not.toBeNull();
  const after = await counts();
  console.log(`stopped room, before and after a reload: ${JSON.stringify(before)} → ${JSON.stringify(after)}`);
  for (const key of ['tokens', 'rounds', 'hostBytes', 'roomBytes'] as const) {
    expect(after[key], key).toBeGreaterThanOrEqual(before[key] as number);
  }
  await expect(host.getByTestId('run-progress')).toContainText('ended');
  expect(errors).toEqual([]);
});
