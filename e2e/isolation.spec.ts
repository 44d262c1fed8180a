/**
 * The app is cross-origin isolated wherever it is opened, and still works so: on the landing
 * page, a host's dashboard and a volunteer's join page, `crossOriginIsolated` is true, a shared
 * WebAssembly.Memory can be made and handed to a blob: worker (as the CPU engine's kernel threads
 * get theirs) that writes into it where the page sees it, the app's module workers run (the
 * engine probe measures the CPU), a volunteer trains on the CPU engine's kernel threads, every
 * response of ours carries the headers, and onnxruntime-web samples on two threads of its own
 * (workers started by onnxruntime itself).
 */
import { type Browser, type BrowserContext, expect, type Page, type Response, test } from '@playwright/test';
import { readState, recordErrors } from './fixtures.ts';

test.describe.configure({ mode: 'serial' });

const ROOM_QUERY = 'preset=nano&innerSteps=5&fragments=2&overlap=1&batch=4&seq=32&lr=0.01';
const contexts: BrowserContext[] = [];
const errors: string[] = [];
let host: Page;

test.afterAll(async () => {
  for (const context of contexts) await context.close().catch(() => {});
});

/** A page in a fresh context, its console errors recorded and its responses checked (`missing`). */
async function open(browser: Browser, name: string, missing: string[]): Promise<Page> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  contexts.push(context);
  const page = await context.newPage();
  recordErrors(page, name, errors);
  const origin = new URL(test.info().project.use.baseURL ?? 'http://localhost').origin;
  page.on('response', (response) => {
    const problem = headerProblem(response, origin);
    if (problem) missing.push(`[${name}] ${problem}`);
  });
  return page;
}

/** What a response from `origin` (ours) lacks of the isolation headers, or null. */
function headerProblem(response: Response, origin: string): string | null {
  const url = new URL(response.url());
  // a blob: URL's origin is its creator's: its "response" has no headers, and needs none
  if (url.protocol === 'blob:' || url.origin !== origin) return null;
  const headers = response.headers();
  const wrong = [
    ['cross-origin-opener-policy', 'same-origin'],
    ['cross-origin-embedder-policy', 'require-corp'],
    ['cross-origin-resource-policy', 'same-origin'],
  ].filter(([name, value]) => headers[name as string] !== value);
  return wrong.length
    ? `${url.pathname}: ${wrong.map(([name]) => `${name}=${headers[name as string]}`).join(', ')}`
    : null;
}

interface IsolationProbe {
  isolated: boolean;
  sharedBuffer: boolean;
  /** What the blob: worker found it had been given. */
  workerSaw: string;
  /** What the worker wrote into the memory, read back by the page. */
  written: number;
}

/**
 * In the page: a shared WebAssembly.Memory, posted to a worker started from a blob: URL (a
 * classic worker from a string, as spawn.browser.ts starts the kernel threads), which stores 42
 * into it with Atomics; the page waits for its reply and reads the word back from its own view.
 * Posting a shared memory throws a DataCloneError on a page that is not isolated.
 */
function probeIsolation(page: Page): Promise<IsolationProbe> {
  return page.evaluate(async () => {
    const memory = new WebAssembly.Memory({ initial: 1, maximum: 1, shared: true });
    const source = `onmessage = (event) => {
      const memory = event.data;
      const words = new Int32Array(memory.buffer);
      Atomics.store(words, 1, 42);
      postMessage(memory instanceof WebAssembly.Memory && memory.buffer instanceof SharedArrayBuffer ? 'shared memory' : String(memory));
    };`;
    const url = URL.createObjectURL(new Blob([source], { type: 'text/javascript' }));
    const worker = new Worker(url, { name: 'isolation probe' });
    try {
      const workerSaw = await new Promise<string>((resolve, reject) => {
        worker.onmessage = (event) => resolve(String(event.data));
        worker.onerror = (event) => reject(new Error(`the blob: worker failed: ${event.message || 'no message'}`));
        worker.postMessage(memory);
      });
      return {
        isolated: globalThis.crossOriginIsolated,
        sharedBuffer: memory.buffer instanceof SharedArrayBuffer,
        workerSaw,
        written: Atomics.load(new Int32Array(memory.buffer), 1),
      };
    } finally {
      worker.terminate();
      URL.revokeObjectURL(url);
    }
  });
}

