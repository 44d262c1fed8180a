import { describe, expect, it } from 'vitest';
import { createEmptyStorageBuffer, createStorageBuffer, readFloat32 } from '../buffers.ts';
import { compareArrays } from '../compare.ts';
import { runKernels } from '../kernel.ts';
import { randomFloats } from '../random.ts';
import { useGpu } from '../test-gpu.ts';
import { ADAMW_DEFAULTS, adamwUpdate } from './adamw.cpu.ts';
import { AdamWKernels, type AdamWRange, coalesceRanges } from './adamw.ts';

const gpu = useGpu();

interface State {
  params: Float32Array;
  grads: Float32Array;
  m: Float32Array;
  v: Float32Array;
}

function randomState(n: number, seed: number): State {
  return {
    params: randomFloats(n, seed),
    grads: randomFloats(n, seed + 1, -0.5, 0.5),
    m: randomFloats(n, seed + 2, -0.05, 0.05),
    v: randomFloats(n, seed + 3, 0, 0.01),
  };
}

/** The float64 reference: the same steps over the same ranges, on copies of the f32 state. */
function cpuSteps(state: State, ranges: AdamWRange[], lrs: number[], gradScale: number) {
  const f64 = {
    params: Float64Array.from(state.params),
    grads: Float64Array.from(state.grads),
    m: Float64Array.from(state.m),
    v: Float64Array.from(state.v),
  };
  const { beta1, beta2, eps } = ADAMW_DEFAULTS;
  lrs.forEach((lr, index) => {
    for (const { offset, n, weightDecay } of ranges) {
      const part = (a: Float64Array) => a.subarray(offset, offset + n);
      adamwUpdate(
        part(f64.params),
        part(f64.grads),
        part(f64.m),
        part(f64.v),
        n,
        lr,
        beta1,
        beta2,
        eps,
        weightDecay,
        index + 1,
        gradScale,
      );
    }
  });
  return f64;
}

async function gpuSteps(
  kernels: AdamWKernels,
  state: State,
  ranges: AdamWRange[],
  lrs: number[],
  gradScale: number,
  maxBindingBytes?: number,
) {
  const { device } = gpu();
  const buffers = {
    params: createStorageBuffer(device, 'test.params', state.params),
    grads: createStorageBuffer(device, 'test.grads', state.grads),
    m: createStorageBuffer(device, 'test.m', state.m),
    v: createStorageBuffer(device, 'test.v', state.v),
  };
  // The clip scale sits at element 1, as GradNormKernels writes it.
  const scaleBuffer = createStorageBuffer(device, 'test.gradScale', new Float32Array([123, gradScale]));
  const step = kernels.createStepBuffer();
  const update = kernels.update(
    { ...buffers, gradScale: { view: { buffer: scaleBuffer }, index: 1 } },
    ranges,
    step,
    maxBindingBytes === undefined ? {} : { maxBindingBytes },
  );
  for (const [index, lr] of lrs.entries()) {
    kernels.writeStep(step, { lr, t: index + 1 });
    await runKernels(device, [update], 'test.adamw');
  }
  const n = state.params.length;
  const result = {
    params: await readFloat32(device, buffers.params, n),
    m: await readFloat32(device, buffers.m, n),
    v: await readFloat32(device, buffers.v, n),
  };
  update.destroy();
  for (const buffer of [...Object.values(buffers), scaleBuffer, step]) buffer.destroy();
  return result;
}

type Moments = { params: ArrayLike<number>; m: ArrayLike<number>; v: ArrayLike<number> };

/**
 * Compares the parameter CHANGE (θ − θ₀), not θ: an update of lr·O(1) is small beside |θ|, and a
 * tolerance on θ would hide a wrong update. 3e-7 covers the f32 rounding of θ itself.
 */
function expectClose(got: Moments, want: Moments, initial: Float32Array, label: string) {
  const delta = (p: ArrayLike<number>) => Float64Array.from(initial, (p0, i) => (p[i] as number) - p0);
  const step = compareArrays(delta(got.params), delta(want.params), { atol: 3e-7, rtol: 1e-5 });
  expect(step.ok, `${label} θ − θ₀: ${step.message}`).toBe(true);
  for (const key of ['m', 'v'] as const) {
    // m = β1·m + (1 − β1)·g cancels: f32 rounding of the O(0.05) terms is ~1e-8 absolute.
    const comparison = compareArrays(got[key], want[key], { atol: 3e-8, rtol: 2e-6 });
    expect(comparison.ok, `${label} ${key}: ${comparison.message}`).toBe(true);
  }
}

