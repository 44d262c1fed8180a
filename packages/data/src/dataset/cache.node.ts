// Shards on disk: <dir>/<sha256>, least recently used (by mtime) evicted first, the budget
// respected on disk. Bytes are hashed again on every read, so a file damaged on disk is deleted
// and fetched anew instead of being trained on.

import { mkdir, readdir, readFile, rename, stat, unlink, utimes, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Pins, type ShardCache } from './cache.ts';
import { sha256Hex } from './manifest.ts';

const SHA256_NAME = /^[0-9a-f]{64}$/;

interface DiskEntry {
  bytes: number;
  /** Last use, ms since the epoch (the file's mtime). */
  usedAt: number;
}

export class DirShardCache implements ShardCache {
  readonly dir: string;
  readonly budgetBytes: number;
  readonly #pins = new Pins();
  readonly #entries = new Map<string, DiskEntry>();
  #used = 0;
  #ready: Promise<void> | undefined;
  /** Serialises puts so two evictions never race over the same files. */
  #queue: Promise<unknown> = Promise.resolve();

  constructor(dir: string, budgetBytes: number) {
    if (!(budgetBytes >= 0)) throw new RangeError(`cache budget must be ≥ 0 bytes, got ${budgetBytes}`);
    this.dir = dir;
    this.budgetBytes = budgetBytes;
  }

  /** Bytes on disk as last scanned or written (exact once any get or put has run). */
  usedBytes(): number {
    return this.#used;
  }

  /** Scans the folder once: what an earlier run left is reused, and evicted first if over budget. */
  ready(): Promise<void> {
    this.#ready ??= (async () => {
      await mkdir(this.dir, { recursive: true });
      for (const name of await readdir(this.dir)) {
        if (!SHA256_NAME.test(name)) continue;
        const info = await stat(join(this.dir, name));
        this.#entries.set(name, { bytes: info.size, usedAt: info.mtimeMs });
        this.#used += info.size;
      }
      await this.#evictFor(0);
    })();
    return this.#ready;
  }

  async get(sha256: string): Promise<Uint8Array | null> {
    await this.ready();
    const entry = this.#entries.get(sha256);
    if (!entry) return null;
    const path = join(this.dir, sha256);
    let buffer: Buffer;
    try {
      buffer = await readFile(path);
    } catch {
      this.#forget(sha256);
      return null;
    }
    const bytes = new Uint8Array(buffer.buffer, buffer.byteOffset, buffer.byteLength);
    if ((await sha256Hex(bytes)) !== sha256) {
      this.#forget(sha256);
      await unlink(path).catch(() => {});
      return null;
    }
    const now = new Date();
    entry.usedAt = now.getTime();
    await utimes(path, now, now).catch(() => {});
    return bytes;
  }

  put(sha256: string, bytes: Uint8Array): Promise<boolean> {
    const done = this.#queue.then(() => this.#put(sha256, bytes));
    this.#queue = done.catch(() => {});
    return done;
  }

  async #put(sha256: string, bytes: Uint8Array): Promise<boolean> {
    if (!SHA256_NAME.test(sha256)) throw new Error(`cache key ${sha256} is not a SHA-256`);
    await this.ready();
    const entry = this.#entries.get(sha256);
    if (entry) {
      entry.usedAt = Date.now();
      return true;
    }
    if (!(await this.#evictFor(bytes.length))) return false;
    const path = join(this.dir, sha256);
    // Written beside and renamed, so a crash never leaves a half file under a shard's name.
    const partial = `${path}.partial`;
    await writeFile(partial, bytes);
    await rename(partial, path);
    this.#entries.set(sha256, { bytes: bytes.length, usedAt: Date.now() });
    this.#used += bytes.length;
    return true;
  }

  /** Evicts least recently used unpinned files until `incoming` more bytes fit; false if they cannot. */
  async #evictFor(incoming: number): Promise<boolean> {
    const unpinned = [...this.#entries].filter(([key]) => !this.#pins.has(key));
    const evictable = unpinned.reduce((sum, [, entry]) => sum + entry.bytes, 0);
    if (this.#used - evictable + incoming > this.budgetBytes) return false;
    unpinned.sort((a, b) => a[1].usedAt - b[1].usedAt);
    for (const [key] of unpinned) {
      if (this.#used + incoming <= this.budgetBytes) break;
      this.#forget(key);
      await unlink(join(this.dir, key)).catch(() => {});
    }
    return true;
  }

  #forget(sha256: string): void {
    const entry = this.#entries.get(sha256);
    if (!entry) return;
    this.#entries.delete(sha256);
    this.#used -= entry.bytes;
  }

  pin(sha256: string): void {
    this.#pins.pin(sha256);
  }

  unpin(sha256: string): void {
    this.#pins.unpin(sha256);
  }
}
