import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadCorpus, loadMobyDick, loadMobyDickChapters, loadTextFile, writeMobyDickText } from './corpus.node.ts';
import { corpusFingerprint, MOBY_DICK_FINGERPRINT, splitCorpus } from './corpus.ts';
import { unigramEntropy } from './entropy.ts';
import { decode } from './tokenizer.ts';

const tempDir = () => mkdtempSync(join(tmpdir(), 'shoal-data-'));

describe('Moby Dick', () => {
  const chapters = loadMobyDickChapters();
  const bytes = loadMobyDick();

  it('joins all 139 sections in order with blank lines', () => {
    expect(chapters.length).toBe(139);
    expect(chapters[0]?.startsWith('CONTENTS')).toBe(true);
    expect(chapters[3]?.startsWith('Call me Ishmael.')).toBe(true);
    expect(chapters[138]?.endsWith('only found another orphan.\n')).toBe(true);
    const text = decode(bytes);
    expect(text).toBe(chapters.join('\n\n'));
    expect(text.startsWith(chapters[0] as string)).toBe(true);
    expect(text).not.toContain('\uFFFD');
  });

  it('has the contract length, fingerprint and unigram entropy', () => {
    expect(bytes.length).toBe(1216578);
    expect(corpusFingerprint(bytes)).toBe(MOBY_DICK_FINGERPRINT);
    expect(unigramEntropy(bytes)).toBeCloseTo(3.0765, 4);
  });

  it('splits into 1094920 training and 121658 validation bytes', () => {
    const { train, validation } = splitCorpus(bytes);
    expect(train.length).toBe(Math.floor(0.9 * bytes.length));
    expect(train.length).toBe(1094920);
    expect(validation.length).toBe(121658);
    expect(decode(validation).endsWith('only found another orphan.\n')).toBe(true);
  });

  it('writes the text file the browser will fetch, byte for byte', () => {
    const path = join(tempDir(), 'public/data/moby-dick.txt');
    const written = writeMobyDickText(path);
    expect(written).toEqual({ path, bytes: 1216578, fingerprint: MOBY_DICK_FINGERPRINT });
    // Buffer.equals, not toEqual: a deep equality over 1.2 M elements takes seconds.
    expect(readFileSync(path).equals(bytes)).toBe(true);
  });
});

describe('loadTextFile', () => {
  it('reads any UTF-8 file as bytes and splits it like Moby Dick', () => {
    const path = join(tempDir(), 'tiny.txt');
    writeFileSync(path, 'the whale, the whale, the white whale ');
    const bytes = loadTextFile(path, { seqLen: 3 });
    expect(bytes.constructor).toBe(Uint8Array);
    expect(decode(bytes)).toBe('the whale, the whale, the white whale ');
    const corpus = loadCorpus({ data: path });
    expect(corpus.name).toBe(path);
    expect(corpus.validation.length).toBe(bytes.length - Math.floor(0.9 * bytes.length));
    expect(loadCorpus().fingerprint).toBe(MOBY_DICK_FINGERPRINT);
  });

  it('names the file when it is missing, a directory, empty or too small', () => {
    const dir = tempDir();
    expect(() => loadTextFile(join(dir, 'missing.txt'))).toThrow(`data file not found: ${join(dir, 'missing.txt')}`);
    expect(() => loadTextFile(dir)).toThrow(`data file is a directory: ${dir}`);
    writeFileSync(join(dir, 'empty.txt'), '');
    expect(() => loadTextFile(join(dir, 'empty.txt'))).toThrow(`corpus ${join(dir, 'empty.txt')} is empty`);
    writeFileSync(join(dir, 'short.txt'), 'x'.repeat(500));
    expect(() => loadTextFile(join(dir, 'short.txt'), { seqLen: 64 })).toThrow(
      /too small for seqLen 64.*at least 641 bytes/,
    );
  });
});
