import { describe, expect, it } from 'vitest';
import {
  ByteTextStream,
  DEFAULT_SETTINGS,
  defaultThreads,
  LIMITS,
  progressLabel,
  promptTokens,
  settingsProblem,
  transferableParams,
} from './settings.ts';

describe('settingsProblem', () => {
  it('accepts the defaults, greedy sampling and top-k 0 (all bytes)', () => {
    expect(settingsProblem(DEFAULT_SETTINGS)).toBeNull();
    expect(settingsProblem({ ...DEFAULT_SETTINGS, temperature: 0, topK: 0, maxNewTokens: 1 })).toBeNull();
  });

  it('names the first setting out of range', () => {
    expect(settingsProblem({ ...DEFAULT_SETTINGS, temperature: -0.1 })).toMatch(/^Temperature must be between 0 and 5/);
    expect(settingsProblem({ ...DEFAULT_SETTINGS, temperature: Number.NaN })).toMatch(/^Temperature/);
    expect(settingsProblem({ ...DEFAULT_SETTINGS, topK: 2.5 })).toMatch(/^Top-k must be a whole number/);
    expect(settingsProblem({ ...DEFAULT_SETTINGS, topK: 257 })).toMatch(/^Top-k/);
    expect(settingsProblem({ ...DEFAULT_SETTINGS, maxNewTokens: 0 })).toMatch(/^Max new tokens/);
    expect(settingsProblem({ ...DEFAULT_SETTINGS, maxNewTokens: LIMITS.maxNewTokens.max + 1 })).toMatch(/^Max new/);
  });
});

describe('promptTokens', () => {
  it('is the UTF-8 bytes of the prompt', () => {
    expect(promptTokens('Hi é', 256)).toEqual([72, 105, 32, 0xc3, 0xa9]);
  });

  it('starts from a newline when the prompt is empty', () => {
    expect(promptTokens('', 256)).toEqual([10]);
  });

  it('keeps the last LIMITS.promptBytes bytes of a long prompt', () => {
    const tokens = promptTokens(`${'a'.repeat(LIMITS.promptBytes)}xyz`, 256);
    expect(tokens).toHaveLength(LIMITS.promptBytes);
    expect(tokens.slice(-3)).toEqual([120, 121, 122]);
  });

  it('refuses a byte outside a smaller vocabulary, plainly', () => {
    expect(() => promptTokens('é', 128)).toThrow("the prompt has byte 195, but this model's vocabulary is 0..127");
  });
});

describe('ByteTextStream', () => {
  it('holds back a character cut between tokens until its last byte comes', () => {
    const stream = new ByteTextStream();
    const bytes = [...new TextEncoder().encode('añ€')];
    const pieces = bytes.map((b) => stream.push([b]));
    expect(pieces).toEqual(['a', '', 'ñ', '', '', '€']);
    expect(stream.end()).toBe('');
  });

  it('turns invalid bytes and an unfinished character into U+FFFD, without throwing', () => {
    const stream = new ByteTextStream();
    expect(stream.push([0xff, 0x41])).toBe('\uFFFDA');
    expect(stream.push([0xe2, 0x82])).toBe('');
    expect(stream.end()).toBe('\uFFFD');
  });
});

describe('progressLabel', () => {
  it('says what the sampler is doing', () => {
    expect(progressLabel({ phase: 'export' })).toBe('exporting model…');
    expect(progressLabel({ phase: 'load' })).toBe('loading onnxruntime…');
    expect(progressLabel({ phase: 'generate', done: 37, total: 200 })).toBe('generating 37/200');
  });
});

describe('transferableParams', () => {
  it('transfers the buffer of an array that covers all of it', () => {
    const params = new Float32Array([1, 2, 3]);
    const { params: sent, transfer } = transferableParams(params);
    expect(sent).toBe(params);
    expect(transfer).toEqual([params.buffer]);
  });

  it('copies a view into a larger buffer, so the rest stays', () => {
    const whole = new Float32Array([1, 2, 3, 4]);
    const view = whole.subarray(1, 3);
    const { params: sent, transfer } = transferableParams(view);
    expect(sent).not.toBe(view);
    expect([...sent]).toEqual([2, 3]);
    expect(transfer).toEqual([sent.buffer]);
    expect(sent.buffer.byteLength).toBe(8);
  });

  it('shares a SharedArrayBuffer instead of transferring it', () => {
    const params = new Float32Array(new SharedArrayBuffer(8));
    expect(transferableParams(params)).toEqual({ params, transfer: [] });
  });
});

describe('defaultThreads', () => {
  it('is 1 where the page is not cross-origin isolated (Node has no crossOriginIsolated)', () => {
    expect(defaultThreads()).toBe(1);
  });
});
