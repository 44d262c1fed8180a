/**
 * A pipeline-parallel room in Chromium (SwiftShader WebGPU): the host creates a room of S = 2
 * stages from the URL query; the first volunteer takes stage 0 of group 0 and builds its WebGPU
 * stage engine, and the dashboard's groups × stages grid shows stage 1 waiting for a volunteer
 * while the volunteer's page says it waits for one. Then a second volunteer completes the group,
 * and both stages train over the mesh.
 */
import { mkdirSync } from 'node:fs';
import { type Browser, type BrowserContext, expect, type Page, test } from '@playwright/test';
import { readState, recordErrors } from './fixtures.ts';

const SHOTS = 'test-results/screenshots';
// nano has 2 blocks: one a stage, each fragment a stage (P = S)
const ROOM_QUERY =
  'preset=nano&innerSteps=5&fragments=2&batch=4&seq=32&lr=0.01&pipelineStages=2&microBatches=2&activations=bf16';

interface PipelineState {
  pipeline: { stages: number; groups: { id: number; members: (string | null)[]; complete: boolean }[] } | null;
  volunteer: {
    innerStep: number;
    pipeline: { place: { group: number; stage: number } | null; starting: boolean } | null;
  } | null;
}
const readPipeline = (page: Page) =>
  page.evaluate(() => (window as unknown as { shoal: { getState(): PipelineState } }).shoal.getState());

test.describe.configure({ mode: 'serial' });

const contexts: BrowserContext[] = [];
const errors: string[] = [];
let host: Page;
let first: Page;
let joinUrl = '';

test.afterAll(async () => {
  for (const context of contexts) await context.close().catch(() => {});
});

async function open(browser: Browser, name: string, viewport: { width: number; height: number }): Promise<Page> {
  const context = await browser.newContext({ viewport });
  contexts.push(context);
  const page = await context.newPage();
  recordErrors(page, name, errors);
  return page;
}

async function joinAs(browser: Browser, name: string): Promise<Page> {
  const page = await open(browser, name, { width: 390, height: 844 }); // a phone
  await page.goto(joinUrl);
  // the stages train on WebGPU: the engine probe would pick the far faster CPU on a software adapter
  await page.getByRole('radio', { name: /^GPU/ }).check();
  await page.getByRole('button', { name: 'Join', exact: true }).click();
  await expect(page.getByTestId('volunteer-phase')).toHaveText(/waiting|training/, { timeout: 90_000 });
  return page;
}

const grid = () => host.getByRole('table', { name: /Each row is a replica group/ });

test('a pipeline room shows its settings, and a group whose stage 1 waits for a volunteer', async ({ browser }) => {
  test.setTimeout(120_000);
  host = await open(browser, 'host', { width: 1280, height: 900 });
  await host.goto(`/host?${ROOM_QUERY}`);
  await expect(host.locator('input[name=pipelineStages]')).toHaveValue('2');
  await host.getByRole('button', { name: 'Create room' }).click();
  joinUrl = await host.getByTestId('join-url').inputValue();

  // the run's pipeline settings, before anyone joins
  const section = host.getByTestId('pipeline');
  await expect(section.getByRole('heading', { name: 'Groups and stages' })).toBeVisible();
  const settings = section.getByTestId('pipeline-settings');
  await expect(settings).toContainText('Stages S2');
  await expect(settings).toContainText('Micro-batches M2');
  await expect(settings).toContainText('1F1B');
  await expect(settings).toContainText('bf16');
  await expect(section).toContainText('No groups yet');

  first = await joinAs(browser, 'volunteer-1');
  await host.getByRole('button', { name: 'Start' }).click();

  // one volunteer: group 0 holds it at stage 0, and stage 1 waits for a volunteer
  await expect(grid().getByTestId('group-row')).toHaveCount(1);
  await expect(grid().getByTestId('group-slot')).toHaveText([/synced|syncing|joining/, 'waiting for a volunteer']);
  await expect(grid().getByTestId('group-row')).toContainText('waiting for stage 1');
  await expect(host.getByTestId('peer-stage')).toHaveText(['g0 · s0 (block 0)']);
  // its page says where it is and what it waits for, not that it trains
  await expect(first.getByTestId('volunteer-place')).toContainText('Group g0, stage 0 of 2 (block 0 of the model)');
  await expect(first.getByTestId('stage-waiting')).toHaveText(/Waiting for a volunteer for stage 1 of group 0/);
  await expect(first.getByTestId('volunteer-phase')).toHaveText('waiting');
  // its stage's engine is built on its WebGPU device (GpuStageTrainer), ready for the group
  await expect
    .poll(async () => (await readPipeline(first)).volunteer?.pipeline, { timeout: 60_000 })
    .toMatchObject({ place: { group: 0, stage: 0 }, starting: false });
  expect((await readPipeline(first)).volunteer?.innerStep).toBe(0);
  expect((await readPipeline(host)).pipeline).toMatchObject({
    stages: 2,
    groups: [{ id: 0, members: [expect.any(String), null], complete: false }],
  });
  mkdirSync(SHOTS, { recursive: true });
  await host.screenshot({ path: `${SHOTS}/pipeline-dashboard.png`, fullPage: true });
  await first.screenshot({ path: `${SHOTS}/pipeline-volunteer.png`, fullPage: true });
  expect(errors).toEqual([]);
});

test('a second volunteer completes the group, and both stages train', async ({ browser }) => {
  test.setTimeout(90_000);
  const second = await joinAs(browser, 'volunteer-2');
  // it takes stage 1 of group 0 (not a group of its own): the grid has one full row
  await expect(grid().getByTestId('group-row')).toContainText('trains');
  await expect(grid().getByTestId('group-row')).toHaveCount(1);
  await expect(grid().getByText('waiting for a volunteer')).toHaveCount(0);
  await expect(first.getByTestId('stage-waiting')).toHaveCount(0);
  const steps = async (page: Page) => (await readPipeline(page)).volunteer?.innerStep ?? 0;
  await expect.poll(() => steps(first), { timeout: 45_000 }).toBeGreaterThan(3);
  await expect.poll(() => steps(second), { timeout: 15_000 }).toBeGreaterThan(3);
  expect((await readPipeline(second)).volunteer?.pipeline?.place).toMatchObject({ group: 0, stage: 1 });
  await expect(first.getByTestId('volunteer-phase')).toHaveText('training');
  expect((await readState(host)).peers).toHaveLength(2);
  await expect(host.getByTestId('peer-stage')).toHaveText(['g0 · s0 (block 0)', 'g0 · s1 (block 1)']);
  await host.screenshot({ path: `${SHOTS}/pipeline-dashboard-trains.png`, fullPage: true });
  await second.screenshot({ path: `${SHOTS}/pipeline-volunteer-trains.png`, fullPage: true });
  expect(errors).toEqual([]);
});
