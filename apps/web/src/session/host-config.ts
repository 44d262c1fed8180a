/**
 * The dashboard's room form beyond the run options (@shoal/room/run-options defines those, their
 * defaults, ranges and URL query): the text a host uploads, and the room's run config from both.
 * Pure: checked without the DOM.
 */
import { checkCorpusSize, corpusFingerprint, MOBY_DICK_FINGERPRINT } from '@shoal/data';
import type { GptConfig } from '@shoal/model';
import { type DatasetRef, MAX_CORPUS_BYTES, type RunConfig } from '@shoal/protocol';
import { type RunOptions, runConfigOf } from '@shoal/room/run-options';

/** A text the host uploads for the room: its file name and bytes. */
export interface UploadedText {
  name: string;
  bytes: Uint8Array;
}

/** Room texts are file names a person reads: printable, without path separators. */
export function textNameOf(fileName: string): string {
  const printable = [...fileName].filter((c) => (c.codePointAt(0) as number) >= 0x20 && c !== '\u007f').join('');
  const name = printable.replace(/[\\/]/g, '_').trim().slice(0, 200);
  return name === '' || name === 'moby-dick' ? 'uploaded.txt' : name;
}

/**
 * Checks a file the host picked as the room's text: not empty, at most MAX_CORPUS_BYTES, UTF-8
 * text (the model reads bytes, but a binary file is surely the wrong file), and, with the form's
 * sequence length, large enough for one training and one validation window. The error says why.
 */
export function checkUploadedText(text: UploadedText, seqLen?: number): string | undefined {
  const { name, bytes } = text;
  if (bytes.length === 0) return `${name} is empty.`;
  if (bytes.length > MAX_CORPUS_BYTES) {
    return `${name} is ${(bytes.length / 1e6).toFixed(1)} MB; a room's text is at most ${MAX_CORPUS_BYTES / 1024 / 1024} MiB.`;
  }
  if (bytes.includes(0)) return `${name} holds NUL bytes: it does not look like a text file.`;
  try {
    new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    return `${name} is not UTF-8 text.`;
  }
  try {
    checkCorpusSize(bytes.length, name, seqLen === undefined ? {} : { seqLen });
  } catch (error) {
    return tooShortText(name, bytes.length, seqLen, (error as Error).message);
  }
  return undefined;
}

/**
 * A text too short for the sequence length, in words a person acts on: how long it is, how long
 * it must be (the size check's figure), and what to change.
 */
export function tooShortText(name: string, length: number, seqLen: number | undefined, message: string): string {
  const needed = /at least (\d+) bytes/.exec(message)?.[1];
  if (seqLen === undefined || needed === undefined) return `${message}.`;
  return (
    `${name} is too short: ${length.toLocaleString('en-US')} bytes. The model reads ${seqLen}-byte stretches of ` +
    'text, and both its training part and the last 10% held out for validation must hold one, so the text needs at ' +
    `least ${Number(needed).toLocaleString('en-US')} bytes. Choose a longer text, or a shorter sequence length under Advanced.`
  );
}

/** A packed dataset the host opened for the room: its manifest's name and the room's reference to it. */
export interface RoomDataset {
  name: string;
  ref: DatasetRef;
}

/**
 * The run config of the form; `model` (a checkpoint's) replaces the preset's, `text` (an upload)
 * or `dataset` (a packed one) replaces Moby Dick. Throws with a message for a person when the
 * combination does not fit (P > n_layer, seq > block size, a text too small for the sequence, a
 * pipeline on a dataset).
 */
export function roomConfigOf(
  values: RunOptions,
  model?: GptConfig,
  text?: UploadedText,
  dataset?: RoomDataset,
): RunConfig {
  if (dataset) {
    const config = runConfigOf(values, { model, corpus: dataset.name });
    if (config.pipeline) throw new Error('A pipeline-parallel room cannot train on a packed dataset yet.');
    config.data.dataset = dataset.ref;
    return config;
  }
  if (text) {
    const problem = checkUploadedText(text, values.seq);
    if (problem) throw new Error(problem);
  }
  const config = runConfigOf(values, { model, corpus: text ? textNameOf(text.name) : 'moby-dick' });
  config.data.fingerprint = text ? corpusFingerprint(text.bytes) : MOBY_DICK_FINGERPRINT;
  return config;
}
