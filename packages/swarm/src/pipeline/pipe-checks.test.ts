import { createRunConfig } from '@shoal/room/run-config';
import { describe, expect, it } from 'vitest';
import { budgetBytes, sendersOf } from './pipe-checks.ts';
import { firstNonFinite, writeValues } from './wire-values.ts';

describe('firstNonFinite', () => {
  const cases: [string, number[], number][] = [
    ['finite, near the extremes (bf16 rounds 3.4e38 up to ∞)', [0, -0, 1e-45, -3e38, 3e38, 1.17e-38], -1],
    ['NaN', [1, 2, Number.NaN, 4], 2],
    ['+∞', [Number.POSITIVE_INFINITY], 0],
    ['−∞ after finite ones', [1, 2, 3, Number.NEGATIVE_INFINITY], 3],
  ];
  for (const dtype of ['f32', 'bf16'] as const) {
    it.each(cases)(`${dtype}: %s`, (_, values, index) => {
      const floats = Float32Array.from(values);
      const bytes = new Uint8Array(3 + floats.length * (dtype === 'f32' ? 4 : 2));
      writeValues(floats, dtype, bytes, 3); // at an odd offset: a payload inside a message
      expect(firstNonFinite(bytes, 3, floats.length, dtype)).toBe(index);
    });
  }
});

describe('budgetBytes', () => {
  const config = {
    ...createRunConfig({ preset: 'nano', train: { batchSize: 4, seqLen: 64 } }),
    pipeline: { stages: 2, micros: 2, schedule: '1f1b', activations: 'bf16' },
  } as const;
  it('is two steps of a kind: M micro-batches of activations or gradients, one V × C tensor', () => {
    const rows = 2 * 64; // B/M × T
    expect(budgetBytes(config, 'act')).toBe(2 * 2 * rows * (64 * 2 + 4)); // bf16 values + int32 targets
    expect(budgetBytes(config, 'grad')).toBe(2 * 2 * rows * 64 * 2);
    expect(budgetBytes(config, 'tied')).toBe(2 * 256 * 64 * 4);
    expect(budgetBytes(config, 'wte')).toBe(2 * 256 * 64 * 4);
    expect(budgetBytes(config, 'norm')).toBe(0);
  });
  it('knows who sends what', () => {
    expect(sendersOf('act', 0, 3)).toEqual([]);
    expect(sendersOf('act', 2, 3)).toEqual([1]);
    expect(sendersOf('grad', 1, 3)).toEqual([2]);
    expect(sendersOf('tied', 1, 3)).toEqual([]);
    expect(sendersOf('wte', 2, 3)).toEqual([0]);
    expect(sendersOf('norm', 1, 3)).toEqual([0, 2]);
  });
});
