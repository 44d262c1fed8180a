import { describe, expect, it } from 'vitest';
import { useGpu } from '../test-gpu.ts';
import { checkMatmulShape, type MatmulCheckShape } from './check.ts';
import { gateMatmulPath } from './gate.ts';
import { MatmulKernels } from './matmul.ts';
import { chooseMatrixConfig, type MatrixKernelConfig, resolveMatrixTiles } from './matrix.ts';
import { planningLimits } from './plan.ts';

// The subgroup-matrix kernel (matmul.matrix.wgsl) with its builtins emulated, so its tiling,
// staging, edges, bias and split-K run on the software adapters, which do not offer the
// feature: f32 operands against the float64 CPU reference, f16 operands through the start-up gate
// against the f32 path (staged as f16 where the device has shader-f16, as lavapipe does; as f32
// rounded to f16 where it has not, as on SwiftShader). On a GPU with the feature the
// same file runs with the real builtins in bench:device and behind the gate in the engine.
const gpu = useGpu();

const grid: MatmulCheckShape[] = [];
for (const [iN, N] of [1, 33, 130].entries()) {
  for (const [iC, C] of [7, 64].entries()) {
    for (const [iO, OC] of [5, 132].entries()) {
      grid.push({ N, C, OC, bias: (iN + iC) % 2 === 0, accumulate: (iN + iC + iO) % 3 !== 0 });
    }
  }
}
// A vec4 layer over several tiles and slices, and split-K weight gradients (even and not).
const edges: MatmulCheckShape[] = [
  { N: 130, C: 68, OC: 196, bias: true },
  { N: 130, C: 64, OC: 5, bias: true, splitK: 3 },
  { N: 300, C: 36, OC: 20, bias: true, splitK: 4, accumulate: false },
];

// Small matrices keep the emulation cheap to compile (lavapipe's LLVM unrolls every private
// matrix loop: 3 s per pipeline at 4 × 4 × 4, 30 s at 8 × 8 × 8 with 2 × 2 per subgroup).
// The kernel is generic in the matrix shape; one test runs 8 × 8 × 8.
const emulated = (componentType: 'f32' | 'f16', extra: Partial<MatrixKernelConfig> = {}): MatrixKernelConfig => ({
  componentType,
  M: 4,
  N: 4,
  K: 4,
  emulate: true,
  subgroupTiles: [2, 2],
  ...extra,
});

async function checkAll(matrix: MatrixKernelConfig, shapes: MatmulCheckShape[], seed: number): Promise<string[]> {
  const { device } = gpu();
  const family = await MatmulKernels.create(device, { matrix });
  const failures: string[] = [];
  try {
    for (const [index, shape] of shapes.entries()) {
      for (const failure of await checkMatmulShape(device, family, shape, seed + 10 * index)) {
        failures.push(`${JSON.stringify(shape)}: ${failure}`);
      }
    }
  } finally {
    family.destroy();
  }
  return failures;
}

