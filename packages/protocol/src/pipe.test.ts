import { describe, expect, it } from 'vitest';
import type { PipeMessage } from './messages.ts';
import { SAMPLES } from './test-fixtures.ts';
import { createWireCodec, WireEncodeError } from './wire.ts';

const codec = await createWireCodec();
const sample = SAMPLES.pipe as PipeMessage;

describe('pipe messages', () => {
  it('carry exactly the payload their body implies', () => {
    expect(codec.decode(codec.encode(sample, 1)).ok).toBe(true);
    const short = { ...sample, payload: sample.payload.subarray(1) };
    expect(() => codec.encode(short, 1)).toThrow(WireEncodeError);
    expect(() => codec.encode(short, 1)).toThrow(/implies 20 bytes, got 19/);
    const f32 = { ...sample, dtype: 'f32' as const, payload: new Uint8Array(6 * 4 + 2 * 4) };
    expect(codec.decode(codec.encode(f32, 1)).ok).toBe(true);
  });

  it('refuse a norm without its sum, a sum on another kind, and targets off activations', () => {
    const norm = { ...sample, what: 'norm' as const, values: 0, targets: 0, payload: new Uint8Array(0) };
    expect(() => codec.encode(norm, 1)).toThrow(/sumSquares/);
    expect(codec.decode(codec.encode({ ...norm, sumSquares: 2.5 }, 1)).ok).toBe(true);
    expect(() => codec.encode({ ...sample, sumSquares: 1 }, 1)).toThrow(/sumSquares/);
    expect(() => codec.encode({ ...sample, what: 'grad' }, 1)).toThrow(/only activations carry targets/);
    expect(() => codec.encode({ ...sample, micro: 5000 }, 1)).toThrow(WireEncodeError);
  });
});
