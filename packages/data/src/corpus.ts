// The corpus contract, shared by Node and the browser so every worker builds identical data:
// text → UTF-8 bytes; the last `validationFraction` of the bytes (from floor((1 − f)·length))
// is the validation split, everything before it is training. Nothing here touches the disk.

import { fnv1a32 } from './hash.ts';
import { encodeBytes } from './tokenizer.ts';

/** Where the web app serves the default corpus (written by scripts/write-corpus.ts). */
export const MOBY_DICK_URL = '/data/moby-dick.txt';

/** What loadMobyDick() gives on every machine: length and FNV-1a of the joined text. */
export const MOBY_DICK_FINGERPRINT = '1216578:beb9fa0f';

export const DEFAULT_VALIDATION_FRACTION = 0.1;

/** Separator between chapters: a blank line. */
export const CHAPTER_SEPARATOR = '\n\n';

export interface CorpusSplit {
  train: Uint8Array;
  validation: Uint8Array;
}

export interface Corpus extends CorpusSplit {
  /** Shown in errors and logs: a file path, a URL or 'moby-dick'. */
  name: string;
  bytes: Uint8Array;
  /** `${byteLength}:${fnv1a32 hex}`: peers compare it to be sure they train on the same data. */
  fingerprint: string;
}

export interface CorpusOptions {
  name?: string;
  validationFraction?: number;
  /** When given, both splits must hold at least one window of seqLen + 1 bytes. */
  seqLen?: number;
}

/** Chapters' texts in order, joined by a blank line, as UTF-8 bytes. */
export function joinChapters(texts: readonly string[]): Uint8Array {
  return encodeBytes(texts.join(CHAPTER_SEPARATOR));
}

/** Index of the first validation byte: floor((1 − f)·length). */
export function validationStart(length: number, validationFraction = DEFAULT_VALIDATION_FRACTION): number {
  if (!(validationFraction >= 0 && validationFraction < 1)) {
    throw new RangeError(`validationFraction must be in [0, 1), got ${validationFraction}`);
  }
  // 1 − 0.1 is 0.9 exactly in doubles; the product rounds the same on every IEEE machine.
  return Math.floor((1 - validationFraction) * length);
}

/** Training and validation views (no copies) of `bytes`. */
export function splitCorpus(bytes: Uint8Array, validationFraction = DEFAULT_VALIDATION_FRACTION): CorpusSplit {
  const start = validationStart(bytes.length, validationFraction);
  return { train: bytes.subarray(0, start), validation: bytes.subarray(start) };
}

export function corpusFingerprint(bytes: Uint8Array): string {
  return `${bytes.length}:${fnv1a32(bytes).toString(16).padStart(8, '0')}`;
}

/** Whether both splits of a `length`-byte corpus hold one window (the validation split only when f > 0). */
function splitsHoldWindow(length: number, window: number, fraction: number): boolean {
  const start = validationStart(length, fraction);
  return start >= window && (fraction === 0 || length - start >= window);
}

/**
 * Checks that a corpus of `length` bytes is non-empty and, with `seqLen`, that both splits hold
 * one window of seqLen + 1 bytes; the error says how large the text must be.
 */
export function checkCorpusSize(length: number, name: string, options: CorpusOptions = {}): void {
  if (length === 0) throw new Error(`corpus ${name} is empty`);
  const { seqLen } = options;
  if (seqLen === undefined) return;
  const fraction = options.validationFraction ?? DEFAULT_VALIDATION_FRACTION;
  const window = seqLen + 1;
  if (splitsHoldWindow(length, window, fraction)) return;
  // The validation split needs f·L > window − 1, so no length below (window − 1)/f can fit.
  let needed = fraction === 0 ? window : Math.max(window, Math.floor((window - 1) / fraction) - 1);
  while (!splitsHoldWindow(needed, window, fraction)) needed++;
  const start = validationStart(length, fraction);
  throw new Error(
    `corpus ${name} is too small for seqLen ${seqLen}: its ${length} bytes split into ${start} training and ` +
      `${length - start} validation bytes, and each split needs at least ${window}; use a text of at least ${needed} bytes`,
  );
}

/** A corpus from bytes already in memory (a fetched file, a read file, a test string). */
export function corpusFromBytes(bytes: Uint8Array | ArrayBuffer, options: CorpusOptions = {}): Corpus {
  const data = bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes);
  const name = options.name ?? 'corpus';
  checkCorpusSize(data.length, name, options);
  const split = splitCorpus(data, options.validationFraction ?? DEFAULT_VALIDATION_FRACTION);
  return { name, bytes: data, fingerprint: corpusFingerprint(data), ...split };
}

/**
 * Fetches a corpus served as a static file (the browser's route to the default corpus; Node
 * workers can use it against a Shoal server too). Rejects an HTML reply: dev servers answer a
 * missing file with index.html, which would otherwise train happily on markup.
 */
export async function fetchCorpus(url: string = MOBY_DICK_URL, options: CorpusOptions = {}): Promise<Corpus> {
  const response = await fetch(url);
  if (!response.ok) throw new Error(`could not fetch corpus ${url}: HTTP ${response.status} ${response.statusText}`);
  const type = response.headers.get('content-type') ?? '';
  if (type.includes('text/html')) {
    throw new Error(`corpus ${url} came back as an HTML page (${type}): is the file missing from the server?`);
  }
  const corpus = corpusFromBytes(await response.arrayBuffer(), { name: url, ...options });
  if (url === MOBY_DICK_URL && corpus.fingerprint !== MOBY_DICK_FINGERPRINT) {
    throw new Error(
      `corpus ${url} has fingerprint ${corpus.fingerprint}, expected ${MOBY_DICK_FINGERPRINT}: regenerate it with packages/data/scripts/write-corpus.ts`,
    );
  }
  return corpus;
}
