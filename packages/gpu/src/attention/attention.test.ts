import { describe, expect, it } from 'vitest';
import { createStorageBuffer, readFloat32 } from '../buffers.ts';
import { compareArrays } from '../compare.ts';
import { runKernels } from '../kernel.ts';
import { randomFloats } from '../random.ts';
import { useGpu } from '../test-gpu.ts';
import { attentionBackward, attentionForward } from './attention.cpu.ts';
import { AttentionKernels, type AttentionShape, type AttentionStrategy, subgroupsOfEight } from './attention.ts';

const gpu = useGpu();
/** Per test: the first dispatch of a pipeline compiles it, which takes minutes on a busy lavapipe. */
const COMPILE_TIMEOUT = 600_000;

// Pipelines are compiled per head size, which dominates the test time on software drivers
// (lavapipe compiles at first dispatch, SwiftShader at creation): compile each once per file.
const compiled = new Map<string, Promise<AttentionKernels>>();
function kernelsFor(headSize: number, strategy: AttentionStrategy = 'tiled'): Promise<AttentionKernels> {
  let kernels = compiled.get(`${headSize}.${strategy}`);
  if (!kernels) {
    kernels = AttentionKernels.create(gpu().device, headSize, strategy);
    compiled.set(`${headSize}.${strategy}`, kernels);
  }
  return kernels;
}

/** Float64 reference: out, lse (from preatt) and dqkv accumulated onto `dqkvStart`. */
function reference(shape: AttentionShape, qkv: Float32Array, dout: Float32Array, dqkvStart: Float32Array) {
  const { B, T, C, NH } = shape;
  const out = new Float64Array(B * T * C);
  const preatt = new Float64Array(B * NH * T * T);
  const att = new Float64Array(B * NH * T * T);
  const qkv64 = Float64Array.from(qkv);
  attentionForward(out, preatt, att, qkv64, B, T, C, NH);
  const lse = new Float64Array(B * NH * T);
  for (let row = 0; row < B * NH * T; row++) {
    const t = row % T;
    let max = Number.NEGATIVE_INFINITY;
    for (let t2 = 0; t2 <= t; t2++) max = Math.max(max, preatt[row * T + t2] as number);
    let sum = 0;
    for (let t2 = 0; t2 <= t; t2++) sum += Math.exp((preatt[row * T + t2] as number) - max);
    lse[row] = max + Math.log(sum);
  }
  const dqkv = Float64Array.from(dqkvStart);
  const scratch = () => new Float64Array(B * NH * T * T);
  attentionBackward(dqkv, scratch(), scratch(), Float64Array.from(dout), qkv64, att, B, T, C, NH);
  return { out, lse, dqkv };
}

async function runGpu(
  kernels: AttentionKernels,
  shape: AttentionShape,
  qkv: Float32Array,
  dout: Float32Array,
  dqkvStart: Float32Array,
) {
  const { device } = gpu();
  const { B, T, C, NH } = shape;
  const buffers = {
    qkv: createStorageBuffer(device, 'test.qkv', qkv),
    // Start out and lse non-zero: the forward must overwrite them.
    out: createStorageBuffer(device, 'test.out', randomFloats(B * T * C, 5)),
    lse: createStorageBuffer(device, 'test.lse', randomFloats(B * NH * T, 6)),
    dout: createStorageBuffer(device, 'test.dout', dout),
    dqkv: createStorageBuffer(device, 'test.dqkv', dqkvStart),
  };
  const views = Object.fromEntries(Object.entries(buffers).map(([k, buffer]) => [k, { buffer }])) as {
    [K in keyof typeof buffers]: { buffer: GPUBuffer };
  };
  const forward = kernels.forward(views, shape);
  const backward = kernels.backward(views, shape);
  await runKernels(device, [forward, backward], 'test.attention');
  const result = {
    out: await readFloat32(device, buffers.out, B * T * C),
    lse: await readFloat32(device, buffers.lse, B * NH * T),
    dqkv: await readFloat32(device, buffers.dqkv, B * T * 3 * C),
  };
  forward.destroy();
  backward.destroy();
  for (const buffer of Object.values(buffers)) buffer.destroy();
  return result;
}

