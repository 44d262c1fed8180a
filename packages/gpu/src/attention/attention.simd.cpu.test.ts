import { describe, expect, it } from 'vitest';
import { compareArrays } from '../compare.ts';
import { SimdMatmul } from '../matmul/matmul.simd.cpu.ts';
import { randomFloats } from '../random.ts';
import { WasmArena } from '../simd/arena.cpu.ts';
import { attentionBackward, attentionForward } from './attention.cpu.ts';
import { SimdAttention } from './attention.simd.cpu.ts';

// [B, T, C, NH]: T and head size multiples of 4, around the 4 × 8 gemm tile (hs 4, 12, 16, 32),
// with T = 4 (one masked vector per row) up to tiny's 128.
const shapes: [number, number, number, number][] = [
  [1, 4, 4, 1],
  [2, 12, 24, 2],
  [2, 20, 48, 4],
  [1, 64, 64, 4],
  [1, 128, 128, 4],
];

describe('SimdAttention (WebAssembly SIMD)', () => {
  it('matches the float64 reference within the GPU kernels’ tolerance', () => {
    for (const [index, [B, T, C, NH]] of shapes.entries()) {
      const sizes = { qkv: B * T * 3 * C, out: B * T * C, square: B * NH * T * T };
      const arena = WasmArena.create({
        floats: 2 * sizes.qkv + 2 * sizes.out + 4 * sizes.square + 64,
        scratchFloats: SimdAttention.scratchFloats(B, T, C, NH),
      }) as WasmArena;
      const attention = SimdAttention.create(arena, SimdMatmul.create(arena) as SimdMatmul) as SimdAttention;
      const take = (values: Float32Array) => {
        const view = arena.allocate(values.length);
        view.set(values);
        return view;
      };
      // ±2 makes the softmax peaky enough that the max shift matters (as attention.test.ts).
      const qkvValues = randomFloats(sizes.qkv, 10 + index, -2, 2);
      const doutValues = randomFloats(sizes.out, 20 + index);
      const dqkvStart = randomFloats(sizes.qkv, 30 + index); // non-zero: the backward must accumulate
      const [qkv, dout, dqkv] = [take(qkvValues), take(doutValues), take(dqkvStart)];
      const [out, preatt, att] = [
        take(randomFloats(sizes.out, 1)),
        arena.allocate(sizes.square),
        arena.allocate(sizes.square),
      ];
      const [dpreatt, datt] = [arena.allocate(sizes.square), arena.allocate(sizes.square)];
      expect(SimdAttention.supports(T, C, NH)).toBe(true);
      attention.forward(out, preatt, att, qkv, B, T, C, NH);
      attention.backward(dqkv, dpreatt, datt, dout, qkv, att, B, T, C, NH);

      const want = {
        out: new Float64Array(sizes.out),
        att: new Float64Array(sizes.square),
        dqkv: Float64Array.from(dqkvStart),
      };
      const scratch = () => new Float64Array(sizes.square);
      const qkv64 = Float64Array.from(qkvValues);
      attentionForward(want.out, scratch(), want.att, qkv64, B, T, C, NH);
      attentionBackward(want.dqkv, scratch(), scratch(), Float64Array.from(doutValues), qkv64, want.att, B, T, C, NH);
      const label = `B=${B} T=${T} C=${C} NH=${NH}`;
      for (const [name, got, expected, atol] of [
        ['out', out, want.out, 1e-5],
        ['att', att, want.att, 1e-6], // masked keys exactly 0, as the reference
        ['dqkv', dqkv, want.dqkv, 2e-6 * Math.sqrt(T) * 4], // sums over up to T rows, as attention.test.ts
      ] as const) {
        const result = compareArrays(got, expected, { atol, rtol: 1e-4 });
        expect(result.ok, `${label} ${name}: ${result.message}`).toBe(true);
      }
    }
  });

  it('declines shapes it cannot take, and refuses operands outside its arena', () => {
    expect(SimdAttention.supports(8, 16, 2)).toBe(true);
    expect(SimdAttention.supports(5, 16, 2)).toBe(false); // T
    expect(SimdAttention.supports(8, 12, 2)).toBe(false); // head size 6
    const [B, T, C, NH] = [1, 4, 8, 2];
    const arena = WasmArena.create({
      floats: 256,
      scratchFloats: SimdAttention.scratchFloats(B, T, C, NH),
    }) as WasmArena;
    const attention = SimdAttention.create(arena, SimdMatmul.create(arena) as SimdMatmul) as SimdAttention;
    const [out, square] = [arena.allocate(B * T * C), arena.allocate(B * NH * T * T)];
    expect(() => attention.forward(out, square, square, new Float32Array(B * T * 3 * C), B, T, C, NH)).toThrow(
      /must live in the arena/,
    );
  });
});
