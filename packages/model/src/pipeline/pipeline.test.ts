import { clipScale, compareArrays, gradNorm, mulberry32 } from '@shoal/gpu';
import { describe, expect, it } from 'vitest';
import type { GptConfig } from '../config.ts';
import { CpuGpt } from '../cpu/gpt.ts';
import { CpuTrainer } from '../cpu/trainer.ts';
import { initParameters } from '../init.ts';
import { buildLayout } from '../layout.ts';
import type { Batch } from '../train/trainer.ts';
import { defaultTrainConfig } from '../train-config.ts';
import { buildStageLayout, gatherStage, ownedValues, scatterStage, splitStages, tiedValues } from './stages.ts';
import { PipelineTrainer } from './trainer.ts';

// Three blocks so that S = 3 has a middle stage; a shape every SIMD kernel takes.
const config: GptConfig = { nLayer: 3, nHead: 2, nEmbd: 16, blockSize: 8, vocabSize: 32 };

function batchOf(seed: number, B: number, T: number): Batch {
  const next = mulberry32(seed);
  const tokens = () => Int32Array.from({ length: B * T }, () => Math.floor(next() * config.vocabSize));
  return { inputs: tokens(), targets: tokens() };
}

/** Larger-than-init weights so every gradient is well away from zero. */
function params(seed: number): Float32Array {
  const p = initParameters(buildLayout(config), seed);
  const next = mulberry32(seed + 1);
  for (let i = 0; i < p.length; i++) p[i] = (p[i] as number) * 10 + 0.1 * (next() - 0.5);
  return p;
}

describe('pipeline stages', () => {
  it('partition the blocks and the global vector, the last stage holding a copy of wte', () => {
    const layout = buildLayout(config);
    for (let S = 1; S <= 3; S++) {
      const stages = splitStages(config.nLayer, S);
      expect(stages.map((s) => s.endBlock - s.firstBlock).reduce((a, b) => a + b)).toBe(config.nLayer);
      expect(stages[0]?.embeds && stages.at(-1)?.head).toBe(true);
      const global = Float32Array.from({ length: layout.size }, (_, i) => i);
      const back = new Float32Array(layout.size).fill(-1);
      let owned = 0;
      for (const spec of stages) {
        const stage = buildStageLayout(config, spec);
        const local = gatherStage(stage, global);
        scatterStage(stage, local, back);
        owned += stage.owned[1] - stage.owned[0];
        if (S > 1 && spec.head) {
          expect(stage.tiedCopy?.name).toBe('transformer.wte.weight');
          expect(Array.from(tiedValues(stage, local) ?? [])).toEqual(
            Array.from(global.subarray(0, stage.tiedCopy?.size)),
          );
        } else {
          expect(stage.tiedCopy).toBeNull();
        }
      }
      expect(owned).toBe(layout.size);
      expect(back).toEqual(global);
    }
    expect(() => splitStages(3, 4)).toThrow(/from 1 to n_layer = 3/);
    expect(splitStages(5, 3).map((s) => s.endBlock - s.firstBlock)).toEqual([1, 2, 2]);
  });

  it('chained in float64 give the whole model loss and gradients (tied wte summed)', () => {
    const [B, T] = [2, 8];
    const { inputs, targets } = batchOf(3, B, T);
    const whole = new CpuGpt<Float64Array>(config, B, T, Float64Array);
    const p = Float64Array.from(params(5));
    const loss = whole.forward(p, inputs, targets);
    const want = new Float64Array(whole.layout.size);
    whole.backward(p, want);
    for (const S of [2, 3]) {
      const specs = splitStages(config.nLayer, S);
      const models = specs.map((stage) => new CpuGpt<Float64Array>(config, B, T, Float64Array, { stage }));
      const locals = models.map((m) => {
        const local = new Float64Array(m.layout.size);
        const stage = buildStageLayout(config, m.stage);
        local.set(p.subarray(stage.owned[0], stage.owned[1]), stage.ownedOffset);
        if (stage.tiedCopy) local.set(p.subarray(0, stage.tiedCopy.size), 0);
        return local;
      });
      let x: Int32Array | Float64Array = inputs;
      let got = Number.NaN;
      models.forEach((m, s) => {
        got = m.forward(locals[s] as Float64Array, x, targets);
        x = m.output;
      });
      expect(Math.abs(got - loss)).toBeLessThan(1e-12);
      const grads = models.map((m) => new Float64Array(m.layout.size));
      let d: Float64Array | undefined;
      for (let s = S - 1; s >= 0; s--) {
        const m = models[s] as CpuGpt<Float64Array>;
        m.backward(locals[s] as Float64Array, grads[s] as Float64Array, { dOutput: d });
        d = m.inputGrad;
      }
      const layouts = specs.map((spec) => buildStageLayout(config, spec));
      const firstTied = tiedValues(layouts[0] as never, grads[0] as Float64Array) as Float64Array;
      const lastTied = tiedValues(layouts[S - 1] as never, grads[S - 1] as Float64Array) as Float64Array;
      for (let i = 0; i < firstTied.length; i++) firstTied[i] = (firstTied[i] as number) + (lastTied[i] as number);
      layouts.forEach((stage, s) => {
        const g = ownedValues(stage, grads[s] as Float64Array);
        const ref = want.subarray(stage.owned[0], stage.owned[1]);
        const scale = ref.reduce((a, v) => Math.max(a, Math.abs(v)), 0);
        const result = compareArrays(g, ref, { atol: 1e-12 * scale, rtol: 0 });
        expect(result.ok, `S ${S} stage ${s}: ${result.message}`).toBe(true);
      });
    }
  });

  it('refuses the wrong kind of input and a backward with no output gradient', () => {
    const [first, second] = splitStages(config.nLayer, 2);
    const a = new CpuGpt<Float32Array>(config, 1, 8, Float32Array, { stage: first });
    const b = new CpuGpt<Float32Array>(config, 1, 8, Float32Array, { stage: second });
    const pa = new Float32Array(a.layout.size);
    const pb = new Float32Array(b.layout.size);
    expect(() => a.forward(pa, new Float32Array(8 * 16), null)).toThrow(/stage 0 expects 8 tokens/);
    expect(() => b.forward(pb, new Int32Array(8), new Int32Array(8))).toThrow(/stage 1 expects 128 activations/);
    a.forward(pa, new Int32Array(8), null);
    expect(() => a.backward(pa, new Float32Array(a.layout.size))).toThrow(/needs the gradient of its 128 outputs/);
  });
});

