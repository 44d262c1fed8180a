import { describe, expect, it } from 'vitest';
import { lendableMemory } from './volunteer-runtime.ts';

describe('lendableMemory', () => {
  it("lends four of a WebGPU device's largest buffers", () => {
    const device = { limits: { maxBufferSize: 2 ** 30 } } as GPUDevice;
    expect(lendableMemory(device)).toBe(4 * 2 ** 30);
  });

  it('lends half the reported device memory to the CPU engine, within WebAssembly’s 4 GiB', () => {
    expect(lendableMemory(null, 2)).toBe(2 ** 30);
    expect(lendableMemory(null, 0.5)).toBe(2 ** 28);
    expect(lendableMemory(null, 16)).toBe(4 * 2 ** 30);
    expect(lendableMemory(null)).toBe(4 * 2 ** 30);
  });
});
