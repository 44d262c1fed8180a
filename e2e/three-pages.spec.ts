/**
 * One truth on three pages, and the first minute: a host dashboard with the defaults (no query),
 * two volunteers on the CPU engine (one phone-sized) and the watch link, in one room. The first
 * round commits within a minute of Start, and the dashboard said when it would before it did.
 * Then, paused so the figures stand still, the room's step, tokens, committed rounds and
 * validation loss read the same on the dashboard, the watch page and the volunteer page; the host
 * reloads, nothing goes back, and the three agree again.
 */
import { type Browser, type BrowserContext, expect, type Page, test } from '@playwright/test';
import { readState, recordErrors } from './fixtures.ts';

test.describe.configure({ mode: 'serial' });

const contexts: BrowserContext[] = [];
const errors: string[] = [];
let host: Page;
let watcher: Page;
const volunteers: Page[] = [];

test.afterAll(async () => {
  for (const context of contexts) await context.close().catch(() => {});
});

async function open(browser: Browser, name: string, url: string, phone = false): Promise<Page> {
  const context = await browser.newContext({
    viewport: phone ? { width: 390, height: 844 } : { width: 1280, height: 900 },
  });
  contexts.push(context);
  const page = await context.newPage();
  recordErrors(page, name, errors);
  await page.goto(url);
  return page;
}

/** The room's figures as a page shows them: the tiles' text (host, watcher) or its store's (volunteer). */
async function shown(page: Page) {
  const text = async (id: string) => (await page.getByTestId(id).first().textContent())?.trim() ?? '';
  return {
    step: await text('room-step'),
    tokens: await text('room-tokens'),
    rounds: await text('rounds-committed'),
    evalLoss: await text('eval-loss'),
  };
}

/** Waits until the watch page's tiles read what the dashboard's do. */
async function tilesAgree() {
  await expect
    .poll(async () => JSON.stringify(await shown(watcher)) === JSON.stringify(await shown(host)), {
      timeout: 30_000,
      intervals: [500],
    })
    .toBe(true);
  expect(await shown(watcher)).toEqual(await shown(host));
}

/** The room's figures in a page's store (roomFiguresOf: what its tiles are made from). */
async function figures(page: Page) {
  const { room } = (await page.evaluate(() =>
    (window as unknown as { shoal: { getState(): unknown } }).shoal.getState(),
  )) as {
    room: { step: number | null; tokens: number | null; roundsCommitted: number | null; evalLoss: number | null };
  };
  return { step: room.step, tokens: room.tokens, rounds: room.roundsCommitted, evalLoss: room.evalLoss };
}

/** The three pages' figures, once they stand still and agree (the room is paused). */
async function agreed() {
  let last = '';
  await expect
    .poll(
      async () => {
        const all = await Promise.all([host, watcher, ...volunteers].map(figures));
        const now = JSON.stringify(all);
        const still = now === last;
        last = now;
        return still && all.every((f) => JSON.stringify(f) === JSON.stringify(all[0]));
      },
      { timeout: 60_000, intervals: [2_000] },
    )
    .toBe(true);
  return figures(host);
}

test('the defaults commit the first round within a minute of Start, announced beforehand', async ({ browser }) => {
  test.setTimeout(240_000);
  host = await open(browser, 'host', '/host');
  await host.getByRole('button', { name: 'Create room' }).click();
  const joinUrl = await host.getByTestId('join-url').inputValue();
  const watchUrl = await host.getByTestId('watch-url').inputValue();
  for (const [i, phone] of [false, true].entries()) {
    const page = await open(browser, `volunteer-${i + 1}`, joinUrl, phone);
    // the CPU engine: far faster than a software WebGPU adapter
    const cpu = page.locator('input[name=engine][value=cpu]');
    if (await cpu.count()) await cpu.check();
    await page.getByRole('button', { name: /^Join/ }).first().click();
    await expect(page.getByTestId('volunteer-phase')).toHaveText(/waiting|training/, { timeout: 90_000 });
    volunteers.push(page);
  }
  watcher = await open(browser, 'watcher', watchUrl);
  await expect.poll(async () => (await readState(host)).peers.length, { timeout: 60_000 }).toBe(2);
  // θ_global is evaluated at the start: the chart has its first point before any round
  await expect.poll(async () => (await readState(host)).metrics.evalLoss, { timeout: 30_000 }).not.toBeNull();
  await expect(host.getByTestId('first-round')).toContainText('after Start');

  await host.getByRole('button', { name: 'Start' }).click();
  const started = Date.now();
  await expect(host.getByTestId('first-round')).toContainText(/First round (in ~\d+ steps|open|due)/, {
    timeout: 30_000,
  });
  const announced = (await host.getByTestId('first-round').textContent()) ?? '';
  await expect
    .poll(async () => (await readState(host)).metrics.roundsCommitted ?? 0, { timeout: 60_000, intervals: [500] })
    .toBeGreaterThan(0);
  const firstRoundS = (Date.now() - started) / 1000;
  console.log(`first round committed ${firstRoundS.toFixed(1)} s after Start (announced: "${announced}")`);
  expect(firstRoundS).toBeLessThan(60);
  // afterwards each fragment counts down to its next round, on the dashboard and the watch page
  await expect(host.getByTestId('next-rounds')).toContainText('fragment 0', { timeout: 20_000 });
  await expect(watcher.getByTestId('next-rounds')).toContainText('fragment 0', { timeout: 20_000 });
});

test('the dashboard, the watch page and the volunteer page show the same figures, before and after a host reload', async () => {
  test.setTimeout(240_000);
  await host.getByRole('button', { name: 'Pause' }).click();
  const before = await agreed();
  expect(before.rounds).toBeGreaterThan(0);
  expect(before.evalLoss).not.toBeNull();
  // the dashboard's and the watch page's tiles read the same words (a commit that lands just after
  // Pause brings one more evaluation, which reaches the watch page with the next relayed summary)
  await tilesAgree();

  await host.reload();
  await expect.poll(async () => (await readState(host)).resumedFrom, { timeout: 60_000 }).not.toBeNull();
  await expect.poll(async () => (await readState(host)).peers.length, { timeout: 90_000 }).toBe(2);
  const after = await agreed();
  // nothing went back: the step, the tokens, the rounds (the per-peer rounds too)
  expect(after.step).toBeGreaterThanOrEqual(before.step as number);
  expect(after.tokens).toBeGreaterThanOrEqual(before.tokens as number);
  expect(after.rounds).toBeGreaterThanOrEqual(before.rounds as number);
  const state = await readState(host);
  expect(state.rounds.filter((r) => r.outcome === 'committed').length).toBeGreaterThan(0);
  await tilesAgree();
  expect(errors).toEqual([]);
});
