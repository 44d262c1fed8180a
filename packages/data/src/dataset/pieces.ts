// How `shoal data pack` cuts its input (shared, no node:*): a document into pieces of at most
// PIECE_BYTES at a line, a space or a character boundary; piece j into the validation split every
// round(1 / fraction) pieces; and where a chunk stops being UTF-8.

import { PIECE_BYTES } from './manifest.ts';

/** Where piece j goes: validation when j mod period = period − 1 (period 0: never). */
export function validationPeriod(fraction: number): number {
  return fraction > 0 ? Math.round(1 / fraction) : 0;
}

/**
 * How many bytes of `bytes` (longer than `limit`) the next piece takes: through the last line break
 * in the first `limit` bytes, else through the last space, else up to the last UTF-8 character
 * start at or before `limit` (never inside a multi-byte character).
 */
export function pieceLength(bytes: Uint8Array, limit: number = PIECE_BYTES): number {
  const window = bytes.subarray(0, limit);
  const newline = window.lastIndexOf(0x0a);
  if (newline >= 0) return newline + 1;
  const space = window.lastIndexOf(0x20);
  if (space >= 0) return space + 1;
  let end = limit;
  while (end > 0 && (bytes[end] ?? 0) >> 6 === 0b10) end--; // 10xxxxxx: a continuation byte
  return end > 0 ? end : limit;
}

/** Offset of the first byte that does not start a valid UTF-8 character, or -1. */
export function invalidUtf8Offset(bytes: Uint8Array): number {
  let i = 0;
  while (i < bytes.length) {
    const b = bytes[i] as number;
    const n = b < 0x80 ? 0 : b >= 0xc2 && b < 0xe0 ? 1 : b >= 0xe0 && b < 0xf0 ? 2 : b >= 0xf0 && b < 0xf5 ? 3 : -1;
    if (n < 0 || i + n >= bytes.length) return i; // not a lead byte, or cut short
    for (let k = 1; k <= n; k++) if (((bytes[i + k] as number) & 0xc0) !== 0x80) return i;
    const c1 = bytes[i + 1] as number;
    if (
      (b === 0xe0 && c1 < 0xa0) ||
      (b === 0xed && c1 >= 0xa0) ||
      (b === 0xf0 && c1 < 0x90) ||
      (b === 0xf4 && c1 >= 0x90)
    ) {
      return i; // overlong, surrogate or beyond U+10FFFF
    }
    i += n + 1;
  }
  return -1;
}
