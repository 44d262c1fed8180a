import { describe, expect, it } from 'vitest';
import { PRESETS, presetConfig, validateConfig } from './config.ts';
import { initParameters } from './init.ts';
import { blockRange, buildLayout, GPU_ALIGN_FLOATS, padForGpu, tensor, unpadFromGpu, views } from './layout.ts';

describe('presets', () => {
  it('have the parameter counts their names promise', () => {
    const count = (name: keyof typeof PRESETS) => buildLayout(PRESETS[name]).size;
    expect(count('nano')).toBeGreaterThan(80_000);
    expect(count('nano')).toBeLessThan(200_000);
    expect(count('tiny')).toBeGreaterThan(0.7e6);
    expect(count('tiny')).toBeLessThan(1.5e6);
    expect(count('small')).toBeGreaterThan(8e6);
    expect(count('small')).toBeLessThan(13e6);
    expect(count('base')).toBeGreaterThan(40e6);
    expect(count('base')).toBeLessThan(60e6);
    expect(count('gpt2')).toBe(86_039_040); // GPT-2 small's 124M less its 50,257-token embedding
  });

  it('reject unknown names and impossible shapes with one-line errors', () => {
    expect(() => presetConfig('huge')).toThrow(/Unknown preset "huge": choose one of nano, tiny, small, base, gpt2/);
    expect(() => validateConfig({ ...PRESETS.nano, nHead: 3 })).toThrow(/not divisible by n_head 3/);
    expect(() => validateConfig({ ...PRESETS.nano, nLayer: 0 })).toThrow(/nLayer must be a positive integer/);
  });
});

describe('buildLayout', () => {
  const layout = buildLayout(PRESETS.nano);
  const C = PRESETS.nano.nEmbd;

  it('lists nanoGPT names and [out, in] shapes, consecutive in the logical vector', () => {
    expect(layout.tensors[0]).toMatchObject({
      name: 'transformer.wte.weight',
      shape: [256, C],
      offset: 0,
      decay: true,
    });
    expect(tensor(layout, 'transformer.h.1.attn.c_attn.weight').shape).toEqual([3 * C, C]);
    expect(tensor(layout, 'transformer.h.0.mlp.c_proj.weight').shape).toEqual([C, 4 * C]);
    expect(tensor(layout, 'transformer.h.0.mlp.c_fc.bias')).toMatchObject({ shape: [4 * C], decay: false, block: 0 });
    expect(layout.tensors.at(-1)?.name).toBe('transformer.ln_f.bias');
    let offset = 0;
    for (const t of layout.tensors) {
      expect(t.offset).toBe(offset);
      offset += t.size;
    }
    expect(layout.size).toBe(offset);
  });

  it('aligns every GPU offset to 256 bytes', () => {
    for (const t of layout.tensors) expect(t.paddedOffset % GPU_ALIGN_FLOATS).toBe(0);
    expect(layout.paddedSize).toBeGreaterThanOrEqual(layout.size);
  });

  it('exposes contiguous block ranges for fragments', () => {
    const [start0, end0] = blockRange(layout, 0);
    const [start1, end1] = blockRange(layout, 1);
    expect(start0).toBe(tensor(layout, 'transformer.h.0.ln_1.weight').offset);
    expect(end0).toBe(start1);
    expect(end1).toBe(tensor(layout, 'transformer.ln_f.weight').offset);
    expect(() => blockRange(layout, 2)).toThrow(/No block 2/);
  });

  it('round-trips between logical and padded order', () => {
    const params = initParameters(layout, 1);
    expect(unpadFromGpu(layout, padForGpu(layout, params))).toEqual(params);
    expect(
      views(layout, params)
        .get('transformer.ln_f.weight')
        ?.every((x) => x === 1),
    ).toBe(true);
  });
});

describe('initParameters', () => {
  const layout = buildLayout(PRESETS.tiny);
  const params = initParameters(layout, 42);
  const std = (name: string) => {
    const v = views(layout, params).get(name) as Float32Array;
    return Math.sqrt(v.reduce((s, x) => s + x * x, 0) / v.length);
  };

  it('is GPT-2 style: N(0, 0.02), residual projections scaled by 1/√(2·n_layer)', () => {
    expect(std('transformer.wte.weight')).toBeCloseTo(0.02, 3);
    expect(std('transformer.h.0.attn.c_attn.weight')).toBeCloseTo(0.02, 3);
    expect(std('transformer.h.3.mlp.c_proj.weight')).toBeCloseTo(0.02 / Math.sqrt(8), 3);
    expect(std('transformer.h.2.attn.c_attn.bias')).toBe(0);
    expect(std('transformer.h.2.ln_2.weight')).toBe(1);
  });

  it('is the same for the same seed and different for another', () => {
    expect(initParameters(layout, 42)).toEqual(params);
    expect(initParameters(layout, 43)).not.toEqual(params);
  });
});
