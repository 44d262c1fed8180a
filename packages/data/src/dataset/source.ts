// Where a packed dataset's bytes come from: a folder (source.node.ts) or a URL (here, shared by
// Node and the browser). A source only reads files; hashing and fallbacks live in dataset.ts.

/** Reads `manifest.json` or a shard file of one dataset copy. */
export interface DatasetSource {
  /** For messages: the folder or base URL. */
  where: string;
  read(file: string): Promise<Uint8Array>;
}

export type DatasetFetchErrorKind = 'status' | 'timeout' | 'network' | 'html';

/** A file of a dataset that could not be read: missing, slow, unreachable, or a web page instead. */
export class DatasetFetchError extends Error {
  override name = 'DatasetFetchError';
  constructor(
    message: string,
    readonly file: string,
    readonly kind: DatasetFetchErrorKind,
  ) {
    super(message);
  }
}

export interface UrlSourceOptions {
  /** Longest wait for a whole file (headers and body), ms. */
  timeoutMs?: number;
  fetch?: typeof globalThis.fetch;
}

/** `base` with exactly one slash before `file`. */
export function joinUrl(base: string, file: string): string {
  return base.endsWith('/') ? `${base}${file}` : `${base}/${file}`;
}

/** A dataset served over HTTP(S) under `baseUrl` (base/manifest.json, base/train-00000.txt, …). */
export function urlDatasetSource(
  baseUrl: string,
  { timeoutMs = 30_000, fetch = globalThis.fetch }: UrlSourceOptions = {},
): DatasetSource {
  return {
    where: baseUrl,
    async read(file: string): Promise<Uint8Array> {
      const url = joinUrl(baseUrl, file);
      const controller = new AbortController();
      let timedOut = false;
      const timer = setTimeout(() => {
        timedOut = true;
        controller.abort();
      }, timeoutMs);
      try {
        const response = await fetch(url, { signal: controller.signal });
        if (!response.ok) {
          throw new DatasetFetchError(
            `dataset URL ${url} answered HTTP ${response.status} ${response.statusText}`.trimEnd(),
            file,
            'status',
          );
        }
        // A dev server answers unknown paths with its index.html and status 200.
        const type = response.headers.get('content-type') ?? '';
        if (type.includes('text/html')) {
          await response.body?.cancel();
          throw new DatasetFetchError(
            `dataset URL ${url} answered with an HTML page (${type}), not a dataset file: is the URL the dataset's folder?`,
            file,
            'html',
          );
        }
        return new Uint8Array(await response.arrayBuffer());
      } catch (error) {
        if (error instanceof DatasetFetchError) throw error;
        if (timedOut) {
          throw new DatasetFetchError(
            `dataset URL ${url} did not answer within ${formatSeconds(timeoutMs)}`,
            file,
            'timeout',
          );
        }
        throw new DatasetFetchError(
          `dataset URL ${url} could not be reached: ${(error as Error).message}`,
          file,
          'network',
        );
      } finally {
        clearTimeout(timer);
      }
    },
  };
}

function formatSeconds(ms: number): string {
  return ms % 1000 === 0 ? `${ms / 1000} s` : `${(ms / 1000).toFixed(1)} s`;
}
