/**
 * The Shoal server: serves the built web app (dist/web) and a health endpoint. WebSocket
 * signaling and rooms join it in a later step.
 */
import { existsSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import sirv from 'sirv';

export const DEFAULT_STATIC_DIR = fileURLToPath(new URL('../../../dist/web', import.meta.url));

export interface ServerOptions {
  port: number;
  host?: string;
  /** The built web app; default dist/web at the repository root. */
  staticDir?: string;
}

export interface RunningServer {
  url: string;
  port: number;
  close(): Promise<void>;
}

const NOT_BUILT = `<!doctype html><meta charset="utf-8"><title>Shoal</title>
<p>The web app has not been built yet. Run <code>npm start</code> (it builds on first run) or <code>npm run build</code>.</p>`;

export async function startServer(options: ServerOptions): Promise<RunningServer> {
  const staticDir = options.staticDir ?? DEFAULT_STATIC_DIR;
  const built = existsSync(`${staticDir}/index.html`);
  // `single`: client-side routes (/host, /room/…) get index.html. Hashed assets may be cached.
  const serveStatic = built ? sirv(staticDir, { single: true, etag: true, gzip: false }) : null;

  const handle = (request: IncomingMessage, response: ServerResponse) => {
    const path = (request.url ?? '/').split('?')[0];
    if (path === '/healthz') {
      response.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-store' });
      response.end(JSON.stringify({ ok: true, webBuilt: built }));
      return;
    }
    if (request.method !== 'GET' && request.method !== 'HEAD') {
      response.writeHead(405, { allow: 'GET, HEAD' }).end();
      return;
    }
    if (!serveStatic) {
      response.writeHead(503, { 'content-type': 'text/html; charset=utf-8' }).end(NOT_BUILT);
      return;
    }
    serveStatic(request, response, () => {
      response.writeHead(404).end('Not found');
    });
  };

  const server = createServer(handle);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host ?? '0.0.0.0', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://localhost:${port}`,
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
