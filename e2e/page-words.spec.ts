/**
 * The words a person meets before any room trains: each page its own tab title; the landing page
 * leads with host, join and watch, the GPU's details folded; a join link cut short says so (not
 * that the host rotated it); a wrong watch key is refused and nothing after it looks live.
 */
import { expect, test } from '@playwright/test';
import { readState, recordErrors } from './fixtures.ts';

test('titles, the landing page’s choices, a join link without a token, a wrong watch key', async ({ browser }) => {
  const errors: string[] = [];
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  try {
    const page = await context.newPage();
    recordErrors(page, 'page', errors);
    await page.goto('/');
    await expect(page).toHaveTitle(/^Shoal/);
    for (const name of ['Host a room', 'Join a room', 'Watch a room']) {
      await expect(page.getByRole('heading', { name, exact: true })).toBeVisible();
    }
    await expect(page.getByTestId('adapter-summary')).toBeHidden(); // one click away
    await page.getByText('This browser’s GPU: the adapter and a WGSL self-test').click();
    await expect(page.getByTestId('adapter-summary')).toBeVisible();

    await page.goto('/host');
    await expect(page).toHaveTitle('Host a room · Shoal');
    await page.getByRole('button', { name: 'Create room' }).click();
    const joinUrl = await page.getByTestId('join-url').inputValue();
    const { roomId } = await readState(page);
    await expect(page).toHaveTitle(`Room ${roomId} (host) · Shoal`);

    const other = await context.newPage();
    recordErrors(other, 'other', errors);
    await other.goto(joinUrl.replace(/\?token=.*$/, ''));
    await expect(other).toHaveTitle(`Join room ${roomId} · Shoal`);
    await expect(other.getByRole('alert')).toContainText('This join link has no token');
    await expect(other.getByRole('alert')).not.toContainText('rotated');

    await other.goto(`/watch/${roomId}?key=${'A'.repeat(43)}`);
    await expect(other).toHaveTitle(`Watch room ${roomId} · Shoal`);
    await expect(other.getByRole('alert')).toContainText('This watch link is not valid for the room.');
    await expect(other.getByTestId('watch-phase')).toHaveCount(0);
    await expect(other.getByText(/connecting…|Share the join link/)).toHaveCount(0);
    // the refusal is the page's only error
    expect(errors.filter((e) => !/bad-key|not valid/.test(e))).toEqual([]);
  } finally {
    await context.close();
  }
});
