import { corpusFingerprint, MOBY_DICK_FINGERPRINT } from '@shoal/data';
import { RUN_OPTION_DEFAULTS } from '@shoal/room/run-options';
import { describe, expect, it } from 'vitest';
import { checkUploadedText, roomConfigOf, textNameOf } from './host-config.ts';

describe('the room form: its text and its run config', () => {
  it('names the text: Moby Dick by default, an upload by its file name and fingerprint', () => {
    expect(roomConfigOf(RUN_OPTION_DEFAULTS).data).toEqual({
      corpus: 'moby-dick',
      seed: 1,
      fingerprint: MOBY_DICK_FINGERPRINT,
    });
    const bytes = new TextEncoder().encode('It was the best of times. '.repeat(100));
    const config = roomConfigOf({ ...RUN_OPTION_DEFAULTS, seq: 32 }, undefined, { name: 'dickens.txt', bytes });
    expect(config.data).toEqual({ corpus: 'dickens.txt', seed: 1, fingerprint: corpusFingerprint(bytes) });
    // too small for the sequence: the form says how large the text must be
    expect(() =>
      roomConfigOf(RUN_OPTION_DEFAULTS, undefined, { name: 'dickens.txt', bytes: bytes.subarray(0, 300) }),
    ).toThrow(
      /^dickens\.txt is too short: 300 bytes\. The model reads 64-byte stretches of text.*needs at least [\d,]+ bytes\. Choose a longer text, or a shorter sequence length under Advanced\.$/,
    );
    expect(textNameOf('../etc/passwd')).toBe('.._etc_passwd');
    expect(textNameOf('moby-dick')).toBe('uploaded.txt');
    expect(textNameOf('  \u0007 ')).toBe('uploaded.txt');
  });

  it('refuses an upload that is empty, too large, or not text', () => {
    const text = (bytes: Uint8Array) => checkUploadedText({ name: 'f.txt', bytes });
    expect(text(new TextEncoder().encode('plain words'))).toBeUndefined();
    expect(text(new Uint8Array(0))).toMatch(/f\.txt is empty/);
    expect(text(Uint8Array.of(0x50, 0x4b, 0x03, 0x04, 0))).toMatch(/NUL bytes/);
    expect(text(Uint8Array.of(0x41, 0xff, 0x41))).toMatch(/not UTF-8/);
    expect(text(new Uint8Array(65 * 1024 * 1024).fill(0x61))).toMatch(/at most 64 MiB/);
  });

  it('names a packed dataset by its manifest and URL, without a text fingerprint; no pipeline on it', () => {
    const ref = {
      manifest: 'a'.repeat(64),
      url: '/datasets/words/',
      trainShards: 9,
      validationShards: 1,
      trainBytes: 9 * 65_536,
    };
    const config = roomConfigOf(RUN_OPTION_DEFAULTS, undefined, undefined, { name: 'words', ref });
    expect(config.data).toEqual({ corpus: 'words', seed: 1, dataset: ref });
    expect(() =>
      roomConfigOf({ ...RUN_OPTION_DEFAULTS, pipelineStages: 2 }, undefined, undefined, { name: 'words', ref }),
    ).toThrow(/pipeline-parallel room cannot train on a packed dataset/);
  });
});
