import { compareArrays, mulberry32 } from '@shoal/gpu';
import { useGpu } from '@shoal/gpu/test-gpu';
import { describe, expect, it } from 'vitest';
import type { GptConfig } from '../config.ts';
import { AdamWRuns } from '../cpu/adamw-runs.ts';
import { createGptKernels, type GptKernels, GpuGpt } from '../gpu/gpt.ts';
import { GpuTrainer } from '../gpu/trainer.ts';
import { initParameters } from '../init.ts';
import { buildLayout } from '../layout.ts';
import type { Batch } from '../train/trainer.ts';
import { defaultTrainConfig } from '../train-config.ts';
import { GpuStageTrainer } from './gpu-stage.ts';
import { CpuStageTrainer, type StageTrainer } from './stage-trainer.ts';
import {
  buildStageLayout,
  gatherStage,
  ownedValues,
  type StageLayout,
  type StageSpec,
  splitStages,
  tiedValues,
} from './stages.ts';
import { PipelineTrainer } from './trainer.ts';

const gpu = useGpu();

// Three blocks so that S = 3 has a middle stage.
const config: GptConfig = { nLayer: 3, nHead: 2, nEmbd: 32, blockSize: 16, vocabSize: 64 };
// gradClip well under the gradient norm of these batches (checked below), so every step clips.
const train = defaultTrainConfig({ batchSize: 4, seqLen: 8, gradClip: 0.1, maxLr: 1e-2, seed: 1 });
const lr = 1e-2;
const C = config.nEmbd;

function tokens(next: () => number, count: number): Int32Array {
  return Int32Array.from({ length: count }, () => Math.floor(next() * config.vocabSize));
}

function batches(count: number, seed: number): Batch[] {
  const next = mulberry32(seed);
  const n = train.batchSize * train.seqLen;
  return Array.from({ length: count }, () => ({ inputs: tokens(next, n), targets: tokens(next, n) }));
}

/** Uniform in [−scale, scale). */
function noise(seed: number, count: number, scale: number): Float32Array {
  const next = mulberry32(seed);
  return Float32Array.from({ length: count }, () => (2 * next() - 1) * scale);
}

const params = (seed: number) => initParameters(buildLayout(config), seed);

/** GPT-2 init scaled up and shifted (as gpt.test.ts), so no gradient sits near AdamW's ε. */
function perturbedParams(seed: number): Float32Array {
  const p = params(seed);
  const next = mulberry32(seed + 1);
  for (let i = 0; i < p.length; i++) p[i] = (p[i] as number) * 4 + 0.05 * (next() - 0.5);
  return p;
}

let shared: GptKernels | undefined;
async function kernels(device: GPUDevice): Promise<GptKernels> {
  shared ??= await createGptKernels(device, config.nEmbd / config.nHead);
  return shared;
}

function gpuStages(device: GPUDevice, k: GptKernels) {
  return (spec: StageSpec, local: Float32Array, microBatch: number) =>
    GpuStageTrainer.create(device, config, train, spec, local, { microBatch, kernels: k });
}

/** max |a − b| and its mean. */
function differences(a: Float32Array, b: Float32Array): { max: number; mean: number } {
  let max = 0;
  let sum = 0;
  for (let i = 0; i < a.length; i++) {
    const diff = Math.abs((a[i] as number) - (b[i] as number));
    max = Math.max(max, diff);
    sum += diff;
  }
  return { max, mean: sum / a.length };
}

const maxAbs = (values: ArrayLike<number>) => Array.from(values).reduce((a, v) => Math.max(a, Math.abs(v)), 0);

/** Magnitude-scaled comparison: |got − want| ≤ tol·max|want| + rtol·|want|. */
function expectClose(got: ArrayLike<number>, want: ArrayLike<number>, what: string, tol = 1e-5, rtol = 1e-4) {
  const result = compareArrays(got, want, { atol: tol * maxAbs(want), rtol });
  expect(result.ok, `${what}: ${result.message}`).toBe(true);
}

