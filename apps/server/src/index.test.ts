import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
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
