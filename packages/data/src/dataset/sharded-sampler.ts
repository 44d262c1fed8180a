// Batches from a sharded dataset. Batch `index` of shard `shard` in epoch `epoch` is a pure
// function of (seed, epoch, shard, index) and the shard's bytes — never of who draws it — so a
// shard can move from one volunteer to another mid-epoch and the room still draws each batch once.
// A ShardWalker walks one member's shards (assign.ts), prefetching the next shard while batches
// are drawn from the current one, within a memory budget of at most two shards.

import { assertInteger, hashWords, uniformIndex, wordsOf } from '../hash.ts';
import { type Batch, type BatchShape, fillBatch } from '../sampler.ts';
import { assignShards } from './assign.ts';
import { checkBudget } from './cache.ts';
import type { Dataset } from './dataset.ts';

const SHARD_STREAM_DOMAIN = 0x5348_5244; // 'SHRD'

/** Batches one shard yields per epoch: one window per seqLen bytes on average, at least one. */
export function batchesInShard(bytes: number, { batchSize, seqLen }: BatchShape): number {
  return Math.max(1, Math.floor(bytes / (batchSize * seqLen)));
}

export interface ShardBatchKey extends BatchShape {
  seed: number;
  epoch: number;
  /** Index into the dataset's training shards. */
  shard: number;
  /** Batch number within this shard and epoch. */
  index: number;
}

/** Window offsets of one batch: uniform over 0 … bytes − seqLen − 1, keyed by (seed, epoch, shard, index, row). */
export function shardBatchOffsets(shardLength: number, key: ShardBatchKey): number[] {
  const { batchSize, seqLen, seed, epoch, shard, index } = key;
  assertInteger('batchSize', batchSize, 1);
  assertInteger('seqLen', seqLen, 1);
  assertInteger('seed', seed, 0);
  assertInteger('epoch', epoch, 0);
  assertInteger('shard', shard, 0);
  assertInteger('batch index', index, 0);
  if (shardLength < seqLen + 1) {
    throw new RangeError(
      `shard ${shard} has ${shardLength} bytes, fewer than one window of seqLen + 1 = ${seqLen + 1}: ` +
        'pack the dataset with larger shards or train with a shorter seqLen',
    );
  }
  const stream = hashWords([SHARD_STREAM_DOMAIN, ...wordsOf(seed), ...wordsOf(epoch), ...wordsOf(shard)]);
  const [low, high] = wordsOf(index);
  const offsets: number[] = [];
  for (let row = 0; row < batchSize; row++) offsets.push(uniformIndex([stream, low, high, row], shardLength - seqLen));
  return offsets;
}

/** Batch `index` of a shard: rows are windows of seqLen + 1 bytes; targets are inputs shifted by one. */
export function shardBatch(shardBytes: Uint8Array, key: ShardBatchKey): Batch {
  return fillBatch(shardBytes, shardBatchOffsets(shardBytes.length, key), key.seqLen);
}

/** Batches drawn this epoch per training shard, by anyone this walker has heard of. */
export type DrawnCounts = Record<string, number>;

/** What a checkpoint stores to resume a walker (JSON-serialisable). */
export interface WalkerState {
  epoch: number;
  /** The shard being drawn from, or null between shards. */
  shard: number | null;
  /** Batches drawn from `shard` this epoch. */
  batch: number;
  drawn: DrawnCounts;
}

export interface ShardWalkerOptions extends BatchShape {
  seed: number;
  /** This member's id, one of `members`. */
  member: string;
  members: readonly string[];
  epoch?: number;
  /** Batches already drawn this epoch, per shard (a Map or a record). */
  drawn?: ReadonlyMap<number, number> | DrawnCounts;
  /** Resume exactly from a checkpoint's `state()` (overrides epoch and drawn). */
  state?: WalkerState;
  /** Most shard bytes the walker holds at once (current + prefetched); at least the largest shard. */
  budgetBytes?: number;
}

export interface WalkerStats {
  /** Total time next() waited for a shard to arrive, ms. */
  waitsMs: number;
  worstWaitMs: number;
  /** Shards fetched ahead of need. */
  prefetched: number;
  /** Most shard bytes held at once. */
  maxHeldBytes: number;
  batches: number;
}

interface Loading {
  epoch: number;
  shard: number;
  sha256: string;
  bytes: number;
  promise: Promise<Uint8Array>;
  /** The fetch has finished (either way): drawing from it does not wait. */
  settled: boolean;
  failed: boolean;
}

// A member with no shard in this many epochs in a row has a room far larger than the dataset.
const MAX_EMPTY_EPOCHS = 64;