describe('GpuGpt stages', () => {
  it('chained on the GPU (output → input, input gradient → output gradient) give the whole model', async () => {
    const { device } = gpu();
    const k = await kernels(device);
    const [B, T] = [train.batchSize, train.seqLen];
    const p = params(3);
    const { inputs, targets } = batches(1, 5)[0] as Batch;
    const whole = await GpuGpt.create(device, config, B, T, k);
    const specs = splitStages(config.nLayer, 3);
    const stages = await Promise.all(specs.map((stage) => GpuGpt.create(device, config, B, T, k, { stage })));
    try {
      whole.writeParams(p);
      const wantLoss = await whole.forwardBackward(inputs, targets);
      const want = await whole.readGrads();
      const [first, middle, last] = stages as [GpuGpt, GpuGpt, GpuGpt];
      for (const stage of stages) stage.writeParams(gatherStage(buildStageLayout(config, stage.stage), p));
      first.writeBatch(inputs, null);
      await first.submit(false, [], false);
      middle.writeInput(first.outputView);
      await middle.submit(false, [], false);
      last.writeInput(middle.outputView);
      last.writeBatch(null, targets);
      // The same kernels on the same values: the loss is bit-identical.
      expect(await last.submit(false, [], true)).toBe(wantLoss);
      await last.submit(true, [], false, { forward: false });
      middle.writeOutputGrad(last.inputGradView);
      await middle.submit(true, [], false, { forward: false });
      first.writeOutputGrad(middle.inputGradView);
      await first.submit(true, [], false, { forward: false });

      const grads = await Promise.all(stages.map((stage) => stage.readGrads()));
      const layouts = specs.map((spec) => buildStageLayout(config, spec));
      const firstTied = tiedValues(layouts[0] as StageLayout, grads[0] as Float32Array) as Float32Array;
      const lastTied = tiedValues(layouts[2] as StageLayout, grads[2] as Float32Array) as Float32Array;
      // The whole model adds the head's wte gradient and then the embedding's; the stages sum them after.
      for (let i = 0; i < firstTied.length; i++) firstTied[i] = (firstTied[i] as number) + (lastTied[i] as number);
      layouts.forEach((layout, s) => {
        const got = ownedValues(layout, grads[s] as Float32Array);
        expectClose(got, want.subarray(layout.owned[0], layout.owned[1]), `stage ${s} gradients`, 1e-6, 0);
      });
      // The blocks' gradients do not depend on that order: bit-identical.
      const middleLayout = layouts[1] as StageLayout;
      expect(
        Array.from(ownedValues(middleLayout, grads[1] as Float32Array)).every(
          (g, i) => g === want[middleLayout.owned[0] + i],
        ),
      ).toBe(true);

      expect(() => middle.writeBatch(inputs, null)).toThrow(/stage 1 takes activations \(writeInput\), not tokens/);
      expect(() => first.writeBatch(inputs, targets)).toThrow(/stage 0 has no head: it takes no targets/);
      expect(() => first.writeInput(new Float32Array(B * T * C))).toThrow(/stage 0 embeds/);
      expect(() => last.writeOutputGrad(new Float32Array(B * T * C))).toThrow(/stage 2 has the head/);
      expect(() => middle.writeInput(new Float32Array(3))).toThrow(/stage 1 expects 1024 input activations, got 3/);
      await expect(middle.submit(false)).rejects.toThrow(/stage 1 has no head: it computes no loss/);
    } finally {
      whole.destroy();
      for (const stage of stages) stage.destroy();
    }
  });
});

