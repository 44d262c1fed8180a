import { compareArrays, mulberry32 } from '@shoal/gpu';
import { describe, expect, it } from 'vitest';
import type { GptConfig } from '../config.ts';
import { initParameters } from '../init.ts';
import { CpuGpt } from './gpt.ts';

// Small enough for finite differences in float64, big enough to exercise every path:
// two layers, two heads, T not a power of two, a vocabulary smaller than 256.
const config: GptConfig = { nLayer: 2, nHead: 2, nEmbd: 8, blockSize: 8, vocabSize: 11 };
const B = 2;
const T = 5;

function batch(seed: number) {
  const next = mulberry32(seed);
  const tokens = () => Int32Array.from({ length: B * T }, () => Math.floor(next() * config.vocabSize));
  return { inputs: tokens(), targets: tokens() };
}

/** Params with non-trivial LayerNorm weights and biases, so their gradients are exercised too. */
function params64(seed: number): Float64Array {
  const model = new CpuGpt<Float64Array>(config, B, T, Float64Array);
  const params = Float64Array.from(initParameters(model.layout, seed));
  const next = mulberry32(seed + 1);
  for (const t of model.layout.tensors) {
    // Larger weights than GPT-2's 0.02 make the loss sensitive enough for finite differences.
    for (let i = t.offset; i < t.offset + t.size; i++) params[i] = (params[i] as number) * 10 + 0.1 * (next() - 0.5);
  }
  return params;
}

describe('CpuGpt', () => {
  const { inputs, targets } = batch(3);

  it('starts near ln(V) loss with GPT-2 init', () => {
    const model = new CpuGpt<Float64Array>(config, B, T, Float64Array);
    const loss = model.forward(Float64Array.from(initParameters(model.layout, 1)), inputs, targets);
    expect(Math.abs(loss - Math.log(config.vocabSize))).toBeLessThan(0.05);
  });

  it('has gradients that match central finite differences in float64, for every tensor', () => {
    const model = new CpuGpt<Float64Array>(config, B, T, Float64Array);
    const params = params64(5);
    model.forward(params, inputs, targets);
    const grads = new Float64Array(model.layout.size);
    model.backward(params, grads);

    const h = 1e-6;
    const next = mulberry32(9);
    for (const t of model.layout.tensors) {
      // A few coordinates per tensor (all of them for small ones).
      const picks =
        t.size <= 8 ? [...Array(t.size).keys()] : Array.from({ length: 6 }, () => Math.floor(next() * t.size));
      for (const k of picks) {
        const i = t.offset + k;
        const saved = params[i] as number;
        params[i] = saved + h;
        const up = model.forward(params, inputs, targets);
        params[i] = saved - h;
        const down = model.forward(params, inputs, targets);
        params[i] = saved;
        const numeric = (up - down) / (2 * h);
        const analytic = grads[i] as number;
        expect(Math.abs(analytic - numeric), `${t.name}[${k}]: analytic ${analytic}, numeric ${numeric}`).toBeLessThan(
          1e-7 + 1e-5 * Math.abs(numeric),
        );
      }
    }
  });

  it('in float32 agrees with the float64 reference (loss 1e-5, gradients 1e-3 of each tensor max)', () => {
    const p64 = params64(11);
    const p32 = Float32Array.from(p64);
    const model64 = new CpuGpt<Float64Array>(config, B, T, Float64Array);
    const model32 = new CpuGpt<Float32Array>(config, B, T, Float32Array);
    const loss64 = model64.forward(Float64Array.from(p32), inputs, targets);
    const loss32 = model32.forward(p32, inputs, targets);
    expect(Math.abs(loss32 - loss64) / loss64).toBeLessThan(1e-5);
    const g64 = new Float64Array(model64.layout.size);
    const g32 = new Float32Array(model32.layout.size);
    model64.backward(Float64Array.from(p32), g64);
    model32.backward(p32, g32);
    for (const t of model64.layout.tensors) {
      const ref = g64.subarray(t.offset, t.offset + t.size);
      const scale = ref.reduce((m, x) => Math.max(m, Math.abs(x)), 0);
      const result = compareArrays(g32.subarray(t.offset, t.offset + t.size), ref, { atol: 1e-3 * scale, rtol: 0 });
      expect(result.ok, `${t.name}: ${result.message}`).toBe(true);
    }
  });

  it('rejects tokens outside the vocabulary and sequences longer than block_size', () => {
    const model = new CpuGpt<Float32Array>(config, B, T, Float32Array);
    const params = initParameters(model.layout, 1);
    const bad = inputs.slice();
    bad[3] = config.vocabSize;
    expect(() => model.forward(params, bad, targets)).toThrow(/token 11 at position 3 is outside \[0, 11\)/);
    expect(() => new CpuGpt(config, 1, 9, Float32Array)).toThrow(/sequence length 9 exceeds block_size 8/);
    expect(() => model.backward(params, new Float32Array(model.layout.size))).toThrow(/needs a forward pass/);
  });
});

