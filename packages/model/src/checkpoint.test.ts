import { describe, expect, it } from 'vitest';
import { decodeState, decodeWeights, encodeState, encodeWeights } from './checkpoint.ts';
import { PRESETS } from './config.ts';
import { initParameters } from './init.ts';
import { buildLayout } from './layout.ts';
import { readSafetensors, writeSafetensors } from './safetensors.ts';

const layout = buildLayout(PRESETS.nano);
const params = initParameters(layout, 7);
const namedTensors = () =>
  layout.tensors.map((t) => ({ name: t.name, shape: t.shape, data: params.subarray(t.offset, t.offset + t.size) }));

/** Rebuilds a file from a mutated header and the original data bytes. */
// biome-ignore lint/suspicious/noExplicitAny: the tests edit arbitrary header fields
function withHeader(bytes: Uint8Array, edit: (header: Record<string, any>) => void): Uint8Array {
  const length = Number(new DataView(bytes.buffer).getBigUint64(0, true));
  const header = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + length)));
  edit(header);
  const json = new TextEncoder().encode(JSON.stringify(header));
  const out = new Uint8Array(8 + json.length + bytes.length - 8 - length);
  new DataView(out.buffer).setBigUint64(0, BigInt(json.length), true);
  out.set(json, 8);
  out.set(bytes.subarray(8 + length), 8 + json.length);
  return out;
}

describe('weights checkpoint', () => {
  const bytes = encodeWeights(layout, params);

  it('round-trips exactly, with the config in __metadata__ as strings', () => {
    const { config, params: loaded } = decodeWeights(bytes);
    expect(config).toEqual(PRESETS.nano);
    expect(loaded).toEqual(params);
    const { metadata } = readSafetensors(bytes);
    expect(metadata).toMatchObject({ n_layer: '2', n_head: '4', n_embd: '64', block_size: '64', vocab_size: '256' });
    // Data starts 8-byte aligned.
    expect(Number(new DataView(bytes.buffer).getBigUint64(0, true)) % 8).toBe(0);
  });

  it('loads a nanoGPT-style file: tied lm_head, attn.bias mask buffers, metadata without format', () => {
    const tensors = layout.tensors.map((t) => ({
      name: t.name,
      shape: t.shape,
      data: params.subarray(t.offset, t.offset + t.size),
    }));
    const wte = tensors[0] as (typeof tensors)[0];
    const mask = { name: 'transformer.h.0.attn.bias', shape: [1, 1, 64, 64], data: new Float32Array(64 * 64) };
    const file = writeSafetensors([...tensors, { ...wte, name: 'lm_head.weight' }, mask], { n_head: '4' });
    expect(decodeWeights(file).params).toEqual(params);
  });

  const cases: [string, () => Uint8Array, RegExp][] = [
    ['a truncated file', () => bytes.subarray(0, bytes.length - 10), /lie outside the/],
    ['a header that lies about its length', () => bytes.subarray(0, 100), /exceeds the file|not valid JSON/],
    ['a file too short for a header', () => bytes.subarray(0, 5), /too short/],
    [
      'a missing tensor',
      () => withHeader(bytes, (h) => delete h['transformer.h.1.ln_2.bias']),
      /missing tensor transformer\.h\.1\.ln_2\.bias/,
    ],
    [
      'an extra tensor',
      () =>
        writeSafetensors(
          [...namedTensors(), { name: 'transformer.h.9.ln_1.weight', shape: [64], data: new Float32Array(64) }],
          { n_head: '4' },
        ),
      /unexpected tensor transformer\.h\.9/,
    ],
    [
      'a mis-shaped tensor',
      () =>
        withHeader(bytes, (h) => {
          h['transformer.h.0.attn.c_proj.weight'].shape = [32, 128];
        }),
      /shape \[32,128\], expected \[64,64\]/,
    ],
    [
      'a non-F32 dtype',
      () =>
        withHeader(bytes, (h) => {
          h['transformer.ln_f.weight'].dtype = 'F16';
        }),
      /dtype F16, expected F32/,
    ],
    [
      'offsets that disagree with the shape',
      () =>
        withHeader(bytes, (h) => {
          h['transformer.ln_f.bias'].data_offsets[1] -= 4;
        }),
      /needs 256 bytes, data_offsets give 252/,
    ],
    [
      'overlapping tensors',
      () =>
        withHeader(bytes, (h) => {
          h['transformer.ln_f.bias'].data_offsets = h['transformer.ln_f.weight'].data_offsets;
        }),
      /overlaps/,
    ],
    [
      'an untied lm_head',
      () =>
        writeSafetensors(
          [
            { name: 'lm_head.weight', shape: [256, 64], data: new Float32Array(256 * 64).fill(1) },
            ...layout.tensors.map((t) => ({
              name: t.name,
              shape: t.shape,
              data: params.subarray(t.offset, t.offset + t.size),
            })),
          ],
          { n_head: '4' },
        ),
      /only tied heads/,
    ],
    [
      'no n_head anywhere',
      () =>
        withHeader(bytes, (h) => {
          delete h.__metadata__.n_head;
        }),
      /no n_head/,
    ],
    [
      'a bad metadata value',
      () =>
        withHeader(bytes, (h) => {
          h.__metadata__.n_layer = 'two';
        }),
      /n_layer = "two" is not a positive integer/,
    ],
    [
      'a header that is not JSON',
      () => {
        const b = bytes.slice();
        b[9] = 0x7b;
        b[10] = 0x7b;
        return b;
      },
      /not valid JSON/,
    ],
  ];
  for (const [what, make, message] of cases) {
    it(`rejects ${what} with a one-line error`, () => {
      expect(() => decodeWeights(make())).toThrow(message);
      try {
        decodeWeights(make());
      } catch (error) {
        expect((error as Error).name).toBe('CheckpointError');
        expect((error as Error).message).not.toContain('\n');
      }
    });
  }
});

describe('run state checkpoint', () => {
  const m = new Float32Array(layout.size).fill(0.5);
  const v = new Float32Array(layout.size).fill(0.25);
  const state = { step: 12, tokens: 12_288, sampler: { drawn: 12 }, train: { lr: 1e-3 } };

  it('round-trips moments and counters', () => {
    const decoded = decodeState(encodeState(layout, { 'adamw.m': m, 'adamw.v': v }, state), layout, [
      'adamw.m',
      'adamw.v',
    ]);
    expect(decoded.vectors['adamw.m']).toEqual(m);
    expect(decoded.state).toEqual(state);
  });

  it('refuses state written for another model or missing a vector', () => {
    const other = buildLayout(PRESETS.tiny);
    const bytes = encodeState(layout, { 'adamw.m': m, 'adamw.v': v }, state);
    expect(() => decodeState(bytes, other, ['adamw.m'])).toThrow(/written for n_layer=2, the weights have 4/);
    expect(() => decodeState(bytes, layout, ['outer.momentum'])).toThrow(/run state has no outer.momentum/);
  });
});
