/**
 * Which engine a volunteer trains with, in Chromium on SwiftShader (a software WebGPU adapter):
 * the landing page measures both engines on nano and says what this browser can lend; a join link
 * with a wrong token or room is refused before any consent; the join page of a real room (on a
 * phone-sized screen, Join visible without scrolling) measures both on the room's model, picks
 * the CPU (far faster than a software adapter), and the person's choice of the GPU is what the
 * room then trains with; a join refused after consent says why beside Join; when the host stops
 * the run, the volunteer's page ends with a thank-you and the join link offers nothing more.
 */
import { type Browser, type BrowserContext, chromium, expect, type Page, test } from '@playwright/test';
import { CHROMIUM_WEBGPU_ARGS, chromiumPath } from '../scripts/chromium.mjs';
import { readState, recordErrors } from './fixtures.ts';

test.describe.configure({ mode: 'serial' });

const ROOM_QUERY = 'preset=nano&innerSteps=5&fragments=2&overlap=1&batch=4&seq=32&lr=0.01';
const contexts: BrowserContext[] = [];
const errors: string[] = [];
let host: Page;
let joinUrl = '';

test.afterAll(async () => {
  for (const context of contexts) await context.close().catch(() => {});
});

async function open(browser: Browser, name: string, viewport = { width: 390, height: 844 }): Promise<Page> {
  const context = await browser.newContext({ viewport });
  contexts.push(context);
  const page = await context.newPage();
  recordErrors(page, name, errors);
  return page;
}

/**
 * "about 30,000 tokens/s" or "slower than about 290 tokens/s" → the number; "too slow to measure"
 * (a software adapter's kernels took too long to build, on a loaded machine) → 0.
 */
function rateIn(text: string, engine: 'CPU' | 'GPU'): number {
  const match = new RegExp(`${engine}[^:]*: (?:about|slower than about) ([\\d,]+) tokens/s`).exec(text);
  if (match?.[1]) return Number(match[1].replaceAll(',', ''));
  if (new RegExp(`${engine}[^:]*: too slow to measure`).test(text)) return 0;
  throw new Error(`no ${engine} figure in “${text}”`);
}

test('the landing page ends with what this browser can lend, and reads the join box strictly', async ({ browser }) => {
  const page = await open(browser, 'landing', { width: 1280, height: 900 });
  await page.goto('/');
  const box = page.getByRole('textbox', { name: 'Join link or room code' });
  await box.fill('hello world');
  await expect(page.getByTestId('join-box-problem')).toContainText('“hello” is not a room code');
  await expect(page.getByRole('button', { name: 'Join', exact: true })).toBeDisabled();

  const line = page.getByTestId('can-volunteer-line');
  await expect(line).toHaveText(/^This browser can volunteer: on the CPU, about [\d,]+ tokens\/s/, { timeout: 90_000 });
  const figures = (await page.getByTestId('engine-figures').textContent()) ?? '';
  console.log(`landing (nano): ${figures}`);
  expect(rateIn(figures, 'CPU')).toBeGreaterThan(rateIn(figures, 'GPU'));
  expect(figures).toMatch(/GPU \(.*swiftshader.*software\)/i);
  // the last card on the page
  await expect(page.locator('main > :last-child')).toHaveAttribute('data-testid', 'can-volunteer');
});

test('a wrong token or room is refused before consent', async ({ browser }) => {
  host = await open(browser, 'host', { width: 1280, height: 900 });
  await host.goto(`/host?${ROOM_QUERY}`);
  await host.getByRole('button', { name: 'Create room' }).click();
  joinUrl = await host.getByTestId('join-url').inputValue();
  const url = new URL(joinUrl);
  const token = url.searchParams.get('token') as string;

  const page = await open(browser, 'bad-link');
  const wrong = new URL(joinUrl);
  wrong.searchParams.set('token', `${token.slice(0, -4)}${token.endsWith('AAAA') ? 'BBBB' : 'AAAA'}`);
  await page.goto(wrong.toString());
  await expect(page.getByRole('alert')).toContainText('token is not valid');
  await expect(page.getByTestId('consent')).toHaveCount(0);
  await expect(page.getByRole('button', { name: 'Join', exact: true })).toHaveCount(0);

  await page.goto(`/join/AAAAAAAAAAAA?token=${token}`);
  await expect(page.getByRole('alert')).toContainText('Room AAAAAAAAAAAA does not exist');
  await expect(page.getByTestId('consent')).toHaveCount(0);
});

test('without WebGPU the join page offers the CPU, measured', async () => {
  const args = CHROMIUM_WEBGPU_ARGS.filter((a) => !a.includes('webgpu')).concat('--disable-features=WebGPU');
  const noGpu = await chromium.launch({ executablePath: chromiumPath() ?? undefined, args });
  try {
    const page = await noGpu.newPage({ viewport: { width: 390, height: 844 } });
    await page.goto(joinUrl);
    await expect(page.getByTestId('engine-verdict')).toContainText('→ using the CPU', { timeout: 60_000 });
    await expect(page.getByTestId('engine-verdict')).toContainText(/CPU: about [\d,]+ tokens\/s · GPU: unavailable/);
    await expect(page.getByRole('radio', { name: /^CPU/ })).toBeChecked();
    await expect(page.getByRole('radio', { name: /^GPU/ })).toBeDisabled();
    await expect(page.getByRole('button', { name: 'Join', exact: true })).toBeEnabled();
  } finally {
    await noGpu.close();
  }
});