const ISOLATED: IsolationProbe = { isolated: true, sharedBuffer: true, workerSaw: 'shared memory', written: 42 };

test('the landing page is isolated: shared memory reaches a blob: worker, the engine probe still measures', async ({
  browser,
}) => {
  const missing: string[] = [];
  const page = await open(browser, 'landing', missing);
  await page.goto('/');
  expect(await probeIsolation(page)).toEqual(ISOLATED);
  // the engine probe's module worker ran under require-corp and measured the CPU engine
  await expect(page.getByTestId('can-volunteer-line')).toHaveText(/on the CPU, about [\d,]+ tokens\/s/, {
    timeout: 90_000,
  });
  expect(missing).toEqual([]);
  expect(errors).toEqual([]);
});

test('the host dashboard and a volunteer join page are isolated; the volunteer trains on CPU kernel threads', async ({
  browser,
}) => {
  test.setTimeout(240_000);
  const missing: string[] = [];
  host = await open(browser, 'host', missing);
  // four cores, so that the sampler asks onnxruntime-web for two threads (defaultThreads: half the
  // cores on an isolated page) even on a 2-core test machine
  await host.addInitScript(() => Object.defineProperty(Navigator.prototype, 'hardwareConcurrency', { get: () => 4 }));
  await host.goto(`/host?${ROOM_QUERY}`);
  await host.getByRole('button', { name: 'Create room' }).click();
  const joinUrl = await host.getByTestId('join-url').inputValue();
  expect(await probeIsolation(host)).toEqual(ISOLATED);

  const volunteer = await open(browser, 'volunteer', missing);
  await volunteer.goto(joinUrl);
  await expect(volunteer.getByTestId('room-check')).toContainText(/^Room [\w-]{12} /);
  expect(await probeIsolation(volunteer)).toEqual(ISOLATED);
  await expect(volunteer.getByTestId('engine-verdict')).toContainText(/CPU: about [\d,]+ tokens\/s/, {
    timeout: 120_000,
  });
  // the CPU engine on every core (at most 8): kernel threads from blob: URLs on one shared memory
  const cores = await volunteer.evaluate(() => navigator.hardwareConcurrency);
  const threads = Math.min(8, cores);
  await volunteer.getByRole('radio', { name: /^CPU/ }).check();
  await volunteer.getByRole('button', { name: 'Join', exact: true }).click();
  await expect(volunteer.getByTestId('volunteer-phase')).toHaveText(/waiting|training/, { timeout: 90_000 });
  await expect(volunteer.getByTestId('volunteer-adapter')).toContainText(
    `CPU (WebAssembly SIMD, ${threads} thread${threads === 1 ? '' : 's'})`,
  );
  await expect.poll(async () => (await readState(host)).peers.length, { timeout: 60_000 }).toBe(1);
  await host.getByRole('button', { name: 'Start' }).click();
  await expect
    .poll(async () => (await readState(volunteer)).metrics.step ?? 0, { timeout: 120_000 })
    .toBeGreaterThan(2);
  expect(missing).toEqual([]);
  expect(errors).toEqual([]);
});

test('onnxruntime-web samples on the isolated dashboard, on two threads of its own', async () => {
  test.setTimeout(120_000);
  await host.getByTestId('sample-max-tokens').fill('8');
  await host.getByTestId('sample-generate').click();
  await expect(host.getByTestId('sample-status')).toContainText(/\d+ tokens in/, { timeout: 90_000 });
  await expect(host.getByTestId('sample-error')).toHaveCount(0);
  await expect(host.getByTestId('sample-output')).toContainText('Call me Ishmael.');
  // "2 threads": the threaded start worked (a failed one retries on a single thread and says "1 thread")
  await expect(host.getByTestId('sample-status')).toContainText('· 2 threads');
  expect(errors).toEqual([]);
});
