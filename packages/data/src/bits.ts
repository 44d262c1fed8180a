// Shoal's tokens are bytes, so a loss in nats per token is a loss in nats per byte, and bits per
// byte (nats ÷ ln 2) compares across tokenizers and with published byte- and character-level
// figures (docs/bits-per-byte.md).

/** Bits per byte from a mean cross-entropy in nats per byte-token. */
export function bitsPerByte(nats: number): number {
  return nats / Math.LN2;
}