function expectClose(got: Float32Array, want: Float64Array, atol: number, label: string) {
  const comparison = compareArrays(got, want, { atol, rtol: 1e-4 });
  expect(comparison.ok, `${label}: ${comparison.message}`).toBe(true);
}

function problem(shape: AttentionShape, seed: number) {
  const { B, T, C } = shape;
  return {
    // ±2 makes the softmax peaky enough that the max shift matters.
    qkv: randomFloats(B * T * 3 * C, seed, -2, 2),
    dout: randomFloats(B * T * C, seed + 1),
    dqkvStart: randomFloats(B * T * 3 * C, seed + 2), // non-zero: the backward must accumulate
  };
}

describe('AttentionKernels', () => {
  // [B, T, C, NH] by head size: hs 3 (not a multiple of 4; most lanes hold no channel), 64
  // (GPT-2), 100 (some lanes hold 2 vec4s, some 1) and 128 (the largest); T = 1, below, at and
  // above the tiles, and 512 at the largest head size. Each head size compiles three pipelines,
  // which dominates the time on software drivers, so the grid varies T, B and NH instead.
  const grid: Record<number, [number, number, number, number][]> = {
    3: [
      [1, 1, 3, 1],
      [2, 19, 6, 2],
      [1, 33, 9, 3],
    ],
    64: [
      [2, 17, 128, 2],
      [1, 100, 64, 1],
      [1, 257, 64, 1],
    ],
    100: [
      [2, 7, 200, 2],
      [1, 50, 200, 2],
    ],
    128: [
      [1, 37, 256, 2],
      [1, 130, 128, 1],
      [1, 512, 128, 1],
    ],
  };

  // The rows kernels serve head sizes up to 32: 3, nano's 16 and 32, T below and above their
  // 64-row workgroups.
  const rowsGrid: Record<number, [number, number, number, number][]> = {
    3: grid[3] ?? [],
    16: [
      [2, 64, 64, 4],
      [1, 65, 32, 2],
    ],
    32: [
      [2, 17, 64, 2],
      [1, 130, 32, 1],
    ],
  };

  // The register kernels serve head sizes up to 92 and own 32 rows a workgroup, streaming 8, 16
  // or 32 rows a step: T = 1, T below, at and just past 32 (the causal edge falls inside and at
  // the end of a step), T = 64 = the GPT-2-style block of a small test model, and 97 (a partial
  // last block); hs 3 (not a multiple of 4), 16 and 32 (surplus lanes: fewer than 8 channel
  // vec4s), 64 (two channel vec4s a lane, 16 streamed rows a step in the backward) and 88
  // (base's heads: three channel vec4s, some lanes two; 8 streamed rows a step in the backward). lavapipe
  // compiles these kernels slowly (a minute or more per head size on 2 busy cores), hence the
  // long timeout.
  const registerGrid: Record<number, [number, number, number, number][]> = {
    3: [
      [1, 1, 3, 1],
      [2, 19, 6, 2],
    ],
    16: [
      [1, 1, 16, 1],
      [2, 32, 32, 2],
      [1, 64, 64, 4],
    ],
    32: [
      [2, 33, 64, 2],
      [1, 97, 32, 1],
    ],
    64: [
      [1, 1, 64, 1],
      [2, 31, 128, 2],
      [1, 64, 64, 1],
      [1, 97, 64, 1],
    ],
    88: [[1, 41, 176, 2]],
  };

  for (const [strategy, shapesByHead] of [
    ['tiled', grid],
    ['rows', rowsGrid],
    ['register', registerGrid],
  ] as const) {
    for (const [hs, shapes] of Object.entries(shapesByHead)) {
      it(`matches the float64 reference, forward and backward (hs ${hs}, ${strategy})`, {
        timeout: COMPILE_TIMEOUT,
      }, async () => {
        const kernels = await kernelsFor(Number(hs), strategy);
        for (const [index, [B, T, C, NH]] of shapes.entries()) {
          const shape = { B, T, C, NH };
          const { qkv, dout, dqkvStart } = problem(shape, 1000 * Number(hs) + index);
          const want = reference(shape, qkv, dout, dqkvStart);
          const got = await runGpu(kernels, shape, qkv, dout, dqkvStart);
          const label = `B=${B} T=${T} C=${C} NH=${NH}`;
          expectClose(got.out, want.out, 1e-5, `${label} out`);
          expectClose(got.lse, want.lse, 1e-5, `${label} lse`);
          // Gradients sum over up to T rows: allow the f32 error to grow with √T.
          expectClose(got.dqkv, want.dqkv, 2e-6 * Math.sqrt(T) * 4, `${label} dqkv`);
        }
      });
    }
  }

  it.each([
    ['tiled', 64],
    ['rows', 32],
    ['register', 64],
  ] as const)('is deterministic from run to run (%s)', async (strategy, headSize) => {
    const kernels = await kernelsFor(headSize, strategy);
    const shape = { B: 2, T: 70, C: 2 * headSize, NH: 2 };
    const { qkv, dout, dqkvStart } = problem(shape, 9);
    const first = await runGpu(kernels, shape, qkv, dout, dqkvStart);
    const second = await runGpu(kernels, shape, qkv, dout, dqkvStart);
    expect(Array.from(second.out)).toEqual(Array.from(first.out));
    expect(Array.from(second.dqkv)).toEqual(Array.from(first.dqkv));
  });

  it('reduces to the same bits with subgroup shuffles and with workgroup memory (register)', {
    timeout: COMPILE_TIMEOUT,
  }, async () => {
    const { device } = gpu();
    expect(
      subgroupsOfEight(device),
      `${device.adapterInfo.description}: no subgroups of 8 or more invocations, so the subgroup path cannot run here (lavapipe has them)`,
    ).toBe(true);
    const shuffles = await kernelsFor(16, 'register');
    expect(shuffles.subgroups).toBe(true);
    const memory = await AttentionKernels.create(device, 16, 'register', { subgroups: false });
    const shape = { B: 1, T: 70, C: 32, NH: 2 };
    const { qkv, dout, dqkvStart } = problem(shape, 17);
    const a = await runGpu(shuffles, shape, qkv, dout, dqkvStart);
    const b = await runGpu(memory, shape, qkv, dout, dqkvStart);
    expect(Array.from(a.out)).toEqual(Array.from(b.out));
    expect(Array.from(a.lse)).toEqual(Array.from(b.lse));
    expect(Array.from(a.dqkv)).toEqual(Array.from(b.dqkv));
    const want = reference(shape, qkv, dout, dqkvStart);
    expectClose(b.out, want.out, 1e-5, 'workgroup-memory reductions: out');
  });

  it('rejects a shape with another head size', async () => {
    const kernels = await kernelsFor(3);
    const buffer = createStorageBuffer(gpu().device, 'test.any', new Float32Array(64));
    const view = { buffer };
    expect(() => kernels.forward({ qkv: view, out: view, lse: view }, { B: 1, T: 4, C: 64, NH: 2 })).toThrow(
      /head size 3 /,
    );
    buffer.destroy();
    await expect(AttentionKernels.create(gpu().device, 64, 'rows')).rejects.toThrow(/head sizes 1…32, got 64/);
    await expect(AttentionKernels.create(gpu().device, 128, 'register')).rejects.toThrow(/head sizes 1…96 /);
  });
});

