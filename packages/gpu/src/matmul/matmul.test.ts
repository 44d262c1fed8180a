import { describe, expect, it } from 'vitest';
import { createStorageBuffer, readFloat32 } from '../buffers.ts';
import { compareArrays } from '../compare.ts';
import { runKernels } from '../kernel.ts';
import { randomFloats } from '../random.ts';
import { useGpu } from '../test-gpu.ts';
import { checkMatmulShape, type MatmulCheckShape, tolerance } from './check.ts';
import { matmulBackward, matmulForward } from './matmul.cpu.ts';
import { MatmulKernels } from './matmul.ts';

const gpu = useGpu();

let shared: Promise<MatmulKernels> | undefined;
/** One family for the file: its seven pipelines compile once. */
const kernels = () => {
  shared ??= MatmulKernels.create(gpu().device);
  return shared;
};

type Shape = MatmulCheckShape;
const checkShape = (family: MatmulKernels, shape: Shape, seed: number) =>
  checkMatmulShape(gpu().device, family, shape, seed);

describe('MatmulKernels', () => {
  // Around the 128 × 64 tile and the 16-deep K slice, mostly not multiples of anything; C and OC
  // both multiples of 4 take the vec4 pipelines, the rest the scalar ones.
  const grid: Shape[] = [];
  for (const [iN, N] of [1, 7, 64, 130].entries()) {
    for (const [iC, C] of [1, 3, 64, 100].entries()) {
      for (const [iO, OC] of [1, 5, 64, 257].entries()) {
        grid.push({ N, C, OC, bias: (iN + iC) % 2 === 0, accumulate: (iN + iC + iO) % 3 !== 0 });
      }
    }
  }

  it('matches the float64 CPU reference over a grid of shapes, with and without bias', async () => {
    const family = await kernels();
    const failures: string[] = [];
    for (const [index, shape] of grid.entries()) {
      for (const failure of await checkShape(family, shape, 1000 + 10 * index)) {
        failures.push(
          `N=${shape.N} C=${shape.C} OC=${shape.OC} bias=${shape.bias} accumulate=${shape.accumulate}: ${failure}`,
        );
      }
    }
    expect(failures, failures.join('\n')).toEqual([]);
  });

  it('matches on vec4 shapes across tile edges, a large layer and split-K weight gradients', async () => {
    const family = await kernels();
    const shapes: Shape[] = [
      { N: 7, C: 4, OC: 260, bias: true },
      { N: 130, C: 100, OC: 132, bias: false },
      { N: 200, C: 132, OC: 68, bias: true },
      { N: 64, C: 64, OC: 256, bias: false }, // the tied LM head: V = 256, no bias
      { N: 512, C: 256, OC: 768, bias: true }, // splits K in two by default
      { N: 130, C: 64, OC: 5, bias: true, splitK: 3 }, // scalar pipeline, uneven last split
      { N: 1000, C: 100, OC: 64, bias: true }, // three splits by default
      { N: 301, C: 3, OC: 257, bias: false, splitK: 4 },
    ];
    const failures: string[] = [];
    for (const [index, shape] of shapes.entries()) {
      for (const failure of await checkShape(family, shape, 5000 + 10 * index)) {
        failures.push(`${JSON.stringify(shape)}: ${failure}`);
      }
    }
    expect(failures, failures.join('\n')).toEqual([]);
  });

  it('reads and writes views at 256-byte offsets in shared buffers and nothing outside them', async () => {
    const family = await kernels();
    const { device } = gpu();
    const shapes: [number, number, number][] = [
      [33, 3, 5], // scalar pipelines
      [70, 68, 36], // vec4 pipelines
    ];
    for (const [index, [N, C, OC]] of shapes.entries()) {
      // Like the model: parameters, gradients, activations and their gradients each in one
      // flat buffer, every tensor at the next 256-byte boundary after a gap.
      const layout = (sizes: number[]) => {
        const offsets: number[] = [];
        let end = 64; // floats: the first tensor starts at byte 256
        for (const size of sizes) {
          offsets.push(end);
          end = Math.ceil((end + size + 1) / 64) * 64;
        }
        return { offsets, floats: end + 64 };
      };
      const params = layout([OC * C, OC]); // weight, bias
      const acts = layout([N * C, N * OC]); // inp, out
      const flat = {
        params: randomFloats(params.floats, 11 + index),
        grads: randomFloats(params.floats, 12 + index),
        acts: randomFloats(acts.floats, 13 + index),
        dacts: randomFloats(acts.floats, 14 + index),
      };
      const buffers = Object.fromEntries(
        Object.entries(flat).map(([name, data]) => [name, createStorageBuffer(device, `MatmulTest.${name}`, data)]),
      ) as Record<keyof typeof flat, GPUBuffer>;
      const at = (name: keyof typeof flat, floatOffset: number, floats?: number) => ({
        buffer: buffers[name],
        offset: floatOffset * 4,
        ...(floats === undefined ? {} : { size: floats * 4 }),
      });
      const [wAt, bAt] = params.offsets as [number, number];
      const [inAt, outAt] = acts.offsets as [number, number];
      const bound = [
        // Sizes left open on some views: the family narrows them, so they do not alias.
        family.forward({
          out: at('acts', outAt),
          inp: at('acts', inAt),
          weight: at('params', wAt, OC * C),
          bias: at('params', bAt),
          N,
          C,
          OC,
        }),
        family.backwardInput({
          dinp: at('dacts', inAt),
          dout: at('dacts', outAt, N * OC),
          weight: at('params', wAt),
          N,
          C,
          OC,
        }),
        family.backwardWeight({
          dweight: at('grads', wAt),
          dbias: at('grads', bAt, OC),
          dout: at('dacts', outAt),
          inp: at('acts', inAt),
          N,
          C,
          OC,
          splitK: 2,
        }),
      ];
      await runKernels(device, bound, 'MatmulTest.offsets');

      const f64 = (name: keyof typeof flat, start: number, floats: number) =>
        Float64Array.from(flat[name].subarray(start, start + floats));
      const inp = f64('acts', inAt, N * C);
      const weight = f64('params', wAt, OC * C);
      const dout = f64('dacts', outAt, N * OC);
      const want = {
        acts: Float64Array.from(flat.acts),
        dacts: Float64Array.from(flat.dacts),
        grads: Float64Array.from(flat.grads),
      };
      matmulForward(want.acts.subarray(outAt), inp, weight, f64('params', bAt, OC), N, C, OC);
      matmulBackward(
        want.dacts.subarray(inAt, inAt + N * C),
        want.grads.subarray(wAt, wAt + OC * C),
        want.grads.subarray(bAt, bAt + OC),
        dout,
        inp,
        weight,
        N,
        C,
        OC,
      );
      // Whole buffers: the views are right and every value around them is untouched.
      for (const name of ['acts', 'dacts', 'grads'] as const) {
        const got = await readFloat32(device, buffers[name], want[name].length);
        const result = compareArrays(got, want[name], tolerance(Math.max(N, C, OC)));
        expect(result.ok, `N=${N} C=${C} OC=${OC} ${name}: ${result.message}`).toBe(true);
      }
      for (const kernel of bound) kernel.destroy();
      for (const buffer of Object.values(buffers)) buffer.destroy();
    }
  });

  it('works with other tile sizes set through overrides', async () => {
    // 16 invocations, 16 × 32 tiles, K slices of 4: several tiles and slices in every direction.
    const family = await MatmulKernels.create(gpu().device, { workgroupX: 8, workgroupY: 2, tileK: 4 });
    expect(family.tiles).toMatchObject({ tileM: 16, tileN: 32, tileK: 4 });
    expect(await checkShape(family, { N: 45, C: 36, OC: 68, bias: true, splitK: 2 }, 8000)).toEqual([]);
    family.destroy();
  });

  it('folds grids past the per-dimension limit (lowered to 3 here)', async () => {
    const family = (await kernels()).withGridLimit(3);
    // Forward and backwardInput: 5 row tiles on a 3 × 2 grid; backwardWeight: 3 splits along x,
    // and its reduce over 7800 values: 31 workgroups on a 3 × 11 grid.
    const shape = { N: 637, C: 60, OC: 130, bias: true, splitK: 3 };
    expect(await checkShape(family, shape, 7000)).toEqual([]);
  });

  it('shares the split-K scratch between weight gradients run in one pass', async () => {
    const family = await kernels();
    const { device } = gpu();
    // All three write their partials to the family's one scratch buffer, each overwriting the
    // last one's: dispatch order must keep them apart.
    const shapes = [
      [300, 8, 12, 3],
      [600, 40, 36, 4],
      [280, 5, 7, 2],
    ] as const;
    const jobs = shapes.map(([N, C, OC, splitK], index) => {
      const host = { dout: randomFloats(N * OC, 10 * index), inp: randomFloats(N * C, 10 * index + 1) };
      const start = { dweight: randomFloats(OC * C, 10 * index + 2), dbias: randomFloats(OC, 10 * index + 3) };
      const buffers = Object.fromEntries(
        Object.entries({ ...host, ...start }).map(([name, data]) => [
          name,
          createStorageBuffer(device, `MatmulTest.${name}`, data),
        ]),
      ) as Record<'dout' | 'inp' | 'dweight' | 'dbias', GPUBuffer>;
      const v = (name: keyof typeof buffers) => ({ buffer: buffers[name] });
      const kernel = family.backwardWeight({
        dweight: v('dweight'),
        dbias: v('dbias'),
        dout: v('dout'),
        inp: v('inp'),
        N,
        C,
        OC,
        splitK,
      });
      return { N, C, OC, host, start, buffers, kernel };
    });
    await runKernels(
      device,
      jobs.map((job) => job.kernel),
      'MatmulTest.sharedScratch',
    );
    for (const { N, C, OC, host, start, buffers, kernel } of jobs) {
      const dweight = Float64Array.from(start.dweight);
      const dbias = Float64Array.from(start.dbias);
      matmulBackward(
        new Float64Array(N * C),
        dweight,
        dbias,
        Float64Array.from(host.dout),
        Float64Array.from(host.inp),
        new Float64Array(OC * C),
        N,
        C,
        OC,
      );
      for (const [name, want] of [
        ['dweight', dweight],
        ['dbias', dbias],
      ] as const) {
        const result = compareArrays(await readFloat32(device, buffers[name], want.length), want, tolerance(N));
        expect(result.ok, `N=${N} C=${C} OC=${OC} ${name}: ${result.message}`).toBe(true);
      }
      kernel.destroy();
      for (const buffer of Object.values(buffers)) buffer.destroy();
    }
  });

  it('gives bit-identical split-K weight gradients from run to run', async () => {
    const family = await kernels();
    const { device } = gpu();
    const [N, C, OC] = [777, 36, 20];
    const dout = createStorageBuffer(device, 'MatmulTest.dout', randomFloats(N * OC, 1));
    const inp = createStorageBuffer(device, 'MatmulTest.inp', randomFloats(N * C, 2));
    const results: Float32Array[] = [];
    for (let run = 0; run < 2; run++) {
      const dweight = createStorageBuffer(device, 'MatmulTest.dweight', new Float32Array(OC * C));
      const dbias = createStorageBuffer(device, 'MatmulTest.dbias', new Float32Array(OC));
      const kernel = family.backwardWeight({
        dweight: { buffer: dweight },
        dbias: { buffer: dbias },
        dout: { buffer: dout },
        inp: { buffer: inp },
        N,
        C,
        OC,
        splitK: 5,
      });
      await runKernels(device, [kernel], 'MatmulTest.determinism');
      results.push(
        new Float32Array([...(await readFloat32(device, dweight, OC * C)), ...(await readFloat32(device, dbias, OC))]),
      );
      kernel.destroy();
      dweight.destroy();
      dbias.destroy();
    }
    expect(results[1]).toEqual(results[0]);
    dout.destroy();
    inp.destroy();
  });

  it('rejects views that are too small or misaligned, naming the tensor', async () => {
    const family = await kernels();
    const { device } = gpu();
    const buffer = createStorageBuffer(device, 'MatmulTest.small', new Float32Array(64));
    const view = { buffer };
    expect(() => family.forward({ out: view, inp: view, weight: { buffer, size: 16 }, N: 2, C: 4, OC: 4 })).toThrow(
      /forward\.weight: view of 16 bytes/,
    );
    expect(() =>
      family.backwardInput({ dinp: { buffer, offset: 128 }, dout: view, weight: view, N: 1, C: 1, OC: 1 }),
    ).toThrow(/backwardInput\.dinp: offset 128/);
    buffer.destroy();
  });
});