describe('PipelineTrainer', () => {
  const train = defaultTrainConfig({ batchSize: 4, seqLen: 8, gradClip: 0.05, maxLr: 1e-2 });
  const batches = [1, 2, 3].map((seed) => batchOf(seed, train.batchSize, train.seqLen));

  it('clips: the gradient norm of these batches is above gradClip', () => {
    const model = new CpuGpt<Float32Array>(config, train.batchSize, train.seqLen, Float32Array);
    const p = params(7);
    const b = batches[0] as Batch;
    model.forward(p, b.inputs, b.targets);
    const g = new Float32Array(model.layout.size);
    model.backward(p, g);
    expect(clipScale(gradNorm(g), train.gradClip)).toBeLessThan(0.5);
  });

  for (const [S, M] of [
    [2, 1],
    [2, 2],
    [3, 1],
    [3, 4],
  ] as const) {
    it(`of ${S} stages and ${M} micro-batches trains as one engine (losses 1e-5, parameters 1e-4)`, async () => {
      const one = new CpuTrainer(config, train, params(7));
      const pipe = await PipelineTrainer.create(config, train, params(7), { stages: S, micros: M });
      for (const [i, b] of batches.entries()) {
        const want = await one.step(b, 1e-2);
        const got = await pipe.step(b, 1e-2);
        expect(Math.abs(got - want) / want, `step ${i}`).toBeLessThan(1e-5);
      }
      const [gotParams, wantParams] = [await pipe.getParams(), await one.getParams()];
      const result = compareArrays(gotParams, wantParams, { atol: 1e-4, rtol: 0 });
      expect(result.ok, result.message).toBe(true);
      const [gotState, wantState] = [await pipe.getOptimizerState(), await one.getOptimizerState()];
      expect(gotState.step).toBe(wantState.step);
      expect(compareArrays(gotState.m, wantState.m, { atol: 1e-5, rtol: 1e-3 }).ok).toBe(true);
      // The tied copies stay bitwise equal.
      const first = pipe.stages[0];
      const last = pipe.stages.at(-1);
      if (!first || !last) throw new Error('no stages');
      const a = tiedValues(first.layout, await first.getParams());
      const b = tiedValues(last.layout, await last.getParams());
      expect(Array.from(b ?? [])).toEqual(Array.from(a ?? []));
      expect(Math.abs((await pipe.evaluate(batches)) - (await one.evaluate(batches)))).toBeLessThan(1e-4);
    });
  }

  it('takes parameters and optimizer state back as it gave them', async () => {
    const pipe = await PipelineTrainer.create(config, train, params(7), { stages: 3 });
    await pipe.step(batches[0] as Batch, 1e-2);
    const [p, state] = [await pipe.getParams(), await pipe.getOptimizerState()];
    const other = await PipelineTrainer.create(config, train, params(9), { stages: 3 });
    await other.setParams(p);
    await other.setOptimizerState(state);
    const b = batches[1] as Batch;
    expect(await other.step(b, 1e-2)).toBe(await pipe.step(b, 1e-2));
    expect(await other.getParams()).toEqual(await pipe.getParams());
    await expect(PipelineTrainer.create(config, train, params(1), { stages: 2, micros: 3 })).rejects.toThrow(
      /micro-batches must divide the batch of 4 rows, got 3/,
    );
  });
});
