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
    // and offers the CPU, measured, instead of only how to enable WebGPU
    await expect(page.getByTestId('can-volunteer-line')).toHaveText(
      /^Without WebGPU, this browser can still volunteer: on the CPU, about [\d,]+ tokens\/s/,
      { timeout: 60_000 },
    );
    // a join link to no room says so before anything else
    await page.goto(`${baseURL}/join/some-room?token=some-token`);
    await expect(page.getByRole('alert')).toContainText('Room some-room does not exist');
    await expect(page.getByRole('button', { name: 'Join', exact: true })).toHaveCount(0);
  } finally {
    await browser.close();
  }
});

test('the first load is under 1 MB of JavaScript, onnxruntime-web not among it', async ({ browser }) => {
  const scripts = async (page: import('@playwright/test').Page) =>
    page.evaluate(() =>
      performance
        .getEntriesByType('resource')
        .map((entry) => entry as PerformanceResourceTiming)
        .filter((entry) => /\.m?js(\?|$)/.test(entry.name))
        // a worker started twice (the engine probe's, one per engine) is one file: count it once
        .filter((entry, index, all) => all.findIndex((other) => other.name === entry.name) === index)
        .map((entry) => ({
          name: new URL(entry.name).pathname,
          bytes: entry.decodedBodySize,
          transferred: entry.encodedBodySize,
        })),
    );
  for (const path of ['/', '/host']) {
    // a fresh context each time: a script from the memory cache may leave no resource timing entry
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(path);
    await page.waitForLoadState('networkidle');
    const loaded = await scripts(page);
    // a worker's own script (the engine probe's) may be missing from the page's resource timing:
    // its size as the server sends it, plain and compressed
    for (const worker of page.workers()) {
      if (worker.url().startsWith('blob:')) continue; // made in the page: nothing loaded
      const name = new URL(worker.url()).pathname;
      if (loaded.some((s) => s.name === name)) continue;
      const plain = await page.request.get(name, { headers: { 'accept-encoding': 'identity' } });
      const packed = await page.request.get(name, { headers: { 'accept-encoding': 'br, gzip' } });
      const bytes = (await plain.body()).length;
      loaded.push({ name, bytes, transferred: Number(packed.headers()['content-length'] ?? bytes) });
    }
    await context.close();
    const total = loaded.reduce((sum, s) => sum + s.bytes, 0);
    const sent = loaded.reduce((sum, s) => sum + s.transferred, 0);
    console.log(
      `first load of ${path}: ${(total / 1e6).toFixed(3)} MB of JavaScript in ${loaded.length} files ` +
        `(${(sent / 1e6).toFixed(3)} MB over the wire, compressed): ` +
        loaded.map((s) => `${s.name} ${(s.bytes / 1e3).toFixed(0)} kB`).join(', '),
    );
    expect(loaded.filter((s) => /ort|onnx|sample-engine|sample\.worker/.test(s.name))).toEqual([]);
    expect(total).toBeGreaterThan(100_000); // the app itself was measured
    expect(total).toBeLessThan(1_000_000);
  }
});
