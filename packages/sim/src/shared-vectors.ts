/**
 * One copy of each vector that the simulator's replicas hold by value. Every replica of a room
 * holds θ_global and the outer momentum m, decodes the same shard results and computes the same
 * tentative outer step, and they agree bit for bit (that is what their hashes check): in one
 * process, M + 1 replicas of `small` would hold M + 1 copies of the same 87 MB. A replica hands
 * each such vector to `intern` when it has made it and keeps what comes back: the copy already
 * held if one has the same bits, else its own, which is held from then on for the next replica.
 *
 * The contract that makes this safe: nothing writes to a vector after it was interned (a replica
 * replaces θ_global and m with new arrays at a commit; it never updates them in place). Vectors
 * are held weakly: one that no replica keeps any more is collected, and its entry with it.
 *
 * Lookup: a fingerprint of the length and 64 words spread over the vector picks a bucket; a
 * candidate counts only when every byte is equal (sim/same-bytes.ts: −0 and 0, or two NaNs, differ).
 */
import type { VectorInterner } from '@shoal/swarm';
import { sameBytes } from './same-bytes.ts';

/** Words of a vector the fingerprint reads. */
const SAMPLES = 64;

export class SharedVectors implements VectorInterner {
  private readonly buckets = new Map<string, WeakRef<Float32Array>[]>();
  private readonly registry = new FinalizationRegistry<string>((key) => this.prune(key));
  /** Interned vectors that were found held already (each a copy not kept). */
  hits = 0;
  /** Bytes those copies would have held. */
  savedBytes = 0;

  intern(values: Float32Array): Float32Array {
    const key = fingerprint(values);
    const bucket = this.buckets.get(key) ?? [];
    for (const ref of bucket) {
      const held = ref.deref();
      if (held === values) return held;
      if (held && sameBytes(held, values)) {
        this.hits++;
        this.savedBytes += values.byteLength;
        return held;
      }
    }
    bucket.push(new WeakRef(values));
    this.buckets.set(key, bucket);
    this.registry.register(values, key);
    return values;
  }

  /** Bytes of the distinct vectors held now. */
  get bytes(): number {
    let total = 0;
    for (const bucket of this.buckets.values()) for (const ref of bucket) total += ref.deref()?.byteLength ?? 0;
    return total;
  }

  private prune(key: string): void {
    const bucket = this.buckets.get(key)?.filter((ref) => ref.deref() !== undefined);
    if (bucket && bucket.length > 0) this.buckets.set(key, bucket);
    else this.buckets.delete(key);
  }
}

function words(values: Float32Array): Uint32Array {
  return new Uint32Array(values.buffer, values.byteOffset, values.length);
}

function fingerprint(values: Float32Array): string {
  const w = words(values);
  let hash = 0x811c9dc5;
  if (w.length > 0) {
    for (let i = 0; i < SAMPLES; i++) {
      hash = Math.imul(hash ^ (w[Math.floor((i * (w.length - 1)) / (SAMPLES - 1))] as number), 0x01000193);
    }
  }
  return `${values.length}:${(hash >>> 0).toString(16)}`;
}
