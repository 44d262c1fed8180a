import { describe, expect, it } from 'vitest';
import { decode, encode, VOCAB_SIZE } from './tokenizer.ts';

describe('byte tokenizer', () => {
  it('maps ASCII to its byte values', () => {
    expect(VOCAB_SIZE).toBe(256);
    expect(Array.from(encode('Call me'))).toEqual([67, 97, 108, 108, 32, 109, 101]);
    expect(encode('')).toEqual(new Int32Array(0));
  });

  it('round-trips non-ASCII text through UTF-8 bytes', () => {
    const text = 'Ahab—“the whale!” naïve 鲸 🐋 \uFEFFbom';
    const tokens = encode(text);
    expect(tokens).toBeInstanceOf(Int32Array);
    expect(Array.from(encode('—'))).toEqual([0xe2, 0x80, 0x94]);
    expect(Array.from(encode('🐋'))).toEqual([0xf0, 0x9f, 0x90, 0x8b]);
    expect(tokens.every((t) => t >= 0 && t < VOCAB_SIZE)).toBe(true);
    expect(decode(tokens)).toBe(text);
  });

  it('turns invalid UTF-8 into U+FFFD instead of throwing', () => {
    // A 3-byte character cut after its first two bytes, as a sampled sequence might end.
    expect(decode([0x61, 0xe2, 0x80])).toBe('a\uFFFD');
    // A stray continuation byte, an overlong encoding of '/', and a byte that never occurs in UTF-8.
    expect(decode([0x80, 0x41])).toBe('\uFFFDA');
    expect(decode([0xc0, 0xaf])).toBe('\uFFFD\uFFFD');
    expect(decode([0xff])).toBe('\uFFFD');
    expect(decode(new Uint8Array([0xe2, 0x80, 0x94, 0xe2]))).toBe('—\uFFFD');
  });

  it('refuses tokens that are not bytes', () => {
    expect(() => decode([65, 256])).toThrow(/token 256 at index 1 is not a byte/);
    expect(() => decode([-1])).toThrow(RangeError);
    expect(() => decode([1.5])).toThrow(RangeError);
  });
});