describe('GpuStageTrainer', () => {
  it('matches CpuStageTrainer stage by stage: outputs, input gradients, tied gradients, norms, updates (2 slots)', async () => {
    const { device } = gpu();
    const k = await kernels(device);
    const microBatch = 2;
    const BT = microBatch * train.seqLen;
    const p = perturbedParams(11);
    const micro = batches(2, 13).map((b) => ({ inputs: b.inputs.subarray(0, BT), targets: b.targets.subarray(0, BT) }));
    for (const spec of splitStages(config.nLayer, 3)) {
      const local = gatherStage(buildStageLayout(config, spec), p);
      const cpu = new CpuStageTrainer(train, spec, local, config, { microBatch, slots: 2 });
      const stage = await GpuStageTrainer.create(device, config, train, spec, local, {
        microBatch,
        slots: 2,
        kernels: k,
      });
      try {
        // Two micro-batches in flight (GPipe): both forward, then both backward, the later first.
        for (const slot of [0, 1]) {
          const input = spec.embeds ? (micro[slot] as Batch).inputs : noise(100 + slot, BT * C, 1);
          const targets = spec.head ? (micro[slot] as Batch).targets : null;
          const [got, want] = [await stage.forward(slot, input, targets), await cpu.forward(slot, input, targets)];
          if (spec.head) {
            expect(Math.abs((got as number) - (want as number)) / (want as number)).toBeLessThan(1e-5);
          } else {
            expectClose(got as Float32Array, want as Float32Array, `stage ${spec.index} slot ${slot} output`);
          }
        }
        for (const slot of [1, 0]) {
          const dOutput = spec.head ? null : noise(200 + slot, BT * C, 1e-1);
          const accumulate = slot === 0;
          const [got, want] = [
            await stage.backward(slot, dOutput, accumulate),
            await cpu.backward(slot, dOutput, accumulate),
          ];
          if (spec.embeds) expect(got).toBeNull();
          else
            expectClose(got as Float32Array, want as Float32Array, `stage ${spec.index} slot ${slot} input gradient`);
        }
        const [gotTied, wantTied] = [await stage.tiedGrad(), await cpu.tiedGrad()];
        if (spec.index === 1) expect(gotTied).toBeNull();
        else expectClose(gotTied as Float32Array, wantTied as Float32Array, `stage ${spec.index} tied gradient`);
        const [gotSum, wantSum] = [await stage.gradSumSquares(), await cpu.gradSumSquares()];
        expect(Math.abs(gotSum - wantSum) / wantSum, `stage ${spec.index} Σg²`).toBeLessThan(1e-4);
        // The update against the CPU's AdamW on the GPU's own gradient: comparing with the CPU
        // stage's parameters instead would compare AdamW's first step on gradients that are zero
        // but for rounding (the key bias), which moves them by ±lr on either side.
        const want = {
          params: local.slice(),
          grads: await stage.getGrads(),
          m: new Float32Array(local.length),
          v: new Float32Array(local.length),
        };
        const runs = new AdamWRuns(stage.layout);
        runs.point(want);
        runs.update(train, lr, 1, 0.3);
        await stage.update(lr, 0.3);
        expectClose(await stage.getParams(), want.params, `stage ${spec.index} parameters`, 1e-6, 1e-6);
        const state = await stage.getOptimizerState();
        expect(state.step).toBe(1);
        expectClose(state.m, want.m, `stage ${spec.index} first moments`, 1e-6, 1e-6);
        expectClose(state.v, want.v, `stage ${spec.index} second moments`, 1e-6, 1e-6);
      } finally {
        stage.destroy();
        cpu.destroy();
      }
    }
  });

  it('refuses a slot it does not have, a backward before its forward, the wrong input and a tied gradient it lacks', async () => {
    const { device } = gpu();
    const k = await kernels(device);
    const [first, middle] = splitStages(config.nLayer, 3) as [StageSpec, StageSpec];
    const local = gatherStage(buildStageLayout(config, middle), params(1));
    const stage = await GpuStageTrainer.create(device, config, train, middle, local, { microBatch: 1, kernels: k });
    try {
      const activations = new Float32Array(train.seqLen * C);
      await expect(stage.forward(1, activations, null)).rejects.toThrow(/slot 1 of 1/);
      await expect(stage.backward(0, activations, false)).rejects.toThrow(/backward needs a forward pass first/);
      await expect(stage.forward(0, new Int32Array(train.seqLen), null)).rejects.toThrow(/expects activations/);
      await stage.forward(0, activations, null);
      await expect(stage.backward(0, null, false)).rejects.toThrow(/needs the gradient of its outputs/);
      await expect(stage.setTiedGrad(new Float32Array(4))).rejects.toThrow(/has no tied gradient/);
      await expect(stage.setParams(new Float32Array(3))).rejects.toThrow(/has \d+ parameters, got 3/);
    } finally {
      stage.destroy();
    }
    await expect(
      GpuStageTrainer.create(device, config, train, first, new Float32Array(2), { microBatch: 1, kernels: k }),
    ).rejects.toThrow(/stage 0 has \d+ parameters, got 2/);
  });
});