test('a join refused after consent says why beside Join, focused, and Join works again', async ({ browser }) => {
  const page = await open(browser, 'rotated');
  await page.goto(joinUrl);
  await expect(page.getByTestId('room-check')).toContainText(/^Room [\w-]{12} /);
  // the host rotates the token between the check and the Join
  await host.getByRole('button', { name: 'Rotate join token' }).click();
  await expect.poll(() => host.getByTestId('join-url').inputValue()).not.toBe(joinUrl);
  joinUrl = await host.getByTestId('join-url').inputValue();
  await page.getByRole('radio', { name: /^CPU/ }).check(); // no need to wait for the measurement
  const join = page.getByRole('button', { name: 'Join', exact: true });
  await join.click();
  const error = page.getByTestId('join-error');
  await expect(error).toContainText('no longer valid');
  await expect(error).toHaveAttribute('role', 'alert');
  await expect(error).toBeFocused();
  await expect(error).toBeInViewport();
  await expect(join).toBeEnabled();
  await page.context().close(); // its probe would measure on, beside the next page's
});

test('the join page measures both engines, picks the CPU, and trains on the GPU when the person chooses it', async ({
  browser,
}) => {
  test.setTimeout(240_000);
  const page = await open(browser, 'volunteer');
  await page.goto(joinUrl);
  await expect(page.getByTestId('room-check')).toContainText(/^Room [\w-]{12} (trains nano|has not said)/);
  await expect(page.getByTestId('consent')).toContainText('IP address');
  const join = page.getByRole('button', { name: 'Join', exact: true });
  await expect(join).toBeInViewport({ ratio: 1 });

  const verdict = page.getByTestId('engine-verdict');
  await expect(verdict).toContainText('→ using the CPU', { timeout: 90_000 });
  const figures = (await verdict.textContent()) ?? '';
  console.log(`join page (nano): ${figures}`);
  expect(rateIn(figures, 'CPU')).toBeGreaterThan(rateIn(figures, 'GPU'));
  await expect(page.getByRole('radio', { name: /^CPU/ })).toBeChecked();
  await expect(join).toBeInViewport({ ratio: 1 });

  await page.getByRole('radio', { name: /^GPU/ }).check();
  await expect(verdict).toContainText('→ using the GPU (your choice)');
  // SwiftShader is many times slower than the CPU here: the choice is warned of, with both figures
  expect(rateIn(figures, 'CPU')).toBeGreaterThanOrEqual(3 * rateIn(figures, 'GPU'));
  await expect(page.getByTestId('engine-warning')).toContainText(/^The GPU .* here, the CPU about [\d,]+ tokens\/s/);
  await expect(page.getByTestId('engine-warning')).toContainText('leaves a volunteer far slower than the others');
  await page.getByRole('radio', { name: /^CPU/ }).check();
  await expect(page.getByTestId('engine-warning')).toHaveCount(0);
  await page.getByRole('radio', { name: /^GPU/ }).check();
  await join.click();
  await expect(page.getByTestId('volunteer-phase')).toHaveText(/waiting|training/, { timeout: 90_000 });
  await expect(page.getByTestId('volunteer-adapter')).toContainText(/webgpu.*swiftshader/i);
  const peers = await expect
    .poll(async () => (await readState(host)).peers.length, { timeout: 60_000 })
    .toBe(1)
    .then(() => readState(host));
  await expect(page.getByTestId('volunteer-id')).toContainText(peers.peers[0]?.peer as string);

  await host.getByRole('button', { name: 'Start' }).click();
  await expect
    .poll(async () => (await readState(page)).metrics.step as number, { timeout: 120_000 })
    .toBeGreaterThan(2);

  // the host stops the run: the volunteer's page ends clearly, with what it gave
  await host.getByRole('button', { name: 'Stop', exact: true }).click();
  await host.getByTestId('stop-dialog').getByRole('button', { name: 'Stop the run' }).click();
  const end = page.getByTestId('volunteer-end');
  await expect(end).toContainText('The room has finished. Thank you — you can close this tab.');
  await expect(end).toContainText(/You trained [\d,]+ steps/);
  await expect(page.getByRole('button', { name: 'Pause' })).toHaveCount(0);
  // and its join link offers nothing to join
  const late = await open(browser, 'late');
  await late.goto(joinUrl);
  await expect(late.getByTestId('room-check')).toContainText('has stopped training');
  await expect(late.getByRole('button', { name: 'Join', exact: true })).toHaveCount(0);
  expect(errors).toEqual([]);
});
