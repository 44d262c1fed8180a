import { mkdtempSync, writeFileSync } from 'node:fs';
import { get as httpGet } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { brotliCompressSync, brotliDecompressSync, gunzipSync, gzipSync } from 'node:zlib';
import { afterEach, describe, expect, it } from 'vitest';
import { type RunningServer, startServer } from './index.ts';

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
