// Shards kept in the browser's Cache Storage (the Cache API), keyed by SHA-256, within a budget.
// Bytes are hashed again on every read, as on disk (cache.node.ts): storage can be damaged, and a
// wrong byte would train the model on it. Least recently used is tracked in memory (the Cache
// API keeps no access times); shards found from an earlier visit count as the oldest.
// Not run by the Node tests: the Cache API exists only in browsers (and Deno).

import { Pins, type ShardCache } from './cache.ts';
import { sha256Hex } from './manifest.ts';

const PREFIX = 'https://shoal.invalid/shard/';

export class BrowserShardCache implements ShardCache {
  readonly budgetBytes: number;
  readonly name: string;
  readonly #pins = new Pins();
  /** sha256 → bytes; Map order is use order, least recent first. */
  readonly #entries = new Map<string, number>();
  #used = 0;
  #cache: Promise<Cache> | undefined;
  #queue: Promise<unknown> = Promise.resolve();

  constructor(budgetBytes: number, name = 'shoal-dataset-shards') {
    if (!(budgetBytes >= 0)) throw new RangeError(`cache budget must be ≥ 0 bytes, got ${budgetBytes}`);
    this.budgetBytes = budgetBytes;
    this.name = name;
  }

  usedBytes(): number {
    return this.#used;
  }

  #open(): Promise<Cache> {
    this.#cache ??= (async () => {
      if (typeof caches === 'undefined') {
        throw new Error('this browser has no Cache Storage (it needs a secure context: https or localhost)');
      }
      const cache = await caches.open(this.name);
      for (const request of await cache.keys()) {
        const key = request.url.slice(PREFIX.length);
        const response = await cache.match(request);
        const bytes = Number(response?.headers.get('content-length') ?? 0);
        this.#entries.set(key, bytes);
        this.#used += bytes;
      }
      return cache;
    })();
    return this.#cache;
  }

  async get(sha256: string): Promise<Uint8Array | null> {
    const cache = await this.#open();
    if (!this.#entries.has(sha256)) return null;
    const response = await cache.match(PREFIX + sha256);
    const bytes = response ? new Uint8Array(await response.arrayBuffer()) : null;
    if (!bytes || (await sha256Hex(bytes)) !== sha256) {
      await this.#delete(cache, sha256);
      return null;
    }
    const size = this.#entries.get(sha256) as number;
    this.#entries.delete(sha256);
    this.#entries.set(sha256, size);
    return bytes;
  }

  put(sha256: string, bytes: Uint8Array): Promise<boolean> {
    const done = this.#queue.then(async () => {
      const cache = await this.#open();
      if (this.#entries.has(sha256)) return true;
      const unpinned = [...this.#entries].filter(([key]) => !this.#pins.has(key));
      const evictable = unpinned.reduce((sum, [, size]) => sum + size, 0);
      if (this.#used - evictable + bytes.length > this.budgetBytes) return false;
      for (const [key] of unpinned) {
        if (this.#used + bytes.length <= this.budgetBytes) break;
        await this.#delete(cache, key);
      }
      const headers = { 'content-type': 'application/octet-stream', 'content-length': String(bytes.length) };
      await cache.put(PREFIX + sha256, new Response(bytes as Uint8Array<ArrayBuffer>, { headers }));
      this.#entries.set(sha256, bytes.length);
      this.#used += bytes.length;
      return true;
    });
    this.#queue = done.catch(() => {});
    return done;
  }

  async #delete(cache: Cache, sha256: string): Promise<void> {
    const size = this.#entries.get(sha256);
    if (size === undefined) return;
    this.#entries.delete(sha256);
    this.#used -= size;
    await cache.delete(PREFIX + sha256);
  }

  pin(sha256: string): void {
    this.#pins.pin(sha256);
  }

  unpin(sha256: string): void {
    this.#pins.unpin(sha256);
  }
}
