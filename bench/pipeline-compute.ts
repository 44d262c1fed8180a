/**
 * Each pipeline stage's compute for bench/pipeline.ts, timed on the CPU engine in the main
 * thread, one stage at a time (so nothing shares its core): one micro-batch's forward and
 * backward, and the step's end (tied gradient, Σg², AdamW). bench/timing.ts times GPU dispatches;
 * this is the wall clock around synchronous CPU work. These times drive simulateSchedule.
 */
import type { GptConfig } from '../packages/model/src/config.ts';
import { CpuStageTrainer } from '../packages/model/src/pipeline/stage-trainer.ts';
import { buildStageLayout, gatherStage, splitStages } from '../packages/model/src/pipeline/stages.ts';
import { microBatchOf } from '../packages/model/src/pipeline/trainer.ts';
import type { Batch } from '../packages/model/src/train/trainer.ts';
import type { TrainConfig } from '../packages/model/src/train-config.ts';

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

/** Seconds per stage (length S), medians. */
export interface StageSeconds {
  /** One micro-batch's forward. */
  forward: number[];
  /** One micro-batch's backward. */
  backward: number[];
  /** Once a step: tied gradient copy and set (first and last stage), Σg², AdamW. */
  optimizer: number[];
}

export async function measureStageTimes(o: {
  config: GptConfig;
  train: TrainConfig;
  params: Float32Array;
  stages: number;
  micros: number;
  batch: Batch;
  /** Timed repetitions after one warm-up. */
  reps: number;
}): Promise<StageSeconds> {
  const microBatch = o.train.batchSize / o.micros;
  const trainers = splitStages(o.config.nLayer, o.stages).map(
    (spec) =>
      new CpuStageTrainer(o.train, spec, gatherStage(buildStageLayout(o.config, spec), o.params), o.config, {
        microBatch,
      }),
  );
  const S = trainers.length;
  const samples = { forward: [] as number[][], backward: [] as number[][], optimizer: [] as number[][] };
  for (const list of Object.values(samples)) for (let s = 0; s < S; s++) list.push([]);
  const micro = microBatchOf(o.batch, 0, o.micros);
  const clock = async (into: number[][], s: number, work: () => Promise<unknown>) => {
    const start = performance.now();
    const result = await work();
    (into[s] as number[]).push((performance.now() - start) / 1000);
    return result;
  };
  for (let rep = 0; rep <= o.reps; rep++) {
    let x: Int32Array | Float32Array = micro.inputs;
    for (const [s, stage] of trainers.entries()) {
      const out = await clock(samples.forward, s, () =>
        stage.forward(0, x, stage.layout.stage.head ? micro.targets : null),
      );
      if (out instanceof Float32Array) x = out;
    }
    let d: Float32Array | null = null;
    for (let s = S - 1; s >= 0; s--) {
      const stage = trainers[s] as CpuStageTrainer;
      d = (await clock(samples.backward, s, () => stage.backward(0, d, false))) as Float32Array | null;
    }
    for (const [s, stage] of trainers.entries()) {
      await clock(samples.optimizer, s, async () => {
        const tied = await stage.tiedGrad();
        if (tied) await stage.setTiedGrad(tied);
        await stage.gradSumSquares();
        await stage.update(0, 0); // lr 0: AdamW's full cost, the parameters unchanged
      });
    }
  }
  for (const stage of trainers) stage.destroy();
  // Rep 0 is the warm-up.
  const medians = (list: number[][]) => list.map((times) => median(times.slice(1)));
  return {
    forward: medians(samples.forward),
    backward: medians(samples.backward),
    optimizer: medians(samples.optimizer),
  };
}
