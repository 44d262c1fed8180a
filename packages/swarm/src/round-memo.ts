/**
 * Work that the replicas and shard aggregators of one process can do once between them. In the
 * simulator M workers and the host run in one process, and each is a full replica: every one of
 * them decodes the same shard results, hashes them, runs the same tentative outer step and hashes
 * θ′ ‖ m′, and a shard's owner and checker aggregate the same contributions. A `RoundMemo`
 * (the simulator's sim/shared-rounds.ts) lets the first to compute a result hand it to the others.
 * Real volunteers have none: each is alone in its process, and nothing here changes what it does.
 *
 * Safe against hostile peers because a result is only ever found under its exact inputs, never
 * under "probably the same":
 * - message bytes (a shard result, a contribution) are compared byte for byte with the bytes the
 *   result was computed from, not by a hash a peer could collide: a peer that sends different
 *   bytes to different replicas gets each replica computing from its own;
 * - vectors (θ_global, m, decoded results) are named by object identity (`id`): a vector a replica
 *   holds is never written to (the contract replica.ts keeps for the vector interner already);
 * - everything else (codec, shard ranges, round, weights, outer settings, the fragment's tensors)
 *   is in the key by value.
 * Every computation memoised is a deterministic function of those inputs (fixed-order f32
 * arithmetic, hashes), so the shared result is the bits the replica would have computed itself.
 */
import type { Codec, Fragment } from '@shoal/diloco';

/**
 * Where replicas of one process keep the vectors they hold by value and never write to (θ_global,
 * m, decoded shard results, tentative states): one copy of each content (the simulator's
 * sim/shared-vectors.ts). `intern` returns a vector with the same bits, this one or one held already.
 */
export interface VectorInterner {
  intern(values: Float32Array): Float32Array;
}

/** Which round a result belongs to: results of a fragment's older rounds are let go. */
export interface RoundScope {
  fragment: number;
  round: number;
}

export interface RoundMemo {
  /** A number that names `object` while it lives; never given to any other object. */
  id(object: object): number;
  /**
   * What `compute` gave for `key` in this round where `bytes` were the same, else its result, kept
   * for the next caller until the fragment's next round. A compute that throws keeps nothing.
   */
  recall<T>(scope: RoundScope, key: string, bytes: readonly Uint8Array[], compute: () => T): T;
  /**
   * As `recall`, for a result that exactly two parties compute (a shard's owner and checker):
   * the first computes it and leaves it, the second takes it away.
   */
  handOff<T>(scope: RoundScope, key: string, bytes: readonly Uint8Array[], compute: () => T): T;
}

/** A codec by what its encoding depends on: its name and block size. */
export function codecKey(codec: Codec): string {
  return `${codec.name}/${codec.blockSize}`;
}

/** A fragment by its layout: size, and each tensor's offset and shape (the low-rank codec reads them). */
export function fragmentKey(fragment: Fragment): string {
  return JSON.stringify([fragment.size, fragment.tensors.map((t) => [t.offset, t.size, t.rows, t.cols])]);
}

/**
 * JSON in which every number keeps its exact text (JSON.stringify writes Infinity and NaN as
 * null and −0 as 0), and cannot be mistaken for a string: a key's inputs by value.
 */
export function exactJson(value: unknown): string {
  return JSON.stringify(value, (_, v) => (typeof v === 'number' ? { '#': Object.is(v, -0) ? '-0' : String(v) } : v));
}
