import { CODEC_NAMES } from '@shoal/diloco';
import { describe, expect, it } from 'vitest';
import { CODEC_IDS, codecNameOfId } from './codec-ids.ts';

describe('the codec ids', () => {
  it('keeps the wire ids stable', () => {
    expect(CODEC_IDS).toEqual({ fp32: 0, bf16: 1, int8: 2, int4: 3, fp4: 4 });
    expect(codecNameOfId(9)).toBeUndefined();
  });

  it('numbers every codec, and names it back from its number', () => {
    for (const name of CODEC_NAMES) expect(codecNameOfId(CODEC_IDS[name])).toBe(name);
  });
});
