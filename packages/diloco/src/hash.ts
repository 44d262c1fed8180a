/**
 * The fragment state hash: hash(θ_global[p] ‖ m[p]) over the bytes of both Float32Arrays, θ
 * first, as lowercase hex. Replicas report it after a tentative outer step; the coordinator
 * commits a round when a quorum reports the same string ("Apply, commit, abort"), and a late
 * joiner checks transferred state against it.
 *
 * The bytes are the logical, unpadded contiguous form (fragments.ts) in little-endian order,
 * so hashes compare across browsers, Node and GPUs.
 *
 * Algorithms (hash-wasm: WebAssembly, the same code in browsers, Web Workers and Node):
 * - `xxh128` (default): XXH3-128. ~4 GB/s here, so a 10M-parameter fragment (80 MB of θ ‖ m)
 *   takes ~20 ms. Catches divergence (non-deterministic arithmetic, corrupted state) with
 *   negligible collision odds, but it is not cryptographic: someone who wants to can build a
 *   different state with the same hash.
 * - `blake3`: cryptographic, ~5× slower. For state accepted from an untrusted peer (late-joiner
 *   transfer) where a forged state must not pass the check.
 * All replicas of a run must use the same one.
 *
 * WebAssembly instantiation is asynchronous, so the hasher is created once with
 * `await createFragmentHasher()` and then hashes synchronously.
 */
import { createBLAKE3, createXXHash128, type IHasher } from 'hash-wasm';
import { assertLittleEndianHost } from './codecs/codec.ts';

export type FragmentHashAlgorithm = 'xxh128' | 'blake3';

export interface FragmentHasher {
  readonly algorithm: FragmentHashAlgorithm;
  /** Hex digest of θ's bytes then m's bytes; both the same length. */
  hash(theta: Float32Array, momentum: Float32Array): string;
  /** Hex digest of the parts' bytes, in order (a shard result: payload ‖ accepted peers). */
  hashBytes(parts: readonly Uint8Array[]): string;
}

const bytesOf = (values: Float32Array) => new Uint8Array(values.buffer, values.byteOffset, values.byteLength);

export async function createFragmentHasher(algorithm: FragmentHashAlgorithm = 'xxh128'): Promise<FragmentHasher> {
  assertLittleEndianHost();
  let hasher: IHasher;
  if (algorithm === 'xxh128') hasher = await createXXHash128();
  else if (algorithm === 'blake3') hasher = await createBLAKE3();
  else throw new RangeError(`Unknown fragment hash "${algorithm}": choose xxh128 or blake3`);
  return {
    algorithm,
    hash(theta, momentum) {
      if (theta.length !== momentum.length) {
        throw new RangeError(`Fragment hash needs θ and m of one length, got ${theta.length} and ${momentum.length}`);
      }
      // one hasher, reused: init() resets it, and hashing is synchronous, so calls cannot interleave
      hasher.init();
      hasher.update(bytesOf(theta));
      hasher.update(bytesOf(momentum));
      return hasher.digest('hex');
    },
    hashBytes(parts) {
      hasher.init();
      for (const part of parts) hasher.update(part);
      return hasher.digest('hex');
    },
  };
}
