import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { datasetSource, dirDatasetSource } from './source.node.ts';
import { DatasetFetchError, urlDatasetSource } from './source.ts';
import { fixtureFiles, writeFixture } from './test-fixture.node.ts';

let server: Server;
let base: string;
let files: Map<string, Uint8Array>;

beforeAll(async () => {
  files = await fixtureFiles({ train: [4096, 4096], validation: [2048] });
  server = createServer((request, response) => {
    const path = request.url ?? '/';
    if (path.startsWith('/slow/')) return; // never answers: the client's timeout must fire
    if (path.startsWith('/spa/')) {
      response.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
      response.end('<!doctype html><title>app</title>');
      return;
    }
    const bytes = files.get(path.replace(/^\/data\//, ''));
    if (!path.startsWith('/data/') || !bytes) {
      response.writeHead(404, 'Not Found');
      response.end();
      return;
    }
    response.writeHead(200, { 'content-type': 'text/plain; charset=utf-8' });
    response.end(bytes);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

async function failure(promise: Promise<unknown>): Promise<DatasetFetchError> {
  const error = await promise.then(
    () => null,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(DatasetFetchError);
  return error as DatasetFetchError;
}

describe('urlDatasetSource', () => {
  it('reads files under the base URL, with or without a trailing slash', async () => {
    for (const url of [`${base}/data`, `${base}/data/`]) {
      expect(await urlDatasetSource(url).read('train-00001.txt')).toEqual(files.get('train-00001.txt'));
    }
  });

  it('reports a missing file as HTTP 404, naming the URL', async () => {
    const error = await failure(urlDatasetSource(`${base}/data`).read('train-00009.txt'));
    expect(error.kind).toBe('status');
    expect(error.file).toBe('train-00009.txt');
    expect(error.message).toBe(`dataset URL ${base}/data/train-00009.txt answered HTTP 404 Not Found`);
  });

  it('gives up on a server that does not answer', async () => {
    const error = await failure(urlDatasetSource(`${base}/slow`, { timeoutMs: 200 }).read('manifest.json'));
    expect(error.kind).toBe('timeout');
    expect(error.message).toBe(`dataset URL ${base}/slow/manifest.json did not answer within 0.2 s`);
  });

  it('refuses an HTML page (a dev server answering index.html)', async () => {
    const error = await failure(urlDatasetSource(`${base}/spa`).read('manifest.json'));
    expect(error.kind).toBe('html');
    expect(error.message).toMatch(/HTML page/);
  });

  it('reports a server that cannot be reached', async () => {
    const error = await failure(urlDatasetSource('http://127.0.0.1:9/data').read('manifest.json'));
    expect(error.kind).toBe('network');
    expect(error.message).toMatch(/could not be reached/);
  });
});

describe('dirDatasetSource and datasetSource', () => {
  it('reads a folder and names the path of a missing file', async () => {
    const fixture = await writeFixture(files);
    try {
      const source = datasetSource(fixture.dir);
      expect(source.where).toBe(fixture.dir);
      expect(await source.read('validation-00000.txt')).toEqual(files.get('validation-00000.txt'));
      const error = await failure(dirDatasetSource(fixture.dir).read('train-00042.txt'));
      expect(error.kind).toBe('status');
      expect(error.message).toContain(`${fixture.dir}/train-00042.txt`);
    } finally {
      await fixture.remove();
    }
  });

  it('takes http(s) specs as URLs', () => {
    expect(datasetSource('https://example.org/data').where).toBe('https://example.org/data');
    expect(datasetSource('HTTP://example.org/d').where).toBe('HTTP://example.org/d');
  });
});
