/**
 * A room its schedule ended: the dashboard says the schedule ended it and offers one download and
 * "train on in a new room" (not Resume); the rooms list offers the same; training on opens a new
 * room whose step and tokens go on from the checkpoint, on a longer schedule.
 */
import { expect, test } from '@playwright/test';
import { readState, recordErrors } from './fixtures.ts';

// nano, small batches, short rounds and a 40-step schedule: one CPU volunteer ends it in seconds
const ROOM_QUERY = 'preset=nano&innerSteps=5&fragments=2&overlap=1&batch=4&seq=32&lr=0.01&steps=40';

test('a finished room offers training on in a new room, and the step goes on', async ({ browser }) => {
  test.setTimeout(180_000);
  const errors: string[] = [];
  const hostContext = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const volunteerContext = await browser.newContext();
  try {
    const host = await hostContext.newPage();
    recordErrors(host, 'host', errors);
    await host.goto(`/host?${ROOM_QUERY}`);
    await host.getByRole('button', { name: 'Create room' }).click();
    const joinUrl = await host.getByTestId('join-url').inputValue();
    const roomId = (await readState(host)).roomId as string;
    const volunteer = await volunteerContext.newPage();
    recordErrors(volunteer, 'volunteer', errors);
    await volunteer.goto(joinUrl);
    await volunteer.getByRole('radio', { name: /^CPU/ }).check();
    await volunteer.getByRole('button', { name: 'Join', exact: true }).click();
    await expect(volunteer.getByTestId('volunteer-phase')).toHaveText(/waiting|training/, { timeout: 90_000 });
    await expect.poll(async () => (await readState(host)).peers.length, { timeout: 60_000 }).toBe(1);
    await host.getByRole('button', { name: 'Start' }).click();

    // the schedule ends it: said so, one download, train on instead of Resume
    await expect(host.getByTestId('room-ended')).toContainText('The learning-rate schedule’s 40 steps are done', {
      timeout: 120_000,
    });
    const ended = host.getByTestId('run-ended');
    await expect(host.getByRole('button', { name: /^Download/ })).toHaveCount(1);
    await expect(ended.getByRole('button', { name: 'Resume training' })).toHaveCount(0);
    await expect(ended.getByRole('link', { name: 'Train on from this checkpoint in a new room' })).toBeVisible();
    const finished = (await readState(host)).checkpoint;
    expect(finished?.step).toBeGreaterThanOrEqual(40);

    // the rooms list says the same
    await host.goto('/host');
    const row = host.getByTestId('hosted-rooms').locator('tbody tr', { hasText: roomId });
    await expect(row).toContainText('schedule done');
    await expect(row.getByRole('link', { name: `Resume room ${roomId}` })).toHaveCount(0);
    await row.getByRole('link', { name: `Train on from room ${roomId}’s checkpoint in a new room` }).click();

    const form = host.getByTestId('train-on');
    await expect(form.getByLabel('Schedule steps')).toHaveValue('80');
    await expect(form).toContainText('the learning rate rises again');
    await form.getByRole('button', { name: 'Create the room' }).click();
    await expect(host.getByTestId('join-url')).toHaveValue(/\/join\//);
    expect((await readState(host)).roomId).not.toBe(roomId);
    // the step and tokens go on from the checkpoint, on the longer schedule
    await expect(host.getByTestId('run-progress')).toHaveText(/^Step [\d,]+ of 80 · /);
    const step = Number((await host.getByTestId('room-step').textContent())?.replace(/,/g, ''));
    expect(step).toBeGreaterThanOrEqual(finished?.step ?? 40);
    expect((await readState(host)).metrics.tokens).toBeGreaterThanOrEqual(finished?.tokens ?? 1);
    expect(errors).toEqual([]);
  } finally {
    await volunteerContext.close();
    await hostContext.close();
  }
});
