/**
 * A room on a packed dataset, from the dashboard: the spec packs a small seeded dataset (about
 * 600 KiB in 64 KiB shards) and serves it with `shoal server --datasets` (a server of its own:
 * the config's has no datasets dir). The host's form lists it, says why a URL without a dataset
 * is refused, and creates the room; a volunteer on the CPU fetches only its own training shards
 * into a cache of its default budget (4 × the largest shard) and says which shard it draws from;
 * the host evaluates θ_global on the dataset's validation shards, in bits per byte.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type BrowserContext, expect, test } from '@playwright/test';
import { packDataset } from '@shoal/data';
import { type Proc, shoalProcesses } from '../apps/cli/src/test-processes.ts';
import { readState, recordErrors } from './fixtures.ts';

// nano, short rounds, small batches (the CPU engine commits rounds within seconds), and a schedule
// that does not end by itself during the test
const ROOM_QUERY = 'preset=nano&innerSteps=5&fragments=2&overlap=1&batch=4&seq=32&lr=0.01&steps=1000000';
const SHOTS = 'test-results/screenshots';
const NAME = 'seeded-words';
const SHARD_BYTES = 64 * 1024;
const contexts: BrowserContext[] = [];
const errors: string[] = [];
const { start, until, killAll } = shoalProcesses();
let dir = '';
let origin = '';
let manifest = '';
/** The largest training shard's bytes (shards end at a line's end, so a little under SHARD_BYTES). */
let largestShard = 0;

/** About `bytes` of seeded words and lines (a fixed LCG): text-like, the same on every run. */
function seededText(bytes: number): string {
  const words = ['whale', 'sea', 'ship', 'captain', 'harpoon', 'deck', 'sail', 'wind', 'the', 'a', 'of', 'and'];
  let state = 12345;
  const parts: string[] = [];
  let length = 0;
  while (length < bytes) {
    state = (state * 1103515245 + 12345) % 2 ** 31;
    const word = words[state % words.length] as string;
    const part = state % 13 === 0 ? `${word}.\n` : `${word} `;
    parts.push(part);
    length += part.length;
  }
  return parts.join('');
}

test.beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'shoal-e2e-dataset-'));
  const input = join(dir, 'words.txt');
  writeFileSync(input, seededText(600 * 1024));
  const datasets = join(dir, 'datasets');
  mkdirSync(datasets);
  const packed = await packDataset([input], {
    outDir: join(datasets, NAME),
    shardBytes: SHARD_BYTES,
    name: NAME,
    validationFraction: 0.1, // one 64 KiB piece in ten: a validation shard from 600 KiB
  });
  manifest = packed.hash;
  const shards = (JSON.parse(readFileSync(packed.manifest, 'utf8')) as { shards: { bytes: number; split: string }[] })
    .shards;
  largestShard = Math.max(...shards.filter((shard) => shard.split === 'train').map((shard) => shard.bytes));
  // `shoal server --datasets` on a free port, in memory (the spec's own: the config's serves none)
  const server: Proc = start('server', [
    'server',
    '--port',
    '0',
    '--host',
    '127.0.0.1',
    '--no-persist',
    '--datasets',
    datasets,
  ]);
  const running = await until(
    () => server.text.map((line) => /Shoal is running\. Open http:\/\/[^:]+:(\d+)/.exec(line)).find(Boolean),
    30_000,
    'the server listening',
  );
  origin = `http://127.0.0.1:${running?.[1]}`;
});