describe('MatmulKernels matrix (emulated subgroup matrices)', () => {
  it('with f32 operands matches the float64 CPU reference over a grid off the tile multiples', {
    timeout: 300_000,
  }, async () => {
    const failures = await checkAll(emulated('f32'), [...grid, ...edges], 5000);
    expect(failures, failures.join('\n')).toEqual([]);
  });

  it('with 8 × 8 × 8 matrices, one per subgroup, and 4 × 1 subgroups (vec4 layers)', { timeout: 300_000 }, async () => {
    const config = emulated('f32', { M: 8, N: 8, K: 8, subgroupTiles: [1, 1], subgroups: [4, 1] });
    const failures = await checkAll(
      config,
      [edges[0] as MatmulCheckShape, { N: 300, C: 36, OC: 20, bias: true, splitK: 4 }],
      5100,
    );
    expect(failures, failures.join('\n')).toEqual([]);
  });

  it('with f16 operands passes the gate at 1e-2, differs from f32 as f16 rounding does, and matches the rounding tiled kernel', {
    timeout: 300_000,
  }, async () => {
    const { device } = gpu();
    const reference = await MatmulKernels.create(device);
    const half = await MatmulKernels.create(device, { matrix: emulated('f16') });
    const rounded = await MatmulKernels.create(device, { roundOperands: 'f16' });
    try {
      const gate = await gateMatmulPath(device, half, reference, { tolerance: 1e-2 });
      expect(gate.accepted, gate.message).toBe(true);
      // Operands rounded to 11 significant bits: errors of about 1e-4–1e-3, not f32's 1e-7.
      expect(gate.worst.error).toBeGreaterThan(1e-5);
      const strict = await gateMatmulPath(device, half, reference, { tolerance: 1e-5 });
      expect(strict.accepted).toBe(false);
      // The tiled kernel rounding its operands to f16 computes what the matrix kernel does, up to
      // the order of f32 sums: the same numerics for volunteers with and without tensor cores.
      const alike = await gateMatmulPath(device, rounded, half, { tolerance: 1e-5 });
      expect(alike.accepted, alike.message).toBe(true);
    } finally {
      for (const family of [reference, half, rounded]) family.destroy();
    }
  });

  it('is refused by the gate when deliberately wrong (one right matrix reused for all)', {
    timeout: 300_000,
  }, async () => {
    const { device } = gpu();
    const reference = await MatmulKernels.create(device);
    const wrong = await MatmulKernels.create(device, {
      matrix: emulated('f32'),
      transformSource: (code) => code.replace('mma(left, right[j],', 'mma(left, right[0],'),
    });
    try {
      const gate = await gateMatmulPath(device, wrong, reference, { tolerance: 1e-2, shapes: [[128, 64, 192]] });
      expect(gate.accepted, gate.message).toBe(false);
    } finally {
      reference.destroy();
      wrong.destroy();
    }
  });

  it('without the feature, the real (not emulated) kernel is refused with the reason', async () => {
    await expect(
      MatmulKernels.create(gpu().device, { matrix: { componentType: 'f32', M: 8, N: 8, K: 8 } }),
    ).rejects.toThrow(/chromium-experimental-subgroup-matrix/);
  });
});

describe('chooseMatrixConfig and resolveMatrixTiles', () => {
  const config = (componentType: string, M: number, N: number, K: number, resultComponentType = 'f32') => ({
    componentType,
    resultComponentType,
    M,
    N,
    K,
  });

  it('prefers f32 operands, then larger matrices; f16 only with shader-f16; integers never', () => {
    const configs = [
      config('f16', 16, 16, 16),
      config('f16', 8, 8, 8),
      config('i8', 16, 16, 32, 'i32'),
      config('f32', 8, 8, 8),
    ];
    expect(chooseMatrixConfig(configs, new Set(['shader-f16'])).config).toMatchObject({ componentType: 'f32', M: 8 });
    const halves = configs.filter((c) => c.componentType !== 'f32');
    expect(chooseMatrixConfig(halves, new Set(['shader-f16'])).config).toMatchObject({ componentType: 'f16', M: 16 });
    const none = chooseMatrixConfig(halves, new Set());
    expect(none.config).toBeNull();
    expect(none.refused.join('\n')).toMatch(/need shader-f16/);
    expect(none.refused.join('\n')).toMatch(/i8×i8→i32 16×16×32: result type i32/);
    expect(chooseMatrixConfig([], new Set()).refused).toEqual(['the adapter lists no subgroup-matrix configurations']);
  });

  it('sizes the workgroup in whole subgroups and its memory within the limits', () => {
    const limits = planningLimits(gpu().device.limits);
    const tiles = resolveMatrixTiles(limits, { componentType: 'f16', M: 16, N: 16, K: 16 }, 32);
    expect(tiles).toMatchObject({ tileM: 64, tileN: 64, tileK: 16, workgroupX: 128 });
    // 64×16 + 16×64 halves, and four 16 × 16 f32 result matrices.
    expect(tiles.workgroupStorageBytes).toBe(2 * 64 * 16 * 2 + 4 * 256 * 4);
    const small = { ...limits, maxComputeWorkgroupStorageSize: 4096 };
    expect(() => resolveMatrixTiles(small, { componentType: 'f32', M: 8, N: 8, K: 8 }, 32)).toThrow(/workgroup memory/);
    expect(() => resolveMatrixTiles(limits, { componentType: 'f32', M: 8, N: 8, K: 32 }, 32)).toThrow(/divide/);
  });
});
