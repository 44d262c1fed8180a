import { corpusFingerprint, MOBY_DICK_FINGERPRINT } from '@shoal/data';
import { describe, expect, it } from 'vitest';
import {
  checkUploadedText,
  HOST_FORM_DEFAULTS,
  hostQueryOf,
  parseHostQuery,
  runConfigOf,
  textNameOf,
} from './host-config.ts';

describe('the room form and its URL query', () => {
  it('reads the CLI option names in camelCase', () => {
    const { values, errors } = parseHostQuery('?preset=tiny&innerSteps=10&fragments=4&codec=int8&outerLr=0.5&batch=8');
    expect(errors).toEqual({});
    expect(values).toMatchObject({
      preset: 'tiny',
      innerSteps: 10,
      fragments: 4,
      codec: 'int8',
      outerLr: 0.5,
      batch: 8,
    });
    expect(values.alpha).toBe(HOST_FORM_DEFAULTS.alpha);
  });

  it('reports bad values per field and keeps the defaults for them', () => {
    const { values, errors } = parseHostQuery(
      '?preset=huge&innerSteps=2.5&alpha=3&codec=zip&lr=abc&aggregation=median',
    );
    expect(Object.keys(errors).sort()).toEqual(['aggregation', 'alpha', 'codec', 'innerSteps', 'lr', 'preset']);
    expect(errors.aggregation).toMatch(/clipped-mean, trimmed-mean, mean/);
    expect(errors.innerSteps).toMatch(/whole number/);
    expect(errors.alpha).toMatch(/at most 1/);
    expect(values.preset).toBe('nano');
  });

  it('round-trips through hostQueryOf, writing only what differs from the defaults', () => {
    const { values } = parseHostQuery('?preset=nano&innerSteps=7&overlap=0');
    expect(hostQueryOf(values)).toBe('?innerSteps=7&overlap=0');
    expect(parseHostQuery(hostQueryOf(values)).values).toEqual(values);
    expect(hostQueryOf(HOST_FORM_DEFAULTS)).toBe('');
  });

  it('chooses the aggregation rule: clipped-mean unless the query names another', () => {
    expect(runConfigOf(HOST_FORM_DEFAULTS).diloco.aggregation).toEqual({ kind: 'clipped-mean' });
    const { values } = parseHostQuery('?aggregation=trimmed-mean');
    expect(runConfigOf(values).diloco.aggregation).toEqual({ kind: 'trimmed-mean' });
    expect(hostQueryOf(values)).toBe('?aggregation=trimmed-mean');
  });

  it('builds the run config, and refuses what does not fit the model', () => {
    const config = runConfigOf(parseHostQuery('?innerSteps=5&fragments=2&batch=4&seq=32&lr=0.01').values);
    expect(config.diloco).toMatchObject({
      innerSteps: 5,
      fragments: 2,
      outerLr: 0.7,
      outerMomentum: 0.9,
      codec: 'fp4',
    });
    expect(config.train).toMatchObject({ batchSize: 4, seqLen: 32, maxLr: 0.01, minLr: 0.001 });
    expect(config.model.nLayer).toBe(2);
    expect(() => runConfigOf({ ...HOST_FORM_DEFAULTS, fragments: 3 })).toThrow(
      /3 fragments exceed the model's 2 blocks/,
    );
    expect(() => runConfigOf({ ...HOST_FORM_DEFAULTS, seq: 128 })).toThrow(/block size 64/);
  });

  it('names the text: Moby Dick by default, an upload by its file name and fingerprint', () => {
    expect(runConfigOf(HOST_FORM_DEFAULTS).data).toEqual({
      corpus: 'moby-dick',
      seed: 1,
      fingerprint: MOBY_DICK_FINGERPRINT,
    });
    const bytes = new TextEncoder().encode('It was the best of times. '.repeat(100));
    const config = runConfigOf({ ...HOST_FORM_DEFAULTS, seq: 32 }, undefined, { name: 'dickens.txt', bytes });
    expect(config.data).toEqual({ corpus: 'dickens.txt', seed: 1, fingerprint: corpusFingerprint(bytes) });
    // too small for the sequence: the form says how large the text must be
    expect(() =>
      runConfigOf(HOST_FORM_DEFAULTS, undefined, { name: 'dickens.txt', bytes: bytes.subarray(0, 300) }),
    ).toThrow(/too small for seqLen 64.*at least \d+ bytes/);
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
});