test.afterAll(async () => {
  for (const context of contexts) await context.close().catch(() => {});
  killAll();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

test('a dashboard room on a packed dataset: a volunteer draws its own shards within its budget', async ({
  browser,
}) => {
  test.setTimeout(120_000);
  const hostContext = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  contexts.push(hostContext);
  const host = await hostContext.newPage();
  recordErrors(host, 'host', errors);
  await host.goto(`${origin}/host?${ROOM_QUERY}`);
  await host.getByRole('radio', { name: /packed dataset/i }).check();
  const create = host.getByRole('button', { name: 'Create room' });
  await expect(create).toBeDisabled(); // no URL yet

  // a folder without a dataset: refused with the server's answer, in the form
  const url = host.getByLabel('Dataset URL');
  await url.fill('/datasets/missing/');
  await create.click();
  await expect(host.getByTestId('packed-dataset')).toContainText('HTTP 404');
  await expect(create).toBeDisabled();

  // the server's own dataset, picked from its list
  const served = host.getByTestId('served-datasets');
  await expect(served).toContainText(NAME);
  await expect(served).toContainText(manifest.slice(0, 12));
  await served.getByRole('radio', { name: new RegExp(NAME) }).check();
  await expect(url).toHaveValue(`/datasets/${NAME}/`);
  mkdirSync(SHOTS, { recursive: true });
  await host.getByTestId('dataset-choice').screenshot({ path: `${SHOTS}/dataset-room-form.png` });
  await create.click();
  const hostDataset = host.getByTestId('dataset');
  await expect(hostDataset).toContainText(NAME, { timeout: 30_000 });
  await expect(hostDataset).toContainText(`manifest ${manifest.slice(0, 12)}`);
  const joinUrl = await host.getByTestId('join-url').inputValue();

  const context = await browser.newContext({ viewport: { width: 390, height: 844 } });
  contexts.push(context);
  const volunteer = await context.newPage();
  recordErrors(volunteer, 'volunteer', errors);
  await volunteer.goto(joinUrl);
  await volunteer.getByRole('radio', { name: /^CPU/ }).check(); // no need to wait for the measurement
  await volunteer.getByRole('button', { name: 'Join', exact: true }).click();
  await expect(volunteer.getByTestId('volunteer-phase')).toHaveText(/waiting|training/, { timeout: 60_000 });
  await expect.poll(async () => (await readState(host)).peers.length, { timeout: 30_000 }).toBe(1);
  await host.getByRole('button', { name: 'Start' }).click();

  // the volunteer: the dataset, the shard it draws from, and its cache within the default budget
  const dataset = volunteer.getByTestId('dataset');
  await expect(dataset).toContainText(NAME, { timeout: 30_000 });
  await expect(dataset).toContainText(`manifest ${manifest.slice(0, 12)}`);
  await expect(dataset).toContainText(/\d+ training \+ \d+ validation shards/);
  await expect(volunteer.getByTestId('shard-current')).toHaveText(/^\d+$/, { timeout: 30_000 });
  await expect(volunteer.getByTestId('shard-cache')).toHaveText(/^Shard cache: \d\.\d\d of 0\.25 MiB$/);
  const shards = (
    (await readState(volunteer)) as unknown as {
      volunteer: { shards: { heldBytes: number; budgetBytes: number; fetched: number; refused: number } };
    }
  ).volunteer.shards;
  expect(shards.budgetBytes).toBe(4 * largestShard);
  expect(shards.heldBytes).toBeGreaterThan(0);
  expect(shards.heldBytes).toBeLessThanOrEqual(shards.budgetBytes);
  expect(shards.fetched).toBeGreaterThan(0);
  expect(shards.refused).toBe(0);
  await volunteer.screenshot({ path: `${SHOTS}/dataset-room-volunteer.png`, fullPage: true });

  // the host's validation loss of θ_global, on the dataset's held-out shards
  await expect(host.getByTestId('eval-loss').first()).toContainText(/\d\.\d+ bits\/byte/, { timeout: 30_000 });
  expect((await readState(host)).metrics.evalLoss).toBeGreaterThan(0);
  // the one console error is the browser's line for the missing dataset's manifest, asked for above
  expect(errors).toEqual(['[host] Failed to load resource: the server responded with a status of 404 (Not Found)']);
});
