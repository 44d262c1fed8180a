import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  checkCorpusSize,
  corpusFingerprint,
  corpusFromBytes,
  fetchCorpus,
  joinChapters,
  MOBY_DICK_URL,
  splitCorpus,
  validationStart,
} from './corpus.ts';
import { decode, encode } from './tokenizer.ts';

const bytesOf = (text: string) => new Uint8Array(encode(text));

describe('corpus contract', () => {
  it('joins chapters with a blank line as UTF-8', () => {
    expect(decode(joinChapters(['One.', 'Two—', 'Three']))).toBe('One.\n\nTwo—\n\nThree');
    expect(joinChapters(['é']).length).toBe(2);
  });

  it('puts exactly the last 10% (from floor(0.9·length)) in validation', () => {
    for (const length of [1, 9, 10, 11, 99, 1000, 1216578]) {
      const bytes = new Uint8Array(length).map((_, i) => i % 251);
      const { train, validation } = splitCorpus(bytes);
      const start = Math.floor(0.9 * length);
      expect(train.length).toBe(start);
      expect(validation.length).toBe(length - start);
      expect(validation[0]).toBe(bytes[start]);
      expect(train.buffer).toBe(bytes.buffer); // views, not copies
    }
    expect(validationStart(1000, 0.25)).toBe(750);
    expect(splitCorpus(new Uint8Array(10), 0).validation.length).toBe(0);
    expect(() => splitCorpus(new Uint8Array(10), 1)).toThrow(/validationFraction/);
  });

  it('builds a corpus with a fingerprint from bytes or an ArrayBuffer', () => {
    const bytes = bytesOf('abcdefghijklmnopqrst');
    const corpus = corpusFromBytes(bytes.buffer, { name: 'letters' });
    expect(corpus.bytes).toEqual(bytes);
    expect(decode(corpus.train)).toBe('abcdefghijklmnopqr');
    expect(decode(corpus.validation)).toBe('st');
    expect(corpus.fingerprint).toBe(corpusFingerprint(bytes));
    expect(corpus.fingerprint).not.toBe(corpusFingerprint(bytesOf('abcdefghijklmnopqrsu')));
    // FNV-1a reference value of "a".
    expect(corpusFingerprint(bytesOf('a'))).toBe('1:e40c292c');
  });

  it('rejects empty corpora and ones too small for a window, saying how large they must be', () => {
    expect(() => corpusFromBytes(new Uint8Array(0), { name: 'x.txt' })).toThrow('corpus x.txt is empty');
    expect(() => checkCorpusSize(100, 'small.txt', { seqLen: 64 })).toThrow(
      /small.txt is too small for seqLen 64: its 100 bytes split into 90 training and 10 validation bytes.*at least 65; use a text of at least 641 bytes/,
    );
    expect(() => checkCorpusSize(641, 'ok', { seqLen: 64 })).not.toThrow();
    expect(() => checkCorpusSize(640, 'no', { seqLen: 64 })).toThrow(/at least 641 bytes/);
    expect(() => checkCorpusSize(65, 'all-train', { seqLen: 64, validationFraction: 0 })).not.toThrow();
  });
});

describe('fetchCorpus', () => {
  afterEach(() => vi.unstubAllGlobals());

  const serve = (body: BodyInit, init: ResponseInit) => vi.stubGlobal('fetch', async () => new Response(body, init));

  it('splits a fetched text file', async () => {
    serve('0123456789', { headers: { 'content-type': 'text/plain' } });
    const corpus = await fetchCorpus('/data/digits.txt');
    expect(corpus.name).toBe('/data/digits.txt');
    expect(decode(corpus.validation)).toBe('9');
  });

  it('rejects HTTP errors, HTML fallbacks and a default corpus that does not match the contract', async () => {
    serve('nope', { status: 404, statusText: 'Not Found' });
    await expect(fetchCorpus('/data/x.txt')).rejects.toThrow('could not fetch corpus /data/x.txt: HTTP 404 Not Found');
    serve('<!doctype html>', { headers: { 'content-type': 'text/html; charset=utf-8' } });
    await expect(fetchCorpus()).rejects.toThrow(/came back as an HTML page/);
    serve('not the book', { headers: { 'content-type': 'text/plain' } });
    await expect(fetchCorpus(MOBY_DICK_URL)).rejects.toThrow(/fingerprint 12:[0-9a-f]{8}, expected 1216578:/);
  });
});