describe('CpuGpt float32 backends', () => {
  // A shape every WebAssembly SIMD kernel takes (T, head size and C multiples of 4, V of 16); the
  // shape above sends attention (T = 5) and the cross-entropy (V = 11) to the JS references.
  const simdConfig: GptConfig = { nLayer: 2, nHead: 2, nEmbd: 16, blockSize: 8, vocabSize: 32 };
  const [B, T] = [2, 8];
  const next = mulberry32(21);
  const tokens = () => Int32Array.from({ length: B * T }, () => Math.floor(next() * simdConfig.vocabSize));
  const [inputs, targets] = [tokens(), tokens()];

  for (const simd of [true, false]) {
    it(`${simd ? 'WebAssembly SIMD' : 'JS'} agrees with the float64 reference (loss 1e-5, gradients 1e-3 of each tensor max)`, () => {
      const model32 = new CpuGpt<Float32Array>(simdConfig, B, T, Float32Array, { simd });
      expect(model32.backendName).toBe(simd ? 'wasm-simd' : 'js');
      const model64 = new CpuGpt<Float64Array>(simdConfig, B, T, Float64Array);
      const p32 = initParameters(model32.layout, 13);
      const next = mulberry32(14);
      for (let i = 0; i < p32.length; i++) p32[i] = (p32[i] as number) * 10 + 0.1 * (next() - 0.5);
      const p64 = Float64Array.from(p32);
      const loss64 = model64.forward(p64, inputs, targets);
      const loss32 = model32.forward(p32, inputs, targets);
      expect(Math.abs(loss32 - loss64) / loss64).toBeLessThan(1e-5);
      const [g32, g64] = [new Float32Array(model32.layout.size), new Float64Array(model64.layout.size)];
      model32.backward(p32, g32);
      model64.backward(p64, g64);
      for (const t of model64.layout.tensors) {
        const ref = g64.subarray(t.offset, t.offset + t.size);
        const scale = ref.reduce((m, x) => Math.max(m, Math.abs(x)), 0);
        const result = compareArrays(g32.subarray(t.offset, t.offset + t.size), ref, { atol: 1e-3 * scale, rtol: 0 });
        expect(result.ok, `${t.name}: ${result.message}`).toBe(true);
      }
    });
  }

  it('gives bit-identical results for a batch whatever ran before (no state leaks between steps)', () => {
    const model = new CpuGpt<Float32Array>(simdConfig, B, T, Float32Array);
    const params = initParameters(model.layout, 3);
    const run = (x: Int32Array, y: Int32Array) => {
      const loss = model.forward(params, x, y);
      const grads = new Float32Array(model.layout.size);
      model.backward(params, grads);
      return { loss, grads: Array.from(grads) };
    };
    const first = run(inputs, targets);
    run(targets, inputs); // another batch in between
    const again = run(inputs, targets);
    expect(again.loss).toBe(first.loss);
    expect(again.grads).toEqual(first.grads);
  });
});
