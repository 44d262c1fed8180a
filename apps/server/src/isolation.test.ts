/**
 * Vite's dev server and its preview, both from the repository's vite.config.ts, send the same
 * cross-origin isolation headers as `shoal server` (index.test.ts covers that one): a page, a
 * module, a module worker, a public file, the corpus, and in the preview a built worker and .wasm.
 */
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createServer, preview } from 'vite';
import { afterEach, describe, expect, it } from 'vitest';

const CONFIG_FILE = fileURLToPath(new URL('../../../vite.config.ts', import.meta.url));

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0)) await close();
});

async function expectIsolated(base: string, paths: string[]) {
  for (const path of paths) {
    const response = await fetch(`${base}${path}`);
    expect(response.status, path).toBe(200);
    await response.arrayBuffer();
    expect.soft(response.headers.get('cross-origin-opener-policy'), path).toBe('same-origin');
    expect.soft(response.headers.get('cross-origin-embedder-policy'), path).toBe('require-corp');
    expect.soft(response.headers.get('cross-origin-resource-policy'), path).toBe('same-origin');
  }
}

describe('Vite serves the web app cross-origin isolated', () => {
  it('in the dev server', async () => {
    const server = await createServer({
      configFile: CONFIG_FILE,
      logLevel: 'silent',
      server: { port: 0, host: '127.0.0.1', strictPort: true, hmr: false, watch: null },
    });
    closers.push(() => server.close());
    await server.listen();
    const base = server.resolvedUrls?.local[0]?.replace(/\/$/, '');
    if (!base) throw new Error('the Vite dev server has no local URL');
    await expectIsolated(base, [
      '/',
      '/join/room-1?token=t',
      '/src/main.tsx',
      '/src/sampling/sample.worker.ts?worker_file&type=module',
      '/favicon.svg',
      '/data/moby-dick.txt',
    ]);
  });

  it('in the preview of a build', async () => {
    const outDir = mkdtempSync(join(tmpdir(), 'shoal-preview-'));
    mkdirSync(join(outDir, 'assets'));
    writeFileSync(join(outDir, 'index.html'), '<!doctype html><title>Shoal preview</title>');
    writeFileSync(join(outDir, 'assets', 'room.worker-abc.js'), 'onmessage = () => {}');
    writeFileSync(join(outDir, 'assets', 'ort-wasm-simd-threaded-abc.wasm'), new Uint8Array(1024));
    const server = await preview({
      configFile: CONFIG_FILE,
      logLevel: 'silent',
      build: { outDir },
      preview: { port: 0, host: '127.0.0.1', strictPort: true },
    });
    closers.push(() => server.close());
    const base = server.resolvedUrls?.local[0]?.replace(/\/$/, '');
    if (!base) throw new Error('the Vite preview server has no local URL');
    await expectIsolated(base, [
      '/',
      '/host/room-1',
      '/assets/room.worker-abc.js',
      '/assets/ort-wasm-simd-threaded-abc.wasm',
    ]);
  });
});
