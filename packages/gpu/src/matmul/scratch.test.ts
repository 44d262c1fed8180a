import { describe, expect, it } from 'vitest';
import { SharedScratch } from './scratch.ts';

/** A device that only makes buffers, counting the live ones. */
function fakeDevice() {
  const live = new Set<{ size: number }>();
  const device = {
    createBuffer({ size }: { size: number }) {
      const buffer = { size, destroy: () => live.delete(buffer) };
      live.add(buffer);
      return buffer;
    },
  } as unknown as GPUDevice;
  return { device, live };
}

describe('SharedScratch', () => {
  it('shares one buffer between leases and grows by doubling up to the limit', () => {
    const { device, live } = fakeDevice();
    const scratch = new SharedScratch(device, 'Test.scratch', 1000);
    const a = scratch.acquire(100);
    const b = scratch.acquire(60);
    expect(b.buffer).toBe(a.buffer);
    const c = scratch.acquire(150); // doubles to 200; a and b still hold the old one
    expect(c.buffer.size).toBe(200);
    expect(live.size).toBe(2);
    a.release();
    b.release();
    b.release(); // twice is harmless
    expect(live.size).toBe(1); // the replaced buffer went with its last lease
    expect(scratch.acquire(900).buffer.size).toBe(900); // 2·200 < 900 ≤ limit: as asked
    expect(scratch.acquire(1500).buffer.size).toBe(1500); // past the limit: no doubling
    scratch.destroy();
    expect(live.size).toBe(0);
  });
});
