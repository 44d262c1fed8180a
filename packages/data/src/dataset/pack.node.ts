// `shoal data pack`: text files, folders and JSON Lines streamed into the shards and manifest of
// manifest.ts. Inputs are read in 1 MiB chunks and shards written through a 1 MiB buffer, so
// memory does not grow with the input's size (a JSONL record is held whole).

import { createHash, type Hash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { type FileHandle, mkdir, open, readdir, rename, rm, stat, unlink, writeFile } from 'node:fs/promises';
import { basename, isAbsolute, join, resolve } from 'node:path';
import { type InputFile, listInputs } from './inputs.node.ts';
import {
  type DatasetManifest,
  DEFAULT_DATASET_VALIDATION_FRACTION,
  DEFAULT_SHARD_BYTES,
  DOCUMENT_SEPARATOR,
  MANIFEST_FILE,
  MAX_SHARD_BYTES,
  MIN_SHARD_BYTES,
  PIECE_BYTES,
  parseManifest,
  type ShardEntry,
} from './manifest.ts';
import { invalidUtf8Offset, pieceLength, validationPeriod } from './pieces.ts';

export { invalidUtf8Offset, pieceLength, validationPeriod };

export interface PackProgress {
  bytesRead: number;
  /** Σ the inputs' sizes, from stat before reading. */
  totalBytes: number;
  /** Shards finished so far. */
  shards: number;
}

export interface PackOptions {
  outDir: string;
  shardBytes?: number;
  validationFraction?: number;
  /** A JSONL record's text field. */
  textField?: string;
  /** The dataset's name; default: the first input's name. */
  name?: string;
  licence?: string;
  /** Skip JSONL lines that are not JSON or lack the text field (counted) instead of failing. */
  skipBadLines?: boolean;
  /** Replace a dataset already in outDir. */
  overwrite?: boolean;
  onProgress?: (progress: PackProgress) => void;
  /** Opens a shard's file for writing (tests inject a full disk); default fs.promises.open(path, 'w'). */
  openForWrite?: (path: string) => Promise<FileHandle>;
}

export interface PackResult {
  shards: number;
  bytes: number;
  validationShards: number;
  /** Path of manifest.json. */
  manifest: string;
  /** SHA-256 of manifest.json's bytes: the dataset's name in a room's config. */
  hash: string;
  documents: number;
  skippedLines: number;
}

const READ_CHUNK = 1024 * 1024;
const WRITE_BUFFER = 1024 * 1024;
const SHARD_NAME = /^(train|validation)-\d{5,}\.txt$/;
const separatorBytes = new TextEncoder().encode(DOCUMENT_SEPARATOR);

/** One split's shards: pieces appended in order, a shard closed before a piece would overflow it. */
class SplitWriter {
  readonly entries: ShardEntry[] = [];
  private handle: FileHandle | null = null;
  private tempPath = '';
  private hash: Hash = createHash('sha256');
  private bytes = 0;
  private buffered: Uint8Array[] = [];
  private bufferedBytes = 0;
  private lastDocument = -1;
  private lastPieceInDocument = -1;

  constructor(
    private readonly split: 'train' | 'validation',
    private readonly pack: PackState,
  ) {}

  async add(piece: Uint8Array, document: number, pieceInDocument: number): Promise<void> {
    // Pieces of one document cut apart here are joined as cut; anything else is a new document.
    const joined = document === this.lastDocument && pieceInDocument === this.lastPieceInDocument + 1;
    let separator = this.bytes > 0 && !joined ? separatorBytes.length : 0;
    if (this.bytes + separator + piece.length > this.pack.shardBytes) {
      await this.close();
      separator = 0;
    }
    if (this.handle === null) await this.openShard();
    if (separator > 0) this.append(separatorBytes);
    this.append(piece);
    this.lastDocument = document;
    this.lastPieceInDocument = pieceInDocument;
    if (this.bufferedBytes >= WRITE_BUFFER) await this.flush();
  }

  /** Finishes the open shard, if any: flush, close, rename into place. */
  async close(): Promise<void> {
    if (this.handle === null) return;
    await this.flush();
    await this.handle.close();
    this.handle = null;
    const file = this.fileName();
    await rename(this.tempPath, join(this.pack.outDir, file));
    this.pack.created.push(join(this.pack.outDir, file));
    this.entries.push({ file, sha256: this.hash.digest('hex'), bytes: this.bytes, split: this.split });
    this.pack.shardsDone++;
  }

  /** Closes without finishing (after an error). */
  async abandon(): Promise<void> {
    await this.handle?.close().catch(() => {});
    this.handle = null;
  }

  /** The open shard's name: train-00000.txt, validation-00000.txt, … */
  private fileName(): string {
    return `${this.split}-${String(this.entries.length).padStart(5, '0')}.txt`;
  }

  private async openShard() {
    this.tempPath = join(this.pack.outDir, `.${this.fileName()}.partial`);
    this.pack.created.push(this.tempPath);
    this.handle = await this.pack.openForWrite(this.tempPath);
    this.hash = createHash('sha256');
    this.bytes = 0;
    this.lastDocument = -1;
  }

  private append(bytes: Uint8Array) {
    this.buffered.push(bytes);
    this.bufferedBytes += bytes.length;
    this.bytes += bytes.length;
    this.hash.update(bytes);
  }

  private async flush() {
    if (this.bufferedBytes === 0 || this.handle === null) return;
    const data = Buffer.concat(this.buffered);
    this.buffered = [];
    this.bufferedBytes = 0;
    let offset = 0;
    try {
      while (offset < data.length) {
        const { bytesWritten } = await this.handle.write(data, offset, data.length - offset);
        offset += bytesWritten;
        this.pack.bytesWritten += bytesWritten;
      }
    } catch (error) {
      throw diskFullOr(error, this.pack);
    }
  }
}

/** ENOSPC as a sentence naming the folder and how far the pack got; any other error as it is. */
function diskFullOr(error: unknown, pack: PackState): unknown {
  if ((error as NodeJS.ErrnoException).code !== 'ENOSPC') return error;
  return new Error(`the disk holding ${pack.outDir} is full after writing ${pack.bytesWritten} bytes`);
}

interface PackState {
  outDir: string;
  shardBytes: number;
  openForWrite: (path: string) => Promise<FileHandle>;
  created: string[];
  bytesWritten: number;
  shardsDone: number;
}

/** Cuts documents into pieces and deals them to the splits. */
class PieceDealer {
  pieces = 0;
  documents = 0;
  constructor(
    private readonly period: number,
    private readonly train: SplitWriter,
    private readonly validation: SplitWriter,
  ) {}

  /** Deals every whole piece at the front of `bytes` while more than a piece remains; returns what is left. */
  async cut(bytes: Uint8Array, document: DocumentCursor): Promise<Uint8Array> {
    let rest = bytes;
    while (rest.length > PIECE_BYTES) {
      const n = pieceLength(rest);
      await this.deal(rest.subarray(0, n), document);
      rest = rest.subarray(n);
    }
    return rest;
  }

  /** Deals a document's last bytes (at most one piece). */
  async finish(rest: Uint8Array, document: DocumentCursor): Promise<void> {
    if (rest.length > 0) await this.deal(rest, document);
  }

  private async deal(piece: Uint8Array, document: DocumentCursor) {
    if (document.pieces === 0) document.index = this.documents++;
    const j = this.pieces++;
    const split = this.period > 0 && j % this.period === this.period - 1 ? this.validation : this.train;
    await split.add(piece, document.index, document.pieces++);
  }
}

interface DocumentCursor {
  index: number;
  pieces: number;
}

function utf8Error(file: string, where: string, bytes: Uint8Array, base: number): Error {
  const offset = invalidUtf8Offset(bytes);
  const at = offset >= 0 ? ` at byte ${base + offset}` : '';
  return new Error(`${file}${where} is not UTF-8${at}`);
}

/** What the readers share: the dealer, the options for JSON Lines, and the counts progress reports. */
interface ReadState {
  dealer: PieceDealer;
  textField: string;
  skipBadLines: boolean;
  skippedLines: number;
  bytesRead: number;
  progress: () => void;
}

/** One text file as one document. */
async function packText(file: InputFile, reader: ReadState) {
  const { dealer } = reader;
  const decoder = new TextDecoder('utf-8', { fatal: true });
  const document: DocumentCursor = { index: -1, pieces: 0 };
  let pending: Uint8Array = new Uint8Array(0);
  let offset = 0;
  let tail: Uint8Array = new Uint8Array(0); // the previous chunk's last bytes, for locating an error
  for await (const chunk of createReadStream(file.path, { highWaterMark: READ_CHUNK }) as AsyncIterable<Buffer>) {
    try {
      decoder.decode(chunk, { stream: true });
    } catch {
      throw utf8ErrorAcross(file.path, tail, chunk, offset);
    }
    let bytes: Uint8Array = chunk;
    if (offset === 0 && chunk[0] === 0xef && chunk[1] === 0xbb && chunk[2] === 0xbf) bytes = chunk.subarray(3); // BOM
    offset += chunk.length;
    reader.bytesRead += chunk.length;
    tail = chunk.subarray(Math.max(0, chunk.length - 3));
    pending = await dealer.cut(pending.length > 0 ? Buffer.concat([pending, bytes]) : bytes, document);
    pending = Uint8Array.from(pending); // detach from the chunk
    reader.progress();
  }
  try {
    decoder.decode();
  } catch {
    const start = offset - tail.length + tail.findLastIndex((b) => b >= 0xc0); // the cut-short character's lead byte
    throw new Error(`${file.path} is not UTF-8: it ends inside a character at byte ${start}`);
  }
  await dealer.finish(pending, document);
}

/** An invalid sequence in `chunk` (or straddling from the previous chunk's `tail`) located by byte offset. */
function utf8ErrorAcross(file: string, tail: Uint8Array, chunk: Uint8Array, offset: number): Error {
  // Start at the first character start in the tail: the bytes before it were valid.
  let start = 0;
  while (start < tail.length && ((tail[start] as number) & 0xc0) === 0x80) start++;
  const window = Buffer.concat([tail.subarray(start), chunk]);
  return utf8Error(file, '', window, offset - (tail.length - start));
}

/** One document per JSON Lines record. */
async function packJsonl(file: InputFile, reader: ReadState) {
  const { dealer, textField } = reader;
  const decoder = new TextDecoder('utf-8', { fatal: true });
  const encoder = new TextEncoder();
  let parts: Buffer[] = [];
  let line = 0;
  let lineOffset = 0;
  const handleLine = async (raw: Buffer) => {
    line++;
    const start = lineOffset;
    lineOffset += raw.length + 1;
    const bytes = raw.at(-1) === 0x0d ? raw.subarray(0, -1) : raw; // CRLF
    let text: string;
    try {
      text = decoder.decode(bytes);
    } catch {
      throw utf8Error(file.path, `:${line}`, bytes, start);
    }
    if (text.trim() === '') return;
    let problem: string | null = null;
    let value: unknown;
    try {
      const record = JSON.parse(text) as unknown;
      value =
        typeof record === 'object' && record !== null ? (record as Record<string, unknown>)[textField] : undefined;
      if (typeof value !== 'string') problem = `has no string "${textField}" field`;
    } catch (error) {
      problem = `is not JSON (${(error as Error).message})`;
    }
    if (problem !== null) {
      if (reader.skipBadLines) {
        reader.skippedLines++;
        return;
      }
      throw new Error(`${file.path}:${line} ${problem}`);
    }
    const document: DocumentCursor = { index: -1, pieces: 0 };
    const rest = await dealer.cut(encoder.encode(value as string), document);
    await dealer.finish(rest, document);
  };
  for await (const chunk of createReadStream(file.path, { highWaterMark: READ_CHUNK }) as AsyncIterable<Buffer>) {
    let from = 0;
    for (let newline = chunk.indexOf(0x0a); newline >= 0; newline = chunk.indexOf(0x0a, from)) {
      parts.push(chunk.subarray(from, newline));
      const bytes = Buffer.concat(parts);
      parts = [];
      await handleLine(bytes);
      from = newline + 1;
    }
    if (from < chunk.length) parts.push(chunk.subarray(from));
    reader.bytesRead += chunk.length;
    reader.progress();
  }
  if (parts.length > 0) await handleLine(Buffer.concat(parts));
}

/** The name a manifest records for an input: as given, but an absolute path only by its last name. */
function sourceName(input: string): string {
  return isAbsolute(input) ? basename(input) : input;
}

/**
 * Packs text files, folders and JSON Lines into `outDir`: shards, then manifest.json last (a
 * folder without it is an unfinished pack). Throws a message naming the file (and line or byte
 * offset where known) on bad input; leaves no shards behind when it throws.
 */
export async function packDataset(inputs: string[], options: PackOptions): Promise<PackResult> {
  const shardBytes = options.shardBytes ?? DEFAULT_SHARD_BYTES;
  const fraction = options.validationFraction ?? DEFAULT_DATASET_VALIDATION_FRACTION;
  if (inputs.length === 0) throw new Error('nothing to pack: name at least one file or folder');
  if (!Number.isInteger(shardBytes) || shardBytes < MIN_SHARD_BYTES || shardBytes > MAX_SHARD_BYTES) {
    throw new Error(`a shard holds ${MIN_SHARD_BYTES}–${MAX_SHARD_BYTES} bytes, not ${shardBytes}`);
  }
  if (!(fraction >= 0 && fraction <= 0.5)) throw new Error(`the validation fraction is 0–0.5, not ${fraction}`);
  const period = validationPeriod(fraction);
  if (period === 0) throw new Error('a validation fraction of 0 leaves no validation split, and a dataset needs both');

  const outDir = resolve(options.outDir);
  const manifestPath = join(options.outDir, MANIFEST_FILE);
  const existing = await stat(manifestPath).catch(() => null);
  if (existing !== null && !options.overwrite) {
    throw new Error(
      `${options.outDir} already holds a dataset (${MANIFEST_FILE}): choose another folder, or replace it (--overwrite)`,
    );
  }
  const files = await listInputs(inputs, outDir);
  const totalBytes = files.reduce((sum, file) => sum + file.size, 0);
  await mkdir(outDir, { recursive: true });
  if (existing !== null) await unlink(manifestPath); // from here the folder is an unfinished pack

  const state: PackState = {
    outDir,
    shardBytes,
    openForWrite: options.openForWrite ?? ((path) => open(path, 'w')),
    created: [],
    bytesWritten: 0,
    shardsDone: 0,
  };
  const train = new SplitWriter('train', state);
  const validation = new SplitWriter('validation', state);
  const dealer = new PieceDealer(period, train, validation);
  const reader: ReadState = {
    dealer,
    textField: options.textField ?? 'text',
    skipBadLines: options.skipBadLines ?? false,
    skippedLines: 0,
    bytesRead: 0,
    progress: () => options.onProgress?.({ bytesRead: reader.bytesRead, totalBytes, shards: state.shardsDone }),
  };
  try {
    reader.progress();
    for (const file of files) await (file.kind === 'jsonl' ? packJsonl(file, reader) : packText(file, reader));
    await train.close();
    await validation.close();
    reader.progress();
    if (dealer.pieces === 0) {
      const what = files.length === 1 ? (files[0] as InputFile).path : `${inputs.join(', ')}`;
      throw new Error(`${what} holds no text`);
    }
    if (validation.entries.length === 0) {
      throw new Error(
        `the input packs into ${dealer.pieces} pieces; a validation split needs at least ${period} pieces of ${PIECE_BYTES / 1024} KiB: give more text or a larger --validation fraction`,
      );
    }
    const shards = [...train.entries, ...validation.entries];
    const bytes = shards.reduce((sum, shard) => sum + shard.bytes, 0);
    const manifest: DatasetManifest = {
      format: 'shoal-dataset',
      version: 1,
      name: (options.name ?? basename(resolve(inputs[0] as string))).slice(0, 200),
      sources: inputs.map(sourceName),
      licence: options.licence ?? 'unknown',
      shardBytes,
      pieceBytes: PIECE_BYTES,
      validationFraction: fraction,
      documents: dealer.documents,
      bytes,
      shards,
    };
    const manifestBytes = new TextEncoder().encode(`${JSON.stringify(manifest, null, 2)}\n`);
    const { hash } = await parseManifest(manifestBytes, manifestPath); // our own output, checked as a reader would
    const temp = join(outDir, `.${MANIFEST_FILE}.partial`);
    state.created.push(temp);
    await writeFile(temp, manifestBytes).catch((error) => {
      throw diskFullOr(error, state);
    });
    await rename(temp, join(outDir, MANIFEST_FILE));
    await removeStaleShards(outDir, new Set(shards.map((shard) => shard.file)));
    return {
      shards: shards.length,
      bytes,
      validationShards: validation.entries.length,
      manifest: manifestPath,
      hash,
      documents: dealer.documents,
      skippedLines: reader.skippedLines,
    };
  } catch (error) {
    await train.abandon();
    await validation.abandon();
    await Promise.all(state.created.map((path) => rm(path, { force: true })));
    throw error;
  }
}

/** With overwrite: shards of the dataset replaced that the new one does not reuse. */
async function removeStaleShards(outDir: string, keep: Set<string>) {
  for (const name of await readdir(outDir)) {
    if (SHARD_NAME.test(name) && !keep.has(name)) await rm(join(outDir, name), { force: true });
  }
}
