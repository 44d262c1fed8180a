import { describe, expect, it } from 'vitest';
import { useGpu } from '../test-gpu.ts';
import { gateMatmulPath } from './gate.ts';
import { MatmulKernels } from './matmul.ts';

// The gate that any alternative matmul path (reduced precision, subgroup matrices) must pass on
// an adapter before use: a correct kernel passes, deliberately wrong ones are refused.
const gpu = useGpu();

describe('gateMatmulPath', () => {
  it('accepts a correct kernel and refuses deliberately wrong ones against the f32 path', async () => {
    const { device } = gpu();
    const reference = await MatmulKernels.create(device);
    const correct = await MatmulKernels.create(device, { kernel: 'register' });
    // One of the 64 products of the micro-tile dropped: every 64th output misses its k terms.
    const dropped = await MatmulKernels.create(device, {
      kernel: 'register',
      transformSource: (code) => code.replace('acc[15] += a1.w * b1;', ''),
    });
    // Every product 0.5% too large in one slot: wrong by more than f32 rounding, less than bf16's.
    const scaled = await MatmulKernels.create(device, {
      kernel: 'register',
      transformSource: (code) => code.replace('acc[0] += a0.x * b0;', 'acc[0] += a0.x * b0 * 1.005;'),
    });
    try {
      const ok = await gateMatmulPath(device, correct, reference, { tolerance: 1e-5 });
      expect(ok.accepted, ok.message).toBe(true);
      const wrong = await gateMatmulPath(device, dropped, reference, { tolerance: 1e-2 });
      expect(wrong.accepted, wrong.message).toBe(false);
      expect(wrong.message).toMatch(/refused/);
      const slightly = await gateMatmulPath(device, scaled, reference, { tolerance: 1e-5 });
      expect(slightly.accepted, slightly.message).toBe(false);
      // The tolerance decides: a reduced-precision path may be allowed this much.
      const loose = await gateMatmulPath(device, scaled, reference, { tolerance: 1e-2 });
      expect(loose.accepted, loose.message).toBe(true);
    } finally {
      for (const family of [reference, correct, dropped, scaled]) family.destroy();
    }
  }, 300_000); // 24 pipelines; a cold compilation on lavapipe (LLVM) takes tens of seconds
});
