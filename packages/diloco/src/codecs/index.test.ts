import { describe, expect, it } from 'vitest';
import { CODEC_NAMES, createCodec, isCodecName } from './index.ts';

describe('createCodec', () => {
  it('builds every codec by name, with its block size', () => {
    for (const name of CODEC_NAMES) {
      const codec = createCodec(name, { blockSize: 128 });
      expect(codec.name).toBe(name);
      expect(codec.blockSize).toBe(name === 'fp32' || name === 'bf16' ? 1 : 128);
    }
    expect(createCodec('int4').blockSize).toBe(64);
  });

  it('rejects unknown names and unusable block sizes', () => {
    expect(isCodecName('fp16')).toBe(false);
    expect(() => createCodec('fp16')).toThrow('Unknown codec "fp16": choose one of fp32, bf16, int8, int4, fp4');
    expect(() => createCodec('int4', { blockSize: 63 })).toThrow(/even integer from 2 to 65536, got 63/);
    expect(() => createCodec('fp4', { blockSize: 0 })).toThrow(RangeError);
  });
});
