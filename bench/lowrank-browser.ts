/**
 * bench/lowrank-page.ts in the system Chromium (headless, Playwright's executablePath; no
 * browser is downloaded): bundled by Vite's `build()` into one script (no file written), put in a
 * blank page, and called through `window.lowrankBench`. Same code as the Node half, so the two
 * tables differ only by the engine.
 */
import { existsSync } from 'node:fs';
import { type Browser, chromium, type Page } from '@playwright/test';
import { build } from 'vite';
import { CHROMIUM_WEBGPU_ARGS, chromiumPath } from '../scripts/chromium.mjs';
import type { LowRankBench } from './lowrank-page.ts';

const ENTRY = new URL('./lowrank-page.ts', import.meta.url).pathname;

export interface LowRankPage {
  /** The browser's path and version. */
  chromium: string;
  bundleBytes: number;
  call<M extends keyof LowRankBench>(
    method: M,
    ...args: Parameters<LowRankBench[M]>
  ): Promise<Awaited<ReturnType<LowRankBench[M]>>>;
  close(): Promise<void>;
}

/** The page, or the reason there is none: no Chromium to run it in. */
export async function openLowRankPage(): Promise<LowRankPage | { missing: string }> {
  const executablePath = chromiumPath();
  if (!executablePath) return { missing: 'no Chromium found (apt-get install chromium, or set CHROMIUM)' };
  if (!existsSync(executablePath)) return { missing: `no Chromium at ${executablePath} (CHROMIUM)` };
  const output = await build({
    configFile: false,
    logLevel: 'warn',
    build: {
      write: false,
      target: 'es2022',
      minify: false,
      reportCompressedSize: false,
      lib: { entry: ENTRY, formats: ['iife'], name: 'lowrankPage', fileName: 'lowrank-page' },
    },
  });
  const chunks = (Array.isArray(output) ? output : [output]).flatMap((o) => ('output' in o ? o.output : []));
  const code = chunks.map((c) => (c.type === 'chunk' ? c.code : '')).join('\n');
  let browser: Browser | undefined;
  try {
    // no WebGPU here: only the flags a closed network and root need
    browser = await chromium.launch({
      executablePath,
      args: CHROMIUM_WEBGPU_ARGS.filter((arg) => !/webgpu|vulkan/i.test(arg)),
    });
    const page = await browser.newPage();
    const errors: string[] = [];
    page.on('pageerror', (error) => errors.push(error.message));
    await page.setContent('<!doctype html><title>Shoal low-rank benchmark</title>');
    await page.addScriptTag({ content: code });
    if (!(await page.evaluate(() => 'lowrankBench' in globalThis))) {
      throw new Error(`the benchmark page did not start: ${errors.join('; ') || 'no window.lowrankBench'}`);
    }
    const opened = browser;
    return {
      chromium: `${executablePath} ${opened.version()}`,
      bundleBytes: code.length,
      call: (method, ...args) => call(page, method, ...args),
      close: () => opened.close(),
    };
  } catch (error) {
    await browser?.close();
    throw error;
  }
}

function call<M extends keyof LowRankBench>(
  page: Page,
  method: M,
  ...args: Parameters<LowRankBench[M]>
): Promise<Awaited<ReturnType<LowRankBench[M]>>> {
  return page.evaluate(
    ([name, list]) => {
      const api = (globalThis as unknown as { lowrankBench: Record<string, (...a: unknown[]) => unknown> })
        .lowrankBench;
      return (api[name] as (...a: unknown[]) => unknown)(...list);
    },
    [method, args] as [string, unknown[]],
  ) as Promise<Awaited<ReturnType<LowRankBench[M]>>>;
}
