import { describe, expect, it } from 'vitest';
import { compareArrays } from './compare.ts';

describe('compareArrays', () => {
  it('accepts values within atol + rtol·|ref|', () => {
    expect(compareArrays([1, 100, 0], [1.00001, 100.009, 0.000009], { atol: 1e-5, rtol: 1e-4 }).ok).toBe(true);
  });

  it('names the first mismatches and the worst one', () => {
    const result = compareArrays([1, 2, 3.5, 4, 10], [1, 2.1, 3, 4, 10], { atol: 0, rtol: 1e-3 });
    expect(result.ok).toBe(false);
    expect(result.failures).toBe(2);
    expect(result.worst?.index).toBe(2);
    expect(result.message).toContain('[1] got 2 want 2.1');
    expect(result.message).toContain('worst: [2] got 3.5 want 3');
  });

  it('treats NaN and length differences as failures', () => {
    expect(compareArrays([Number.NaN], [0]).ok).toBe(false);
    expect(compareArrays([0], [Number.NaN]).ok).toBe(false);
    expect(compareArrays([1, 2], [1]).message).toBe('length 2, expected 1');
  });
});
