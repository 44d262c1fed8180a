// Unigram entropy: the loss (in nats per byte) of a model that knows only byte frequencies.
// A trained model must beat it; a run stuck near it has learned nothing beyond counts.

/** −Σ p·ln p over byte frequencies, in nats. */
export function unigramEntropy(bytes: Uint8Array): number {
  if (bytes.length === 0) throw new RangeError('unigramEntropy of an empty byte array is undefined');
  const counts = new Float64Array(256);
  for (let i = 0; i < bytes.length; i++) {
    const byte = bytes[i] as number;
    counts[byte] = (counts[byte] as number) + 1;
  }
  let entropy = 0;
  for (const count of counts) {
    if (count === 0) continue;
    const p = count / bytes.length;
    entropy -= p * Math.log(p);
  }
  return entropy;
}
