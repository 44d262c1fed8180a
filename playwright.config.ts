import { defineConfig } from '@playwright/test';
import { CHROMIUM_WEBGPU_ARGS, chromiumPath } from './scripts/chromium.mjs';

const port = Number(process.env.E2E_PORT ?? 8091);
const executablePath = chromiumPath();
if (!executablePath) {
  throw new Error('No Chromium found for the e2e tests: apt-get install chromium, or set CHROMIUM=/path/to/chrome.');
}

// Always the system Chromium (executablePath): Playwright never downloads a browser here.
export default defineConfig({
  testDir: 'e2e',
  timeout: 120_000,
  expect: { timeout: 30_000 },
  fullyParallel: false,
  workers: 1,
  forbidOnly: Boolean(process.env.CI),
  reporter: process.env.CI ? [['list']] : [['list'], ['html', { open: 'never' }]],
  use: {
    baseURL: `http://localhost:${port}`,
    launchOptions: { executablePath, args: CHROMIUM_WEBGPU_ARGS },
    trace: 'retain-on-failure',
  },
  webServer: {
    command: `node apps/cli/bin/shoal.mjs server --port ${port} --host 127.0.0.1`,
    url: `http://localhost:${port}/healthz`,
    reuseExistingServer: !process.env.CI,
    stdout: 'pipe',
    timeout: 60_000,
  },
});
