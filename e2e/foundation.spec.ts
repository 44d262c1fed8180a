import { chromium, expect, test } from '@playwright/test';
import { CHROMIUM_WEBGPU_ARGS, chromiumPath } from '../scripts/chromium.mjs';

interface PageState {
  gpu: { kind: string; adapter?: { vendor: string; architecture: string; description: string; isFallback: boolean } };
  selfTest: { pass: boolean; cases: { n: number; got: number; want: number; ok: boolean }[] } | null;
}

const readState = (page: import('@playwright/test').Page) =>
  page.evaluate(() => (window as unknown as { shoal: { getState(): PageState } }).shoal.getState());

test('the page finds the SwiftShader adapter and the WGSL sum matches the CPU in Chromium', async ({ page }) => {
  const errors: string[] = [];
  page.on('console', (message) => message.type() === 'error' && errors.push(message.text()));
  page.on('pageerror', (error) => errors.push(String(error)));

  await page.goto('/');
  await expect(page.getByRole('heading', { name: 'Shoal' })).toBeVisible();
  await expect(page.getByTestId('adapter-summary')).toContainText(/swiftshader/i);
  await expect(page.getByTestId('self-test-status')).toHaveText('pass', { timeout: 60_000 });

  const state = await readState(page);
  expect(state.gpu.kind).toBe('ready');
  expect(state.gpu.adapter?.architecture).toMatch(/swiftshader/i);
  // The kernel ran in the browser on several sizes, each checked against the CPU.
  expect(state.selfTest?.cases.length).toBeGreaterThanOrEqual(5);
  for (const c of state.selfTest?.cases ?? []) {
    expect(c.ok, `n=${c.n}: GPU ${c.got} vs CPU ${c.want}`).toBe(true);
    expect(Number.isFinite(c.got)).toBe(true);
  }
  expect(errors).toEqual([]);
});

test('a browser without WebGPU gets an explanation, not a blank page', async ({ baseURL }) => {
  const args = CHROMIUM_WEBGPU_ARGS.filter((a) => !a.includes('webgpu')).concat('--disable-features=WebGPU');
  const browser = await chromium.launch({ executablePath: chromiumPath() ?? undefined, args });
  try {
    const page = await browser.newPage();
    await page.goto(baseURL ?? '/');
    await expect(page.getByTestId('no-webgpu')).toBeVisible();
    await expect(page.getByTestId('no-webgpu')).toContainText(/Chrome|WebGPU/);
    expect((await readState(page)).gpu.kind).toBe('unavailable');
  } finally {
    await browser.close();
  }
});
