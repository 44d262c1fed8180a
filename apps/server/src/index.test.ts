import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { get as httpGet } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { brotliCompressSync, brotliDecompressSync, gunzipSync, gzipSync } from 'node:zlib';
import { afterEach, describe, expect, it } from 'vitest';
import { type RunningServer, startServer } from './index.ts';
import { CROSS_ORIGIN_ISOLATION_HEADERS } from './isolation.ts';

let server: RunningServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

function fakeBuild(): string {
  const dir = mkdtempSync(join(tmpdir(), 'shoal-web-'));
  writeFileSync(join(dir, 'index.html'), '<!doctype html><title>Shoal test</title>');
  writeFileSync(join(dir, 'app.js'), 'console.log(1)');
  return dir;
}

describe('startServer', () => {
  it('serves the app, falls back to index.html for client routes, and answers /healthz', async () => {
    server = await startServer({ port: 0, host: '127.0.0.1', staticDir: fakeBuild() });
    expect(await (await fetch(`${server.url}/`)).text()).toContain('Shoal test');
    expect(await (await fetch(`${server.url}/host?preset=nano`)).text()).toContain('Shoal test');
    const script = await fetch(`${server.url}/app.js`);
    expect(script.headers.get('content-type')).toMatch(/javascript/);
    expect(await (await fetch(`${server.url}/healthz`)).json()).toEqual({ ok: true, webBuilt: true });
  });

  it('sends the compressed copy the build wrote to a browser that accepts it, the file itself otherwise', async () => {
    const dir = fakeBuild();
    const wasm = new Uint8Array(64 * 1024).fill(7);
    writeFileSync(join(dir, 'engine.wasm'), wasm);
    writeFileSync(join(dir, 'engine.wasm.br'), brotliCompressSync(wasm));
    writeFileSync(join(dir, 'engine.wasm.gz'), gzipSync(wasm));
    server = await startServer({ port: 0, host: '127.0.0.1', staticDir: dir });
    const get = (encoding: string) =>
      new Promise<{ headers: Record<string, unknown>; body: Buffer }>((resolve, reject) => {
        // node:http, not fetch: fetch decodes the body and always sends its own Accept-Encoding
        httpGet(`${server?.url}/engine.wasm`, { headers: { 'accept-encoding': encoding } }, (response) => {
          const chunks: Buffer[] = [];
          response.on('data', (chunk: Buffer) => chunks.push(chunk));
          response.on('end', () => resolve({ headers: response.headers, body: Buffer.concat(chunks) }));
        }).on('error', reject);
      });
    const br = await get('gzip, deflate, br');
    expect(br.headers).toMatchObject({ 'content-encoding': 'br', 'content-type': 'application/wasm' });
    expect(new Uint8Array(brotliDecompressSync(br.body))).toEqual(wasm);
    const gz = await get('gzip');
    expect(gz.headers['content-encoding']).toBe('gzip');
    expect(new Uint8Array(gunzipSync(gz.body))).toEqual(wasm);
    const plain = await get('identity');
    expect(plain.headers['content-encoding']).toBeUndefined();
    expect(new Uint8Array(plain.body)).toEqual(wasm);
  });

  it('sends the cross-origin isolation headers on every response: pages, scripts, workers, wasm, data, errors', async () => {
    // the values themselves, not just "whatever isolation.ts says": a wrong constant must fail here
    expect(CROSS_ORIGIN_ISOLATION_HEADERS).toEqual({
      'cross-origin-opener-policy': 'same-origin',
      'cross-origin-embedder-policy': 'require-corp',
      'cross-origin-resource-policy': 'same-origin',
    });
    const dir = fakeBuild();
    mkdirSync(join(dir, 'assets'));
    mkdirSync(join(dir, 'data'));
    writeFileSync(join(dir, 'assets', 'room.worker-abc.js'), 'onmessage = () => {}');
    const wasm = new Uint8Array(64 * 1024).fill(7);
    writeFileSync(join(dir, 'assets', 'ort-wasm-simd-threaded-abc.wasm'), wasm);
    writeFileSync(join(dir, 'assets', 'ort-wasm-simd-threaded-abc.wasm.br'), brotliCompressSync(wasm));
    writeFileSync(join(dir, 'data', 'moby-dick.txt'), 'Call me Ishmael.');
    server = await startServer({ port: 0, host: '127.0.0.1', staticDir: dir });
    const isolated = (response: Response, what: string) => {
      expect.soft(response.headers.get('cross-origin-opener-policy'), what).toBe('same-origin');
      expect.soft(response.headers.get('cross-origin-embedder-policy'), what).toBe('require-corp');
      expect.soft(response.headers.get('cross-origin-resource-policy'), what).toBe('same-origin');
    };
    for (const path of [
      '/',
      '/join/room-1?token=t',
      '/app.js',
      '/assets/room.worker-abc.js',
      '/assets/ort-wasm-simd-threaded-abc.wasm',
      '/data/moby-dick.txt',
      '/healthz',
    ]) {
      const response = await fetch(`${server.url}${path}`);
      expect(response.status, path).toBe(200);
      isolated(response, path);
    }
    // a revalidated page (304), HEAD, a refused method
    const etag = (await fetch(`${server.url}/app.js`)).headers.get('etag');
    expect(etag).toBeTruthy();
    const revalidated = await fetch(`${server.url}/app.js`, { headers: { 'if-none-match': etag ?? '' } });
    expect(revalidated.status).toBe(304);
    isolated(revalidated, '304');
    isolated(await fetch(`${server.url}/`, { method: 'HEAD' }), 'HEAD');
    const refused = await fetch(`${server.url}/`, { method: 'POST', body: 'x' });
    expect(refused.status).toBe(405);
    isolated(refused, '405');
  });

  it('sends the isolation headers on the page that says the app is not built', async () => {
    server = await startServer({ port: 0, host: '127.0.0.1', staticDir: join(tmpdir(), 'shoal-does-not-exist') });
    const response = await fetch(`${server.url}/`);
    expect(response.status).toBe(503);
    expect(response.headers.get('cross-origin-opener-policy')).toBe('same-origin');
    expect(response.headers.get('cross-origin-embedder-policy')).toBe('require-corp');
  });

  it('says how to build when the web app is missing, instead of a bare 404', async () => {
    server = await startServer({ port: 0, host: '127.0.0.1', staticDir: join(tmpdir(), 'shoal-does-not-exist') });
    const response = await fetch(`${server.url}/`);
    expect(response.status).toBe(503);
    expect(await response.text()).toContain('npm start');
  });

  it('refuses methods other than GET and HEAD', async () => {
    server = await startServer({ port: 0, host: '127.0.0.1', staticDir: fakeBuild() });
    expect((await fetch(`${server.url}/`, { method: 'POST', body: 'x' })).status).toBe(405);
  });

  it('reports a port that is already taken', async () => {
    server = await startServer({ port: 0, host: '127.0.0.1', staticDir: fakeBuild() });
    await expect(startServer({ port: server.port, host: '127.0.0.1' })).rejects.toMatchObject({ code: 'EADDRINUSE' });
  });
});