export class ShardWalker {
  readonly stats: WalkerStats = { waitsMs: 0, worstWaitMs: 0, prefetched: 0, maxHeldBytes: 0, batches: 0 };
  readonly #dataset: Dataset;
  readonly #shape: BatchShape;
  readonly #seed: number;
  readonly #member: string;
  readonly #budget: number;
  #members: string[];
  #epoch: number;
  #drawn = new Map<number, number>();
  /** This member's shards this epoch, in epoch order. */
  #mine: number[] = [];
  #mineSet = new Set<number>();
  /** #mine[0 … cursor) are used up: drawn counts only grow within an epoch, so this only moves on. */
  #cursor = 0;
  /** Assignments computed for (members, epoch), so looking one epoch ahead costs one assignment. */
  #assignments = new Map<number, number[]>();
  #current: Loading | null = null;
  #next: Loading | null = null;

  constructor(dataset: Dataset, options: ShardWalkerOptions) {
    const { batchSize, seqLen, seed, member, members } = options;
    const budgetBytes = options.budgetBytes ?? dataset.cache?.budgetBytes ?? Number.POSITIVE_INFINITY;
    assertInteger('batchSize', batchSize, 1);
    assertInteger('seqLen', seqLen, 1);
    assertInteger('seed', seed, 0);
    checkBudget(budgetBytes, dataset.loaded);
    this.#dataset = dataset;
    this.#shape = { batchSize, seqLen };
    this.#seed = seed;
    this.#member = member;
    this.#budget = budgetBytes;
    this.#members = [...members];
    this.#checkMember();
    const state = options.state;
    this.#epoch = state?.epoch ?? options.epoch ?? 0;
    assertInteger('epoch', this.#epoch, 0);
    this.#mergeDrawn(state?.drawn ?? options.drawn);
    this.#setMine();
    if (state && state.shard !== null) {
      this.#drawn.set(state.shard, Math.max(this.#drawn.get(state.shard) ?? 0, state.batch));
      if (this.#mineSet.has(state.shard) && this.#remaining(state.shard) > 0) {
        this.#current = this.#load(this.#epoch, state.shard);
        this.#noteHeld();
      }
    }
  }

  get epoch(): number {
    return this.#epoch;
  }

  /** Shard bytes held now: the current shard and the one being prefetched. */
  get heldBytes(): number {
    return (this.#current?.bytes ?? 0) + (this.#next?.bytes ?? 0);
  }

  /** The next batch; moves to the next shard, and to the next epoch, as shards are used up. */
  async next(): Promise<Batch> {
    if (!this.#current || this.#remaining(this.#current.shard) <= 0 || !this.#mineSet.has(this.#current.shard)) {
      this.#advance();
    }
    const current = this.#current as Loading;
    this.#prefetch();
    const started = performance.now();
    const waiting = !current.settled;
    let bytes: Uint8Array;
    try {
      bytes = await current.promise;
    } catch (error) {
      // Asked for again at the next call: the shard stays this member's, the fetch is retried.
      if (this.#current === current) this.#current = this.#release(current);
      throw error;
    }
    if (waiting) {
      const waited = performance.now() - started;
      this.stats.waitsMs += waited;
      this.stats.worstWaitMs = Math.max(this.stats.worstWaitMs, waited);
    }
    const index = this.#drawn.get(current.shard) ?? 0;
    const batch = shardBatch(bytes, {
      ...this.#shape,
      seed: this.#seed,
      epoch: current.epoch,
      shard: current.shard,
      index,
    });
    this.#drawn.set(current.shard, index + 1);
    this.stats.batches++;
    return batch;
  }

  /**
   * A new room membership, with what others have drawn in this walker's epoch (their
   * `state().drawn`, as the room relays it; merged, the larger count wins, so a shard that moves
   * here resumes at the batch its last holder reached). The current shard is finished first if it is still this member's; otherwise the walker
   * moves on at the next call to next(). Its later shards follow the new assignment.
   */
  setMembers(members: readonly string[], drawn?: ReadonlyMap<number, number> | DrawnCounts): void {
    this.#members = [...members];
    this.#assignments.clear();
    this.#checkMember();
    this.#mergeDrawn(drawn);
    this.#setMine();
    if (this.#current && !this.#mineSet.has(this.#current.shard)) this.#current = this.#release(this.#current);
    // A prefetched shard that is not what comes next any more (moved away) is let go.
    const key = this.#upcomingKey();
    if (this.#next && !(key && key.epoch === this.#next.epoch && key.shard === this.#next.shard)) {
      this.#next = this.#release(this.#next);
    }
  }

  state(): WalkerState {
    const shard = this.#current?.shard ?? null;
    return {
      epoch: this.#epoch,
      shard,
      batch: shard === null ? 0 : (this.#drawn.get(shard) ?? 0),
      drawn: Object.fromEntries([...this.#drawn].sort((a, b) => a[0] - b[0]).map(([s, n]) => [String(s), n])),
    };
  }

  #checkMember(): void {
    if (!this.#members.includes(this.#member)) {
      throw new Error(`member ${this.#member} is not among the room's members (${this.#members.join(', ')})`);
    }
  }

  #mergeDrawn(drawn: ReadonlyMap<number, number> | DrawnCounts | undefined): void {
    if (!drawn) return;
    const entries = drawn instanceof Map ? [...drawn] : Object.entries(drawn).map(([s, n]) => [Number(s), n] as const);
    for (const [shard, count] of entries) {
      assertInteger('drawn shard', shard, 0);
      assertInteger('drawn count', count, 0);
      this.#drawn.set(shard, Math.max(this.#drawn.get(shard) ?? 0, count));
    }
  }

  #assigned(epoch: number): number[] {
    let mine = this.#assignments.get(epoch);
    if (!mine) {
      const shardCount = this.#dataset.loaded.train.length;
      mine = assignShards(shardCount, this.#members, { seed: this.#seed, epoch }).get(this.#member) ?? [];
      for (const old of this.#assignments.keys()) if (old < epoch - 1) this.#assignments.delete(old);
      this.#assignments.set(epoch, mine);
    }
    return mine;
  }

  #setMine(): void {
    this.#mine = this.#assigned(this.#epoch);
    this.#mineSet = new Set(this.#mine);
    this.#cursor = 0;
  }

  #total(shard: number): number {
    return batchesInShard(this.#dataset.loaded.train[shard]?.bytes ?? 0, this.#shape);
  }

  /** Batches of `shard` not yet drawn this epoch. */
  #remaining(shard: number): number {
    return this.#total(shard) - (this.#drawn.get(shard) ?? 0);
  }

  /** The (epoch, shard) to draw from after the current one, without moving there. */
  #upcomingKey(): { epoch: number; shard: number } | null {
    const current = this.#current?.shard;
    while (this.#cursor < this.#mine.length && this.#remaining(this.#mine[this.#cursor] as number) <= 0) this.#cursor++;
    let here: number | undefined;
    for (let i = this.#cursor; i < this.#mine.length && here === undefined; i++) {
      const shard = this.#mine[i] as number;
      if (shard !== current && this.#remaining(shard) > 0) here = shard;
    }
    if (here !== undefined) return { epoch: this.#epoch, shard: here };
    for (let epoch = this.#epoch + 1; epoch <= this.#epoch + MAX_EMPTY_EPOCHS; epoch++) {
      const first = this.#assigned(epoch)[0];
      if (first !== undefined) return { epoch, shard: first };
    }
    return null;
  }

  /** Makes the next shard current (a fresh epoch, with a fresh assignment, when this one is done). */
  #advance(): void {
    const key = this.#upcomingKey();
    if (!key) {
      throw new Error(
        `member ${this.#member} was assigned no shard in ${MAX_EMPTY_EPOCHS} epochs: ` +
          `the room has ${this.#members.length} members for ${this.#dataset.loaded.train.length} training shards`,
      );
    }
    if (key.epoch !== this.#epoch) {
      this.#epoch = key.epoch;
      this.#drawn = new Map();
      this.#setMine();
    }
    const prefetched = this.#next;
    this.#next = null;
    if (this.#current) this.#release(this.#current);
    if (prefetched && !prefetched.failed && prefetched.epoch === key.epoch && prefetched.shard === key.shard) {
      this.#current = prefetched;
    } else {
      if (prefetched) this.#release(prefetched);
      this.#current = this.#load(key.epoch, key.shard);
    }
    this.#noteHeld();
  }

  /** Starts fetching the shard after the current one if both fit in the budget. */
  #prefetch(): void {
    if (this.#next) return;
    const key = this.#upcomingKey();
    if (!key) return;
    const bytes = this.#dataset.loaded.train[key.shard]?.bytes ?? 0;
    if ((this.#current?.bytes ?? 0) + bytes > this.#budget) return;
    this.#next = this.#load(key.epoch, key.shard);
    this.stats.prefetched++;
    this.#noteHeld();
  }

  #noteHeld(): void {
    this.stats.maxHeldBytes = Math.max(this.stats.maxHeldBytes, this.heldBytes);
  }

  #load(epoch: number, shard: number): Loading {
    const entry = this.#dataset.loaded.train[shard];
    if (!entry) throw new RangeError(`training shard ${shard} does not exist`);
    // Pinned while held, so the cache never evicts a shard the walker is drawing from.
    this.#dataset.cache?.pin(entry.sha256);
    const loading: Loading = {
      epoch,
      shard,
      sha256: entry.sha256,
      bytes: entry.bytes,
      promise: this.#dataset.shard(entry),
      settled: false,
      failed: false,
    };
    // A failed prefetch is reported when the shard is drawn from, not as an unhandled rejection.
    loading.promise.then(
      () => {
        loading.settled = true;
      },
      () => {
        loading.settled = true;
        loading.failed = true;
      },
    );
    return loading;
  }

  /** Lets go of a shard (unpins it in the cache); returns null for `this.#current = this.#release(…)`. */
  #release(loading: Loading): null {
    this.#dataset.cache?.unpin(loading.sha256);
    return null;
  }
}
