/**
 * The host form and the room's lifecycle as a person meets them, on a phone-sized page: the
 * model and the text first, the rest under Advanced, errors beside the field as it is typed (τ
 * against H, the sequence against the model), then a room that asks before Stop and before a
 * New room, and that, stopped, offers its checkpoint instead of its join link.
 */
import { mkdirSync } from 'node:fs';
import { expect, test } from '@playwright/test';
import { recordErrors } from './fixtures.ts';

const SHOTS = 'test-results/screenshots';
mkdirSync(SHOTS, { recursive: true });

const errors: string[] = [];
test.afterEach(() => {
  expect(errors).toEqual([]);
  errors.length = 0;
});

test('the form: the model with its size, Advanced closed, cross-field errors beside their field as it is typed', async ({
  browser,
}) => {
  const context = await browser.newContext({ viewport: { width: 390, height: 844 } });
  const page = await context.newPage();
  recordErrors(page, 'host', errors);
  await page.goto('/host');
  const create = page.getByRole('button', { name: 'Create room' });
  // on a phone, Create is on the first screen: the model and the text are all there is above it
  await expect(create).toBeInViewport();
  await page.screenshot({ path: `${SHOTS}/host-form-phone.png` });
  await expect(page.locator('select[name=preset] option:checked')).toHaveText(/^nano — 121k parameters, 2 layers/);
  const advanced = page.getByTestId('advanced');
  await expect(advanced).not.toHaveAttribute('open', '');
  await expect(page.getByLabel('Merge delay, steps (τ)')).toBeHidden();

  await advanced.locator('summary').click();
  const tau = page.getByLabel('Merge delay, steps (τ)');
  const H = page.getByLabel('Inner steps per round (H)');
  await expect(tau).toHaveAttribute('inputmode', 'numeric');
  await expect(page.getByLabel('Inner learning rate')).toHaveAttribute('inputmode', 'decimal');
  // τ 60 with H 50: refused beside τ as it is typed, the help kept, both in τ's description
  await tau.fill('60');
  await expect(tau).toHaveAttribute('aria-invalid', 'true');
  await expect(tau).toHaveAccessibleDescription(
    /inner steps between sending a contribution .* less than the inner steps per round, H = 50/,
  );
  await expect(page.getByTestId('field-overlap').locator('.field-error')).toBeVisible();
  await expect(create).toBeDisabled();
  await expect(page.locator('#create-problem')).toHaveText('Correct Merge delay, steps (τ) first.');
  await page.getByTestId('field-overlap').screenshot({ path: `${SHOTS}/host-form-error.png` });
  // a longer H makes the same τ right
  await H.fill('80');
  await expect(tau).toHaveAttribute('aria-invalid', 'false');
  await expect(create).toBeEnabled();

  // the sequence against the model's block size, re-checked when the model changes
  const seq = page.getByLabel('Sequence');
  await seq.fill('128');
  await expect(seq).toHaveAccessibleDescription(/at most the model's block size 64/);
  await expect(create).toBeDisabled();
  await page.getByLabel('Model').selectOption('tiny');
  await expect(seq).toHaveAttribute('aria-invalid', 'false');
  await expect(create).toBeEnabled();
  // the address reproduces the form, and a reload opens Advanced to show what it set
  await expect(page).toHaveURL(/\/host\?preset=tiny&innerSteps=80&overlap=60&seq=128$/);
  await page.reload();
  await expect(advanced).toHaveAttribute('open', '');
  await expect(tau).toHaveValue('60');
  await page.screenshot({ path: `${SHOTS}/host-form-advanced.png`, fullPage: true });
  await context.close();
});

test('a room asks before Stop and New room; stopped, it hides its join link and offers the checkpoint and Resume', async ({
  browser,
}) => {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  recordErrors(page, 'host', errors);
  await page.goto('/host?preset=nano&batch=4&seq=32');
  await page.getByRole('button', { name: 'Create room' }).click();
  const joinUrl = page.getByTestId('join-url');
  await expect(joinUrl).toHaveValue(/\/join\/[\w-]+\?token=/);
  // the links and their Copy buttons have names of their own
  await expect(page.getByRole('textbox', { name: 'Join link' })).toHaveValue(await joinUrl.inputValue());
  await expect(page.getByRole('button', { name: 'Copy the join link' })).toBeVisible();
  await expect(page.getByRole('button', { name: 'Copy the watch link' })).toBeVisible();
  // the run's configuration, from the room view
  const run = page.getByTestId('run-config');
  await expect(run).toContainText('nano: 121k parameters');
  await expect(run).toContainText('4 × 32 tokens per volunteer per step');
  await expect(run).toContainText('Inner steps per round (H)50');

  // New room on a live room asks, and Cancel stays
  await page.getByRole('link', { name: 'New room' }).click();
  const leave = page.getByTestId('leave-dialog');
  await expect(leave).toBeVisible();
  await expect(leave).toContainText('stops the rounds');
  await leave.getByRole('button', { name: 'Cancel' }).click();
  await expect(leave).toBeHidden();
  await expect(page).toHaveURL(/\/host\/[\w-]+$/);

  // Stop asks, says what stopping does, and Cancel changes nothing
  const status = page.getByTestId('room-status');
  await expect(status).toHaveText('waiting for Start');
  await page.getByRole('button', { name: 'Stop', exact: true }).click();
  const stop = page.getByTestId('stop-dialog');
  await expect(stop).toBeVisible();
  await expect(stop).toContainText('The last checkpoint stays in this browser');
  await page.screenshot({ path: `${SHOTS}/dashboard-stop-dialog.png` });
  await stop.getByRole('button', { name: 'Cancel' }).click();
  await expect(stop).toBeHidden();
  await expect(status).toHaveText('waiting for Start');
  await page.getByRole('button', { name: 'Stop', exact: true }).click();
  await stop.getByRole('button', { name: 'Stop the run' }).click();
  await expect(status).toHaveText('stopped');
  // stopped: no join link, no Rotate; why it ended, and what to do with the model
  await expect(joinUrl).toHaveCount(0);
  await expect(page.getByRole('button', { name: 'Rotate join token' })).toHaveCount(0);
  await expect(page.getByTestId('room-ended')).toHaveText('The host stopped the run.');
  const ended = page.getByTestId('run-ended');
  await expect(ended).toContainText('The last checkpoint is kept in this browser.');
  await expect(ended.getByRole('button', { name: 'Download checkpoint' })).toBeVisible();
  await expect(ended.getByRole('link', { name: 'Sample text' })).toBeVisible();
  await page.screenshot({ path: `${SHOTS}/dashboard-stopped.png`, fullPage: true });
  // New room no longer asks: nothing runs here
  await expect(page.getByRole('link', { name: 'New room' })).toBeVisible();

  // Resume goes on (no volunteer here: it waits for them), and the join link comes back
  await ended.getByRole('button', { name: 'Resume training' }).click();
  await expect(status).toHaveText('waiting for volunteers');
  await expect(ended).toHaveCount(0);
  await expect(joinUrl).toHaveValue(/\/join\//);
  await context.close();
});
