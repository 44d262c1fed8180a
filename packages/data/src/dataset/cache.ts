// Shards kept between uses, named by their SHA-256, within a byte budget the volunteer chose.
// A put that cannot fit after evicting every unpinned shard is refused rather than exceeding the
// budget: the caller still has the bytes, it just cannot keep them.

import type { LoadedManifest } from './manifest.ts';

export interface ShardCache {
  /** The most bytes this cache ever holds. */
  readonly budgetBytes: number;
  usedBytes(): number;
  /** The shard's bytes, or null when absent (or, for caches that check, corrupt). */
  get(sha256: string): Promise<Uint8Array | null>;
  /** Keeps the bytes if they fit after evicting least-recently-used unpinned shards; false if refused. */
  put(sha256: string, bytes: Uint8Array): Promise<boolean>;
  /** A pinned shard is never evicted; pins count, so pin twice and unpin twice. */
  pin(sha256: string): void;
  unpin(sha256: string): void;
}

export const MIB = 1024 * 1024;

function mib(bytes: number): string {
  const value = bytes / MIB;
  return Number.isInteger(value) ? `${value}` : value.toFixed(1);
}

/** The largest training shard's bytes. */
export function largestTrainShard(loaded: LoadedManifest): number {
  return loaded.train.reduce((max, shard) => Math.max(max, shard.bytes), 0);
}

/** A volunteer's shard budget when it names none: this many of the dataset's largest shard. */
export const DEFAULT_BUDGET_SHARDS = 4;

/** DEFAULT_BUDGET_SHARDS × the largest training shard: the current one, the next, and two kept. */
export function defaultShardBudget(loaded: LoadedManifest): number {
  return DEFAULT_BUDGET_SHARDS * largestTrainShard(loaded);
}

/** Throws unless a budget of `budgetBytes` holds the dataset's largest training shard. */
export function checkBudget(budgetBytes: number, loaded: LoadedManifest): void {
  const largest = largestTrainShard(loaded);
  if (!(budgetBytes >= largest)) {
    const need = Math.ceil(largest / MIB);
    throw new RangeError(
      `a cache budget of ${mib(budgetBytes)} MiB cannot hold one shard of this dataset ` +
        `(largest ${mib(largest)} MiB): give at least ${need} MiB`,
    );
  }
}

/** Reference-counted pins, shared by the caches. */
export class Pins {
  readonly #counts = new Map<string, number>();
  pin(key: string): void {
    this.#counts.set(key, (this.#counts.get(key) ?? 0) + 1);
  }
  unpin(key: string): void {
    const count = this.#counts.get(key) ?? 0;
    if (count <= 1) this.#counts.delete(key);
    else this.#counts.set(key, count - 1);
  }
  has(key: string): boolean {
    return this.#counts.has(key);
  }
}

/** In memory, least recently used first out (a Map keeps insertion order: re-insert on use). */
export class MemoryShardCache implements ShardCache {
  readonly budgetBytes: number;
  readonly #entries = new Map<string, Uint8Array>();
  readonly #pins = new Pins();
  #used = 0;

  constructor(budgetBytes: number) {
    if (!(budgetBytes >= 0)) throw new RangeError(`cache budget must be ≥ 0 bytes, got ${budgetBytes}`);
    this.budgetBytes = budgetBytes;
  }

  usedBytes(): number {
    return this.#used;
  }

  async get(sha256: string): Promise<Uint8Array | null> {
    const bytes = this.#entries.get(sha256);
    if (!bytes) return null;
    this.#entries.delete(sha256);
    this.#entries.set(sha256, bytes);
    return bytes;
  }

  async put(sha256: string, bytes: Uint8Array): Promise<boolean> {
    if (this.#entries.has(sha256)) {
      await this.get(sha256);
      return true;
    }
    if (bytes.length > this.budgetBytes) return false;
    // Evict only once it is known that eviction makes room.
    let evictable = 0;
    for (const [key, held] of this.#entries) if (!this.#pins.has(key)) evictable += held.length;
    if (this.#used - evictable + bytes.length > this.budgetBytes) return false;
    for (const [key, held] of this.#entries) {
      if (this.#used + bytes.length <= this.budgetBytes) break;
      if (this.#pins.has(key)) continue;
      this.#entries.delete(key);
      this.#used -= held.length;
    }
    this.#entries.set(sha256, bytes);
    this.#used += bytes.length;
    return true;
  }

  pin(sha256: string): void {
    this.#pins.pin(sha256);
  }

  unpin(sha256: string): void {
    this.#pins.unpin(sha256);
  }
}
