// The byte tokenizer: a token is one UTF-8 byte, so any text encodes and the vocabulary is
// fixed at 256 — no merges file to ship or to keep in sync between peers.

/** Number of distinct tokens: one per byte value. */
export const VOCAB_SIZE = 256;

const utf8Encoder = new TextEncoder();
// fatal: false maps each invalid sequence to U+FFFD instead of throwing: sampled text from a
// byte model often cuts a multi-byte character in half, and that must still print.
const utf8Decoder = new TextDecoder('utf-8', { fatal: false, ignoreBOM: true });

/** UTF-8 bytes of `text` as tokens 0..255. Lone surrogates encode as U+FFFD (EF BF BD). */
export function encode(text: string): Int32Array {
  return new Int32Array(utf8Encoder.encode(text));
}

/** The UTF-8 bytes of `text`, as the corpus stores them. */
export function encodeBytes(text: string): Uint8Array {
  return utf8Encoder.encode(text);
}

/**
 * Text for tokens 0..255; invalid UTF-8 becomes U+FFFD and never throws. A token outside
 * 0..255 is not a byte at all (a bug upstream, not bad text), so it throws a RangeError.
 */
export function decode(tokens: ArrayLike<number>): string {
  const bytes = new Uint8Array(tokens.length);
  for (let i = 0; i < tokens.length; i++) {
    const token = tokens[i] as number;
    if (!Number.isInteger(token) || token < 0 || token >= VOCAB_SIZE) {
      throw new RangeError(`token ${token} at index ${i} is not a byte (vocabulary is 0..${VOCAB_SIZE - 1})`);
    }
    bytes[i] = token;
  }
  return utf8Decoder.decode(bytes);
}
