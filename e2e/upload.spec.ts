/**
 * A room that trains on a text the host uploads: the form checks the file, the dashboard keeps
 * it in IndexedDB, and a volunteer receives it from the host over the mesh (not from the server)
 * and trains on it; after a reload of the host page, a volunteer who joins then still gets it.
 */
import { mkdirSync } from 'node:fs';
import { type BrowserContext, expect, type Page, test } from '@playwright/test';
import { readState, recordErrors } from './fixtures.ts';

test.describe.configure({ mode: 'serial' });

const ROOM_QUERY = 'preset=nano&innerSteps=5&fragments=2&overlap=1&batch=4&seq=32&lr=0.01';
const SHOTS = 'test-results/screenshots';
const contexts: BrowserContext[] = [];
const errors: string[] = [];

test.afterAll(async () => {
  for (const context of contexts) await context.close().catch(() => {});
});

async function volunteer(browser: import('@playwright/test').Browser, joinUrl: string, name: string): Promise<Page> {
  const context = await browser.newContext({ viewport: { width: 390, height: 844 } });
  contexts.push(context);
  const page = await context.newPage();
  recordErrors(page, name, errors);
  await page.goto(joinUrl);
  await page.getByRole('button', { name: 'Join', exact: true }).click();
  return page;
}

test('an uploaded text reaches the volunteers over the mesh, and survives a reload of the host', async ({
  browser,
  request,
}) => {
  test.setTimeout(300_000);
  // the room's text: 120 kB from the middle of Moby Dick, under a name of its own
  const moby = Buffer.from(await (await request.get('/data/moby-dick.txt')).body());
  const text = moby.subarray(500_000, 620_000);

  const hostContext = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  contexts.push(hostContext);
  const host = await hostContext.newPage();
  recordErrors(host, 'host', errors);
  await host.goto(`/host?${ROOM_QUERY}`);
  await host.getByRole('radio', { name: /your own text file/i }).check();
  const create = host.getByRole('button', { name: 'Create room' });
  await expect(create).toBeDisabled(); // no file yet
  // a binary file is refused with a reason, and the room cannot be created with it
  await host.getByTestId('dataset-file').setInputFiles({
    name: 'photo.jpg',
    mimeType: 'image/jpeg',
    buffer: Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0, 0x10]),
  });
  await expect(host.getByTestId('dataset-choice')).toContainText('photo.jpg holds NUL bytes');
  await expect(create).toBeDisabled();
  await host.getByTestId('dataset-file').setInputFiles({ name: 'whales.txt', mimeType: 'text/plain', buffer: text });
  await expect(host.getByTestId('dataset-choice')).toContainText('whales.txt: 120 kB');
  mkdirSync(SHOTS, { recursive: true });
  await host.getByTestId('dataset-choice').screenshot({ path: `${SHOTS}/upload-form.png` });
  await create.click();
  await expect(host.getByTestId('dataset')).toContainText('whales.txt');
  const hosted = (await readState(host)).dataset;
  expect(hosted).toMatchObject({ name: 'whales.txt', bytes: text.length, source: 'host', received: text.length });
  const joinUrl = await host.getByTestId('join-url').inputValue();

  const first = await volunteer(browser, joinUrl, 'volunteer-1');
  await expect(first.getByTestId('volunteer-phase')).toHaveText(/waiting|training/, { timeout: 90_000 });
  await expect.poll(async () => (await readState(host)).peers.length, { timeout: 60_000 }).toBe(1);
  await host.getByRole('button', { name: 'Start' }).click();
  // the volunteer got the text from the host (the same fingerprint) and trains on it
  await expect.poll(async () => (await readState(first)).dataset, { timeout: 60_000 }).toEqual(hosted);
  await expect(first.getByTestId('dataset')).toContainText('received from the host over the mesh');
  await first.screenshot({ path: `${SHOTS}/upload-volunteer.png`, fullPage: true });
  await expect
    .poll(async () => (await readState(host)).metrics.roundsCommitted as number, { timeout: 120_000 })
    .toBeGreaterThanOrEqual(2);
  expect((await readState(first)).metrics.step).toBeGreaterThan(0);

  // the host reloads: the text comes back from IndexedDB, and a volunteer who joins now gets it too
  await host.getByRole('button', { name: 'Pause' }).click();
  await expect.poll(async () => (await readState(host)).checkpoint, { timeout: 30_000 }).not.toBeNull();
  await host.waitForTimeout(1_500); // the paused status is saved
  await host.reload();
  await expect.poll(async () => (await readState(host)).resumedFrom, { timeout: 60_000 }).not.toBeNull();
  await expect.poll(async () => (await readState(host)).dataset, { timeout: 30_000 }).toEqual(hosted);
  const second = await volunteer(browser, (await readState(host)).joinUrl as string, 'volunteer-2');
  await expect.poll(async () => (await readState(second)).dataset, { timeout: 120_000 }).toEqual(hosted);
  await expect.poll(async () => (await readState(host)).peers.length, { timeout: 60_000 }).toBe(2);
  expect(errors).toEqual([]);
});