describe('attention CPU reference', () => {
  const shape = { B: 2, T: 5, C: 6, NH: 2 };
  const { B, T, C, NH } = shape;

  function forwardLoss(qkv: Float64Array, weights: Float64Array): number {
    const out = new Float64Array(B * T * C);
    attentionForward(out, new Float64Array(B * NH * T * T), new Float64Array(B * NH * T * T), qkv, B, T, C, NH);
    let loss = 0;
    for (let i = 0; i < out.length; i++) loss += (out[i] as number) * (weights[i] as number);
    return loss;
  }

  it('backward is the gradient of forward (float64 finite differences), accumulated', () => {
    const qkv = Float64Array.from(randomFloats(B * T * 3 * C, 31, -2, 2));
    const dout = Float64Array.from(randomFloats(B * T * C, 32)); // L = Σ out · dout
    const out = new Float64Array(B * T * C);
    const preatt = new Float64Array(B * NH * T * T);
    const att = new Float64Array(B * NH * T * T);
    attentionForward(out, preatt, att, qkv, B, T, C, NH);
    const start = Float64Array.from(randomFloats(B * T * 3 * C, 33));
    const dqkv = Float64Array.from(start);
    attentionBackward(
      dqkv,
      new Float64Array(B * NH * T * T),
      new Float64Array(B * NH * T * T),
      dout,
      qkv,
      att,
      B,
      T,
      C,
      NH,
    );
    const h = 1e-6;
    for (let i = 0; i < qkv.length; i++) {
      const saved = qkv[i] as number;
      qkv[i] = saved + h;
      const plus = forwardLoss(qkv, dout);
      qkv[i] = saved - h;
      const minus = forwardLoss(qkv, dout);
      qkv[i] = saved;
      const numeric = (plus - minus) / (2 * h);
      expect(Math.abs((dqkv[i] as number) - (start[i] as number) - numeric), `qkv[${i}]`).toBeLessThan(1e-7);
    }
  });

  it('softmax backward equals llm.c’s O(T²) form', () => {
    const qkv = Float64Array.from(randomFloats(B * T * 3 * C, 41, -2, 2));
    const att = new Float64Array(B * NH * T * T);
    attentionForward(new Float64Array(B * T * C), new Float64Array(B * NH * T * T), att, qkv, B, T, C, NH);
    const dout = Float64Array.from(randomFloats(B * T * C, 42));
    const dpreatt = new Float64Array(B * NH * T * T);
    const datt = new Float64Array(B * NH * T * T);
    attentionBackward(new Float64Array(B * T * 3 * C), dpreatt, datt, dout, qkv, att, B, T, C, NH);
    // llm.c train_gpt2.c, backward pass 2 & 3: dpreatt[t3] += Σ_t2 att[t2]·(1{t2 = t3} − att[t3])·datt[t2].
    for (let row = 0; row < B * NH * T; row++) {
      const t = row % T;
      for (let t3 = 0; t3 <= t; t3++) {
        let want = 0;
        for (let t2 = 0; t2 <= t; t2++) {
          const a2 = att[row * T + t2] as number;
          want += a2 * ((t2 === t3 ? 1 : 0) - (att[row * T + t3] as number)) * (datt[row * T + t2] as number);
        }
        expect(Math.abs((dpreatt[row * T + t3] as number) - want)).toBeLessThan(1e-14);
      }
    }
  });

  it('zeroes the masked part of att and makes rows sum to 1', () => {
    const att = new Float32Array(B * NH * T * T).fill(7);
    const qkv = randomFloats(B * T * 3 * C, 51);
    attentionForward(new Float32Array(B * T * C), new Float32Array(B * NH * T * T), att, qkv, B, T, C, NH);
    for (let row = 0; row < B * NH * T; row++) {
      const t = row % T;
      let sum = 0;
      for (let t2 = 0; t2 < T; t2++) {
        if (t2 > t) expect(att[row * T + t2]).toBe(0);
        sum += att[row * T + t2] as number;
      }
      expect(sum).toBeCloseTo(1, 6);
    }
  });
});
