/**
 * The Chromium side: bench/mesh-page built with Vite's `build()` and the web app's shim settings
 * (vite.shims.ts) into a temporary folder, served by a small node:http server on 127.0.0.1, and
 * opened twice (?id=a, ?id=b) in one context of the system Chromium (headless, via Playwright's
 * executablePath; no browser is downloaded). The pages signal to each other themselves; this
 * side only calls `window.meshBench` in each.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { extname, join, normalize } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type Browser, chromium, type Page } from '@playwright/test';
import { build } from 'vite';
import { CHROMIUM_WEBGPU_ARGS, chromiumPath } from '../../scripts/chromium.mjs';
import { browserShims } from '../../vite.shims.ts';
import type { MeshBench } from '../mesh-page/main.ts';
import type { Pairs } from './node-pairs.ts';
import type { Variant } from './throughput.ts';

const PAGE_ROOT = fileURLToPath(new URL('../mesh-page/', import.meta.url));

export interface BrowserPairs extends Pairs {
  chromium: string;
  bundleBytes: number;
}

export async function browserPairs(
  shoalChunks: number[],
  rawChunks: (maxMessageSize: number) => number[],
): Promise<BrowserPairs> {
  const executablePath = chromiumPath();
  if (!executablePath)
    throw new Error('no Chromium: apt-get install chromium, or set CHROMIUM, or pass --skip-browser');
  const outDir = await mkdtemp(join(tmpdir(), 'shoal-mesh-page-'));
  let server: Server | undefined;
  let browser: Browser | undefined;
  try {
    const output = await build({
      configFile: false,
      root: PAGE_ROOT,
      logLevel: 'warn',
      ...browserShims,
      build: { outDir, emptyOutDir: true, target: 'es2022', reportCompressedSize: false },
    });
    const chunks = (Array.isArray(output) ? output : [output]).flatMap((o) => ('output' in o ? o.output : []));
    const bundleBytes = chunks.reduce((sum, c) => sum + (c.type === 'chunk' ? c.code.length : 0), 0);
    server = await serve(outDir);
    const address = server.address();
    const port = typeof address === 'object' && address ? address.port : 0;
    // WebGPU flags are not needed, the rest are (closed network, root)
    browser = await chromium.launch({
      executablePath,
      args: CHROMIUM_WEBGPU_ARGS.filter((arg) => !/webgpu|vulkan/i.test(arg)),
    });
    const context = await browser.newContext();
    const errors: string[] = [];
    const open = async (id: string) => {
      const page = await context.newPage();
      page.on('pageerror', (error) => errors.push(`${id}: ${error.message}`));
      await page.goto(`http://127.0.0.1:${port}/?id=${id}`);
      await page
        .waitForFunction(() => 'meshBench' in window)
        .catch((error) => {
          throw new Error(`the benchmark page did not start: ${errors.join('; ') || String(error)}`);
        });
      // a hidden page's timers are throttled, which would slow the drain polling
      const visibility = await page.evaluate(() => document.visibilityState);
      if (visibility !== 'visible') console.warn(`page ${id} is ${visibility}: its timers may be throttled`);
      return page;
    };
    const a = await open('a');
    const b = await open('b');
    const variants: Variant[] = [];
    for (const chunkBytes of shoalChunks) {
      const key = `shoal-${chunkBytes}`;
      await Promise.all([a, b].map((page, i) => bench(page, 'connectShoal', key, i ? 'a' : 'b', chunkBytes)));
      variants.push({
        transport: 'shoal',
        chunkBytes,
        send: (size, seed) => bench(a, 'send', key, 'b', size, seed, chunkBytes),
        next: () => bench(b, 'next', key),
      });
    }
    const [maxMessageSize] = await Promise.all(
      [a, b].map((page, i) => bench(page, 'connectRaw', 'raw', i ? 'a' : 'b')),
    );
    for (const chunkBytes of rawChunks(maxMessageSize ?? 64 * 1024)) {
      variants.push({
        transport: 'raw',
        chunkBytes,
        expect: (size) => bench(b, 'expect', 'raw', size),
        send: (size, seed) => bench(a, 'send', 'raw', 'b', size, seed, chunkBytes),
        next: () => bench(b, 'next', 'raw'),
      });
    }
    const openedBrowser = browser;
    const openedServer = server;
    return {
      variants,
      chromium: `${executablePath} ${openedBrowser.version()}`,
      bundleBytes,
      close: async () => {
        await openedBrowser.close();
        openedServer.close();
        await rm(outDir, { recursive: true, force: true });
      },
    };
  } catch (error) {
    await browser?.close();
    server?.close();
    await rm(outDir, { recursive: true, force: true });
    throw error;
  }
}

/** Calls `window.meshBench[method](...args)` in `page`. */
function bench<M extends keyof MeshBench>(
  page: Page,
  method: M,
  ...args: Parameters<MeshBench[M]>
): Promise<Awaited<ReturnType<MeshBench[M]>>> {
  return page.evaluate(
    ([name, list]) => {
      const api = (window as unknown as { meshBench: Record<string, (...a: unknown[]) => unknown> }).meshBench;
      return (api[name] as (...a: unknown[]) => unknown)(...list);
    },
    [method, args] as [string, unknown[]],
  ) as Promise<Awaited<ReturnType<MeshBench[M]>>>;
}

const TYPES: Record<string, string> = { '.html': 'text/html', '.js': 'text/javascript', '.map': 'application/json' };

/** Static files from `root` on 127.0.0.1, on a free port. */
async function serve(root: string): Promise<Server> {
  const server = createServer(async (request, response) => {
    const path = normalize(decodeURIComponent(new URL(request.url ?? '/', 'http://x').pathname));
    const file = join(root, path.endsWith('/') ? `${path}index.html` : path);
    if (!file.startsWith(root)) return void response.writeHead(403).end();
    try {
      const body = await readFile(file);
      response.writeHead(200, { 'content-type': TYPES[extname(file)] ?? 'application/octet-stream' }).end(body);
    } catch {
      response.writeHead(404).end();
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return server;
}
