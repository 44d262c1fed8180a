// Counter-based random numbers and a content checksum, in 32-bit integer arithmetic only
// (Math.imul, >>>), so every JS engine — browser or Node, any CPU — gets the same bits.
//
// Counter-based rather than a stateful generator: the k-th draw is a pure function of
// (seed, worker, k), so a sampler's whole state is one counter, and resuming from a
// checkpoint is O(1) instead of replaying every draw since step 0.

const GOLDEN = 0x9e3779b9; // 2^32 / φ: decorrelates consecutive words fed to the mixer
const TWO_POW_32 = 4294967296;

/** A bijective 32-bit mixer with low bias (Wellons' "lowbias32"). */
function mix32(x: number): number {
  let h = x >>> 0;
  h ^= h >>> 16;
  h = Math.imul(h, 0x7feb352d);
  h ^= h >>> 15;
  h = Math.imul(h, 0x846ca68b);
  h ^= h >>> 16;
  return h >>> 0;
}

/** Hashes a sequence of 32-bit words to one 32-bit word; order matters. */
export function hashWords(words: readonly number[]): number {
  let h = GOLDEN;
  for (const word of words) h = mix32((h ^ mix32(word)) + GOLDEN);
  return h;
}

/** Splits a non-negative safe integer into [low 32 bits, high 21 bits] so keys above 2^32 stay distinct. */
export function wordsOf(value: number): [number, number] {
  return [value >>> 0, Math.floor(value / TWO_POW_32) >>> 0];
}

/**
 * A uniform integer in [0, n) from a 53-bit fraction built out of two hashed words. Doubles
 * hold 53 bits exactly and IEEE multiplication rounds the same everywhere, so the result is
 * bit-identical across engines; with 53 bits the bias for n up to 2^32 is below 2^-21.
 */
export function uniformIndex(key: readonly number[], n: number): number {
  const high = hashWords([...key, 0]) >>> 5; // 27 bits
  const low = hashWords([...key, 1]) >>> 6; // 26 bits
  const fraction = (high * 67108864 + low) / 9007199254740992; // (high·2^26 + low) / 2^53 ∈ [0, 1)
  return Math.floor(fraction * n);
}

/** FNV-1a over bytes: a cheap checksum to tell whether two peers hold the same corpus. */
export function fnv1a32(bytes: Uint8Array): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < bytes.length; i++) h = Math.imul(h ^ (bytes[i] as number), 0x01000193);
  return h >>> 0;
}

/** Throws unless `value` is an integer in [min, Number.MAX_SAFE_INTEGER]. */
export function assertInteger(name: string, value: number, min: number): void {
  if (!Number.isSafeInteger(value) || value < min) {
    throw new RangeError(`${name} must be an integer ≥ ${min}, got ${value}`);
  }
}