describe('AdamWKernels', () => {
  it('matches the float64 reference over a grid of sizes and ranges, over several steps', async () => {
    const kernels = await AdamWKernels.create(gpu().device);
    // Large rates, so that each update is far above the f32 rounding of θ.
    const lrs = [0.05, 0.02, 0.1];
    for (const [index, n] of [1, 7, 255, 256, 257, 1000, 4097, 70_001].entries()) {
      const state = randomState(n, 10 * index + 1);
      // Decayed / undecayed ranges with a gap, at unaligned offsets; the gap must stay untouched.
      const a = Math.floor(n / 3);
      const b = Math.floor((2 * n) / 3);
      const ranges: AdamWRange[] =
        n < 3
          ? [{ offset: 0, n, weightDecay: 0.1 }]
          : [
              { offset: 0, n: a, weightDecay: 0.1 },
              { offset: a, n: b - a - 1, weightDecay: 0 },
              { offset: b, n: n - b, weightDecay: 0.1 },
            ];
      const want = cpuSteps(state, ranges, lrs, 0.7);
      const got = await gpuSteps(kernels, state, ranges, lrs, 0.7);
      expectClose(got, want, state.params, `n=${n}`);
      if (n >= 3) expect(got.params[b - 1]).toBe(state.params[b - 1]);
    }
  });

  it('splits long ranges into aligned views and gives bit-identical results', async () => {
    const kernels = await AdamWKernels.create(gpu().device, 64);
    const state = randomState(20_000, 77);
    const ranges = [{ offset: 37, n: 19_000, weightDecay: 0.1 }];
    const lrs = [0.05, 0.1];
    const whole = await gpuSteps(kernels, state, ranges, lrs, 1);
    const chunked = await gpuSteps(kernels, state, ranges, lrs, 1, 4096); // ≤ 960 floats per view
    expect(Array.from(chunked.params)).toEqual(Array.from(whole.params));
    expect(Array.from(chunked.v)).toEqual(Array.from(whole.v));
    expectClose(chunked, cpuSteps(state, ranges, lrs, 1), state.params, 'chunked');
  });

  it('scales by 1 when no clip buffer is given', async () => {
    const { device } = gpu();
    const kernels = await AdamWKernels.create(device);
    const state = randomState(300, 5);
    const buffers = {
      params: createStorageBuffer(device, 'test.params', state.params),
      grads: createStorageBuffer(device, 'test.grads', state.grads),
      m: createEmptyStorageBuffer(device, 'test.m', 300 * 4),
      v: createEmptyStorageBuffer(device, 'test.v', 300 * 4),
    };
    const step = kernels.createStepBuffer();
    kernels.writeStep(step, { lr: 1e-2, t: 1 });
    const update = kernels.update(buffers, [{ offset: 0, n: 300, weightDecay: 0 }], step);
    await runKernels(device, [update]);
    const params = await readFloat32(device, buffers.params, 300);
    // First step from zero moments: m̂ = g, v̂ = g², so θ moves by lr·g/(|g| + ε) ≈ lr·sign(g).
    const want = state.params.map((p, i) => p - 1e-2 * Math.sign(state.grads[i] as number));
    expect(compareArrays(params, want, { atol: 1e-6, rtol: 1e-6 }).ok).toBe(true);
    update.destroy();
    for (const buffer of [...Object.values(buffers), step]) buffer.destroy();
  });

  it('coalesces adjacent ranges with the same decay and rejects overlaps', () => {
    const merged = coalesceRanges([
      { offset: 10, n: 5, weightDecay: 0.1 },
      { offset: 0, n: 10, weightDecay: 0.1 },
      { offset: 15, n: 0, weightDecay: 0 },
      { offset: 15, n: 3, weightDecay: 0 },
      { offset: 20, n: 2, weightDecay: 0 },
    ]);
    expect(merged).toEqual([
      { offset: 0, n: 15, weightDecay: 0.1 },
      { offset: 15, n: 3, weightDecay: 0 },
      { offset: 20, n: 2, weightDecay: 0 },
    ]);
    expect(() =>
      coalesceRanges([
        { offset: 0, n: 10, weightDecay: 0 },
        { offset: 9, n: 2, weightDecay: 0 },
      ]),
    ).toThrow(/overlap/);
  });
});

describe('adamwUpdate (CPU)', () => {
  it('follows PyTorch AdamW step by step for one parameter', () => {
    // θ = 1, g = 0.5, λ = 0.1, lr = 0.01: step 1 by hand.
    const params = new Float64Array([1]);
    const m = new Float64Array(1);
    const v = new Float64Array(1);
    adamwUpdate(params, new Float64Array([0.5]), m, v, 1, 0.01, 0.9, 0.95, 1e-8, 0.1, 1);
    expect(m[0]).toBeCloseTo(0.05, 15);
    expect(v[0]).toBeCloseTo(0.0125, 15);
    const mHat = 0.05 / 0.1;
    const vHat = 0.0125 / 0.05;
    expect(params[0]).toBeCloseTo(1 - 0.01 * (mHat / (Math.sqrt(vHat) + 1e-8) + 0.1), 15);
    // The clip scale multiplies the gradient before both moments.
    const scaled = new Float64Array([1]);
    const m2 = new Float64Array(1);
    const v2 = new Float64Array(1);
    adamwUpdate(scaled, new Float64Array([1]), m2, v2, 1, 0.01, 0.9, 0.95, 1e-8, 0.1, 1, 0.5);
    expect(Array.from(m2)).toEqual(Array.from(m));
    expect(Array.from(v2)).toEqual(Array.from(v));
  });

  it('rejects a step count below 1', () => {
    const one = new Float64Array(1);
    expect(() => adamwUpdate(one, one, one, one, 1, 0.01, 0.9, 0.95, 1e-8, 0, 0)).toThrow(/t must be/);
  });
});