describe('PipelineTrainer of GpuStageTrainers', () => {
  it('clips: the gradient norm of these batches is well above gradClip at every step', async () => {
    const { device } = gpu();
    const one = await GpuTrainer.create(device, config, train, params(7), await kernels(device));
    try {
      for (const batch of batches(3, 17)) {
        await one.step(batch, lr);
        expect(await one.lastGradNorm()).toBeGreaterThan(3 * train.gradClip);
      }
    } finally {
      one.destroy();
    }
  });

  for (const [S, M] of [
    [2, 1],
    [2, 2],
    [3, 1],
    [3, 2],
  ] as const) {
    it(`of ${S} stages and ${M} micro-batches trains as one GpuTrainer (losses 1e-5, parameters as GPU vs CPU)`, async () => {
      const { device } = gpu();
      const k = await kernels(device);
      const one = await GpuTrainer.create(device, config, train, params(7), k);
      const pipe = await PipelineTrainer.create(config, train, params(7), {
        stages: S,
        micros: M,
        createStage: gpuStages(device, k),
      });
      try {
        expect(pipe.backend).toBe('webgpu');
        const data = batches(3, 17);
        for (const [i, batch] of data.entries()) {
          const want = await one.step(batch, lr);
          const got = await pipe.step(batch, lr);
          expect(Math.abs(got - want) / want, `step ${i}: ${got} vs ${want}`).toBeLessThan(1e-5);
        }
        // The GpuTrainer test's bounds against the CPU trainer (max 1e-4, mean 1e-7).
        const diff = differences(await pipe.getParams(), await one.getParams());
        expect(diff.max).toBeLessThan(1e-4);
        expect(diff.mean).toBeLessThan(1e-7);
        const [gotState, wantState] = [await pipe.getOptimizerState(), await one.getOptimizerState()];
        expect(gotState.step).toBe(wantState.step);
        expect(compareArrays(gotState.m, wantState.m, { atol: 1e-5, rtol: 1e-3 }).ok).toBe(true);
        // The tied copies stay bitwise equal.
        const first = pipe.stages[0] as StageTrainer;
        const last = pipe.stages.at(-1) as StageTrainer;
        const a = tiedValues(first.layout, await first.getParams()) as Float32Array;
        const b = tiedValues(last.layout, await last.getParams()) as Float32Array;
        expect(
          Buffer.from(b.buffer, b.byteOffset, b.byteLength).equals(Buffer.from(a.buffer, a.byteOffset, a.byteLength)),
        ).toBe(true);
        expect(Math.abs((await pipe.evaluate(data)) - (await one.evaluate(data)))).toBeLessThan(1e-5);
      } finally {
        pipe.destroy();
        one.destroy();
      }
    });
  }

  it('resumes exactly from parameters and optimizer state', async () => {
    const { device } = gpu();
    const k = await kernels(device);
    const options = { stages: 3, micros: 2, createStage: gpuStages(device, k) };
    const [b0, b1] = batches(2, 23) as [Batch, Batch];
    const pipe = await PipelineTrainer.create(config, train, params(7), options);
    const other = await PipelineTrainer.create(config, train, params(9), options);
    try {
      await pipe.step(b0, lr);
      await other.setParams(await pipe.getParams());
      await other.setOptimizerState(await pipe.getOptimizerState());
      expect(await other.step(b1, lr)).toBe(await pipe.step(b1, lr));
      const [x, y] = [await other.getParams(), await pipe.getParams()];
      expect(Buffer.from(x.buffer).equals(Buffer.from(y.buffer))).toBe(true);
      expect((await other.getOptimizerState()).step).toBe(2);
    } finally {
      pipe.destroy();
      other.destroy();
    }
  });
});
