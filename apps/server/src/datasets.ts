/**
 * Packed datasets over HTTP (`shoal server --datasets DIR`): DIR/NAME/manifest.json and its shards
 * at /datasets/NAME/…, with range requests and ETags (sirv), readable from any origin (CORS and
 * Cross-Origin-Resource-Policy: a room on another site fetches them the same), and a JSON index
 * of DIR's datasets at /datasets/. A volunteer checks every shard against the manifest's SHA-256,
 * so the server is trusted for nothing but availability.
 */

import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { join } from 'node:path';
import sirv from 'sirv';

export const DATASETS_PATH = '/datasets/';

/** The manifest is revalidated on every use (a repack replaces it); shards are kept a day. */
const MANIFEST_CACHE = 'no-cache';
const SHARD_CACHE = 'public, max-age=86400';

export interface DatasetListing {
  name: string;
  /** Where the dataset is: /datasets/NAME/ (relative to the server). */
  url: string;
  /** SHA-256 of manifest.json, what a room's config names. */
  manifest: string;
  bytes: number;
  shards: number;
}

/** The datasets under `dir`: every subfolder with a readable manifest.json. */
export function listDatasets(dir: string): DatasetListing[] {
  const listings: DatasetListing[] = [];
  for (const name of readdirSync(dir).sort()) {
    if (name.startsWith('.')) continue;
    const path = join(dir, name, 'manifest.json');
    try {
      if (!statSync(join(dir, name)).isDirectory()) continue;
      const bytes = readFileSync(path);
      const manifest = JSON.parse(bytes.toString('utf8')) as { bytes?: unknown; shards?: unknown };
      listings.push({
        name,
        url: `${DATASETS_PATH}${encodeURIComponent(name)}/`,
        manifest: createHash('sha256').update(bytes).digest('hex'),
        bytes: typeof manifest.bytes === 'number' ? manifest.bytes : 0,
        shards: Array.isArray(manifest.shards) ? manifest.shards.length : 0,
      });
    } catch {
      // not a dataset (no manifest, or an unfinished pack): left out of the index
    }
  }
  return listings;
}

/**
 * A handler for requests under /datasets/ (index.ts routes them here); false for other paths.
 * Files are looked up per request (`dev`), so a dataset packed while the server runs is served.
 */
export function datasetHandler(dir: string): (request: IncomingMessage, response: ServerResponse) => boolean {
  const serve = sirv(dir, {
    dev: true,
    etag: true,
    dotfiles: false,
    setHeaders: (response, pathname) => {
      response.setHeader('cache-control', pathname.endsWith('/manifest.json') ? MANIFEST_CACHE : SHARD_CACHE);
    },
  });
  return (request, response) => {
    const url = request.url ?? '/';
    const path = url.split('?')[0] ?? '/';
    if (!path.startsWith(DATASETS_PATH)) return false;
    response.setHeader('access-control-allow-origin', '*');
    response.setHeader('access-control-expose-headers', 'content-length, content-range, etag');
    response.setHeader('cross-origin-resource-policy', 'cross-origin');
    if (request.method === 'OPTIONS') {
      response.writeHead(204, {
        'access-control-allow-methods': 'GET, HEAD',
        'access-control-allow-headers': 'range, if-none-match',
        'access-control-max-age': '86400',
      });
      response.end();
      return true;
    }
    if (request.method !== 'GET' && request.method !== 'HEAD') {
      response.writeHead(405, { allow: 'GET, HEAD, OPTIONS' }).end();
      return true;
    }
    if (path === DATASETS_PATH) {
      response.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-cache' });
      response.end(JSON.stringify({ datasets: listDatasets(dir) }));
      return true;
    }
    // sirv reads the path from request.url: serve DIR's files at /datasets/…
    request.url = url.slice(DATASETS_PATH.length - 1);
    serve(request, response, () => {
      request.url = url;
      response.writeHead(404, { 'content-type': 'text/plain' }).end(`no such dataset file: ${path}`);
    });
    return true;
  };
}
