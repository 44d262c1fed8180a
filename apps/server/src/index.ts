/**
 * The Shoal server: serves the built web app (dist/web), a health endpoint, and WebSocket
 * signaling with rooms at /signal (signaling.ts) on the same port.
 */
import { existsSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type IceServer, SIGNAL_PATH } from '@shoal/signaling';
import sirv from 'sirv';
import { datasetHandler } from './datasets.ts';
import { CROSS_ORIGIN_ISOLATION_HEADERS } from './isolation.ts';
import { FileRoomStore, fileStoreBounds, MemoryRoomStore, type RoomStore } from './room-store.ts';
import { resolveIceServers, resolveSignalingLimits, type SignalingLimits, type SignalLogger } from './signal-config.ts';
import { attachSignaling, type SignalingStats } from './signaling.ts';

// the types of startServer's options and result, and what `shoal server` (apps/cli) reads its flags with
export type { IceServer } from '@shoal/signaling';
export { DATASETS_PATH, type DatasetListing, listDatasets } from './datasets.ts';
export { CROSS_ORIGIN_ISOLATION_HEADERS } from './isolation.ts';
export { FileRoomStore, MemoryRoomStore, type RoomStore } from './room-store.ts';
export {
  DEFAULT_SIGNALING_LIMITS,
  resolveIceServers,
  type SignalingLimits,
  type SignalLogger,
} from './signal-config.ts';
export type { SignalingStats } from './signaling.ts';

/**
 * Where `shoal server` keeps its rooms: `persist` false or an empty directory, nowhere (memory
 * only); else `roomsDir`, else SHOAL_ROOMS_DIR, else $XDG_STATE_HOME/shoal/rooms, else
 * ~/.local/state/shoal/rooms (state that should outlive a restart, but is no document of the user's).
 */
export function resolveRoomsDir(
  options: { roomsDir?: string; persist?: boolean },
  env: NodeJS.ProcessEnv = process.env,
): string | null {
  if (options.persist === false) return null;
  const dir = options.roomsDir ?? env.SHOAL_ROOMS_DIR;
  if (dir !== undefined) return dir.trim() === '' ? null : dir;
  const stateHome = env.XDG_STATE_HOME?.trim() || join(homedir(), '.local', 'state');
  return join(stateHome, 'shoal', 'rooms');
}

const DEFAULT_STATIC_DIR = fileURLToPath(new URL('../../../dist/web', import.meta.url));

export interface ServerOptions {
  port: number;
  host?: string;
  /** The built web app; default dist/web at the repository root. */
  staticDir?: string;
  /** Signaling limits; each one left out takes its default (DEFAULT_SIGNALING_LIMITS). */
  limits?: Partial<SignalingLimits>;
  /** STUN/TURN servers handed to clients; default: SHOAL_ICE_SERVERS (JSON), else none. */
  iceServers?: IceServer[];
  /** One JSON line per event; default stdout, silent under Vitest. */
  logger?: SignalLogger | null;
  /**
   * The directory where rooms are kept, so a restarted server takes them back (room-store.ts);
   * null or left out: memory only (`shoal server` passes resolveRoomsDir()). Ignored when
   * `roomStore` is given.
   */
  roomsDir?: string | null;
  /** Another RoomStore (docs/deployment.md); default from roomsDir. */
  roomStore?: RoomStore;
  /** How often at most a room's kept view is written to the store, ms. Default 5 s. */
  viewSaveIntervalMs?: number;
  /** The clock for rate limits and timeouts (ms). */
  now?: () => number;
  /** Serve the packed datasets in this folder at /datasets/ (datasets.ts). */
  datasetsDir?: string;
  /**
   * Behind a reverse proxy: per-address limits count the address the proxy appended to
   * X-Forwarded-For, not the proxy's. Default false (the header is the client's to forge).
   */
  trustProxy?: boolean;
}

export interface RunningServer {
  url: string;
  /** ws://…/signal */
  signalUrl: string;
  port: number;
  signalingStats(): SignalingStats;
  /** Where its rooms are kept; null: in memory only. */
  roomsDir: string | null;
  close(): Promise<void>;
}

const NOT_BUILT = `<!doctype html><meta charset="utf-8"><title>Shoal</title>
<p>The web app has not been built yet. Run <code>npm start</code> (it builds on first run) or <code>npm run build</code>.</p>`;

export async function startServer(options: ServerOptions): Promise<RunningServer> {
  const staticDir = options.staticDir ?? DEFAULT_STATIC_DIR;
  const built = existsSync(`${staticDir}/index.html`);
  // `single`: client-side routes (/host, /room/…) get index.html. Hashed assets may be cached.
  // The build writes .br and .gz beside large assets; a browser that accepts them gets those.
  const serveStatic = built ? sirv(staticDir, { single: true, etag: true, gzip: true, brotli: true }) : null;
  const serveDatasets = options.datasetsDir ? datasetHandler(options.datasetsDir) : null;

  const handle = (request: IncomingMessage, response: ServerResponse) => {
    // On every response, not just the HTML: a worker's script without COEP does not start under
    // an isolated page, and the 404 or 503 page is a document too (isolation.ts).
    for (const [name, value] of Object.entries(CROSS_ORIGIN_ISOLATION_HEADERS)) response.setHeader(name, value);
    const path = (request.url ?? '/').split('?')[0];
    if (path === '/healthz') {
      response.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-store' });
      response.end(JSON.stringify({ ok: true, webBuilt: built }));
      return;
    }
    if (serveDatasets?.(request, response)) return;
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

  const limits = resolveSignalingLimits(options.limits);
  const iceServers = resolveIceServers(options.iceServers, process.env.SHOAL_ICE_SERVERS);
  const defaultLogger = process.env.VITEST ? undefined : (line: string) => process.stdout.write(`${line}\n`);
  const logger = options.logger === null ? undefined : (options.logger ?? defaultLogger);

  const store = options.roomStore ?? roomStoreFor(options.roomsDir, limits);
  const loaded = await store.loadAll();
  const server = createServer(handle);
  const signaling = attachSignaling(server, {
    limits,
    iceServers,
    logger,
    store,
    loaded,
    viewSaveIntervalMs: options.viewSaveIntervalMs,
    now: options.now,
    trustProxy: options.trustProxy,
  });
  await new Promise<void>((resolve, reject) => {
    const failed = (error: Error) => {
      void signaling.close();
      reject(error);
    };
    server.once('error', failed);
    server.listen(options.port, options.host ?? '0.0.0.0', () => {
      server.off('error', failed);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://localhost:${port}`,
    signalUrl: `ws://localhost:${port}${SIGNAL_PATH}`,
    port,
    signalingStats: () => signaling.stats(),
    roomsDir: store instanceof FileRoomStore ? store.dir : null,
    close: async () => {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      const flushed = signaling.close();
      server.closeAllConnections();
      await Promise.all([closed, flushed]);
    },
  };
}

/** The store `roomsDir` names: a directory, or memory (null, '', left out). */
function roomStoreFor(roomsDir: string | null | undefined, limits: SignalingLimits): RoomStore {
  return roomsDir ? new FileRoomStore(roomsDir, fileStoreBounds(limits)) : new MemoryRoomStore();
}
