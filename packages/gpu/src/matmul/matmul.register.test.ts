import { describe, expect, it } from 'vitest';
import { useGpu } from '../test-gpu.ts';
import { checkMatmulShape, type MatmulCheckShape } from './check.ts';
import { MatmulKernels, type MatmulOptions } from './matmul.ts';

// The register-tiled kernels (with and without subgroups) against the float64 CPU reference, on
// the shapes the model uses (forward, backward input and backward weight in one check), off the
// tile multiples. SwiftShader (subgroups of 4) and lavapipe (subgroups of 8) both offer
// `subgroups`; on an adapter without it the subgroup tests fail, they do not skip.
const gpu = useGpu();

const grid: MatmulCheckShape[] = [];
for (const [iN, N] of [1, 7, 33, 65, 130].entries()) {
  for (const [iC, C] of [1, 7, 33, 64].entries()) {
    for (const [iO, OC] of [1, 7, 65, 132].entries()) {
      grid.push({ N, C, OC, bias: (iN + iC) % 2 === 0, accumulate: (iN + iC + iO) % 3 !== 0 });
    }
  }
}

// Edges of the 64 × 64 tile and K slices, a vec4 layer, split-K weight gradients (even and not).
const edges: MatmulCheckShape[] = [
  { N: 130, C: 68, OC: 196, bias: true },
  { N: 64, C: 64, OC: 256, bias: false },
  { N: 512, C: 256, OC: 768, bias: true },
  { N: 130, C: 64, OC: 5, bias: true, splitK: 3 },
  { N: 300, C: 36, OC: 20, bias: true, splitK: 4, accumulate: false },
];

async function checkAll(options: MatmulOptions, shapes: MatmulCheckShape[], seed: number): Promise<string[]> {
  const { device } = gpu();
  const family = await MatmulKernels.create(device, options);
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

describe.each([
  ['register', {}],
  ['registerSubgroup', {}],
  // Several tiles and slices in every direction: 8 × 4 invocations, 32 × 64 tiles, K slices of 4.
  ['register', { workgroupX: 8, workgroupY: 4, tileK: 4 }],
  ['registerSubgroup', { workgroupX: 8, workgroupY: 4, tileK: 4 }],
] as const)('MatmulKernels %s %o', (kernel, tiles) => {
  // The first compilation of these kernels on lavapipe (LLVM, before Mesa's shader cache has
  // them) takes tens of seconds on a busy CPU: hence the long timeouts.
  it('matches the float64 CPU reference over a grid of shapes off the tile multiples', {
    timeout: 300_000,
  }, async () => {
    const failures = await checkAll({ kernel, ...tiles }, grid, 3000);
    expect(failures, failures.join('\n')).toEqual([]);
  });

  it('matches on tile edges, a large layer and split-K weight gradients', { timeout: 300_000 }, async () => {
    const failures = await checkAll({ kernel, ...tiles }, edges, 4000);
    expect(failures, failures.join('\n')).toEqual([]);
  });
});

describe('MatmulKernels registerSubgroup', () => {
  it('runs on an adapter with subgroups (the software adapters have them)', () => {
    expect(gpu().device.features.has('subgroups')).toBe(true);
  });

  it('is refused without the feature, and with rows of invocations that split quads', async () => {
    await expect(MatmulKernels.create(gpu().device, { kernel: 'registerSubgroup', workgroupX: 10 })).rejects.toThrow(
      /multiple of 4/,
    );
  });
});
