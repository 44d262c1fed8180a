/**
 * A pipeline of S stages in one process, as one Trainer: the simulator's replica of S volunteers,
 * and the reference that the stages over the mesh must match. Each step splits the batch into M
 * micro-batches and runs each through every stage forward and back before the next (one slot per
 * stage; the order of a real schedule changes when things run, not what they compute), then ties
 * the wte gradients, takes the global norm over the stages and updates every stage.
 */
import type { GptConfig } from '../config.ts';
import { buildLayout, type ParamLayout } from '../layout.ts';
import type { Batch, OptimizerState, Trainer } from '../train/trainer.ts';
import type { TrainConfig } from '../train-config.ts';
import {
  CpuStageTrainer,
  pipelineGradScale,
  type StageTrainer,
  type StageTrainerOptions,
  tiedGradSum,
} from './stage-trainer.ts';
import { buildStageLayout, gatherStage, type StageSpec, scatterStage, splitStages } from './stages.ts';

export interface PipelineOptions {
  /** S: stages, 1 … n_layer. */
  stages: number;
  /** M: micro-batches per step; must divide the batch size (default: `defaultMicros`). */
  micros?: number;
  /** Makes a stage's engine (default: the CPU stage). */
  createStage?: (spec: StageSpec, params: Float32Array, microBatch: number) => Promise<StageTrainer>;
  cpu?: Omit<StageTrainerOptions, 'microBatch' | 'slots'>;
}

/**
 * The default M: the smallest divisor of the batch that is at least 4S, so the bubble
 * (S−1)/(M+S−1) is under 1/5; a batch of fewer than 4S rows goes one row per micro-batch.
 */
export function defaultMicros(batchSize: number, stages: number): number {
  for (let m = 4 * stages; m < batchSize; m++) if (batchSize % m === 0) return m;
  return batchSize;
}

/** The micro-batch count a pipeline of S stages uses for a batch, checked. */
export function pipelineMicros(batchSize: number, stages: number, micros = defaultMicros(batchSize, stages)): number {
  if (!Number.isInteger(micros) || micros < 1 || batchSize % micros !== 0) {
    throw new RangeError(`micro-batches must divide the batch of ${batchSize} rows, got ${micros}`);
  }
  return micros;
}

/** Micro-batch m of a batch: rows [m·b, (m+1)·b). */
export function microBatchOf(batch: Batch, m: number, micros: number): Batch {
  const n = batch.inputs.length / micros;
  return { inputs: batch.inputs.subarray(m * n, (m + 1) * n), targets: batch.targets.subarray(m * n, (m + 1) * n) };
}

export class PipelineTrainer implements Trainer {
  readonly backend: 'cpu' | 'webgpu';
  readonly layout: ParamLayout;

  private constructor(
    readonly train: TrainConfig,
    readonly stages: StageTrainer[],
    readonly micros: number,
  ) {
    this.backend = (stages[0] as StageTrainer).backend;
    this.layout = (stages[0] as StageTrainer).layout.global;
  }

  static async create(
    config: GptConfig,
    train: TrainConfig,
    params: Float32Array,
    options: PipelineOptions,
  ): Promise<PipelineTrainer> {
    const layout = buildLayout(config);
    if (params.length !== layout.size) {
      throw new RangeError(`params have ${params.length} values, the model needs ${layout.size}`);
    }
    const micros = pipelineMicros(train.batchSize, options.stages, options.micros);
    const microBatch = train.batchSize / micros;
    const create =
      options.createStage ??
      ((spec: StageSpec, local: Float32Array, rows: number) =>
        Promise.resolve(new CpuStageTrainer(train, spec, local, config, { ...options.cpu, microBatch: rows })));
    const stages: StageTrainer[] = [];
    try {
      for (const spec of splitStages(config.nLayer, options.stages)) {
        stages.push(await create(spec, gatherStage(buildStageLayout(config, spec), params), microBatch));
      }
    } catch (error) {
      for (const stage of stages) stage.destroy();
      throw error;
    }
    return new PipelineTrainer(train, stages, micros);
  }

  private get first(): StageTrainer {
    return this.stages[0] as StageTrainer;
  }

  private get last(): StageTrainer {
    return this.stages.at(-1) as StageTrainer;
  }

  /** Runs one micro-batch through every stage; returns its loss. */
  private async forward(micro: Batch): Promise<number> {
    let x: Int32Array | Float32Array = micro.inputs;
    for (const stage of this.stages) {
      const out = await stage.forward(0, x, stage.layout.stage.head ? micro.targets : null);
      if (typeof out === 'number') return out;
      x = out;
    }
    throw new Error('the last stage returned no loss');
  }

  async step(batch: Batch, lr: number): Promise<number> {
    if (!Number.isFinite(lr) || lr < 0) throw new RangeError(`learning rate ${lr} must be finite and ≥ 0`);
    let loss = 0;
    for (let m = 0; m < this.micros; m++) {
      loss += await this.forward(microBatchOf(batch, m, this.micros));
      let d: Float32Array | null = null;
      for (let s = this.stages.length - 1; s >= 0; s--) {
        d = await (this.stages[s] as StageTrainer).backward(0, d, m > 0);
      }
    }
    if (this.stages.length > 1) {
      const [a, b] = await Promise.all([this.first.tiedGrad(), this.last.tiedGrad()]);
      if (!a || !b) throw new Error('the first and last stages hold no tied gradient');
      const sum = tiedGradSum(a, b);
      await Promise.all([this.first.setTiedGrad(sum), this.last.setTiedGrad(sum)]);
    }
    let sum = 0;
    for (const stage of this.stages) sum += await stage.gradSumSquares();
    const gradScale = pipelineGradScale(sum, this.micros, this.train.gradClip);
    await Promise.all(this.stages.map((stage) => stage.update(lr, gradScale)));
    return loss / this.micros;
  }

  async evaluate(batches: Batch[]): Promise<number> {
    if (batches.length === 0) throw new RangeError('evaluate needs at least one batch');
    let total = 0;
    for (const batch of batches) {
      let loss = 0;
      for (let m = 0; m < this.micros; m++) loss += await this.forward(microBatchOf(batch, m, this.micros));
      total += loss / this.micros;
    }
    return total / batches.length;
  }

  /** Gathers a global vector from each stage's. */
  private async gather(read: (stage: StageTrainer) => Promise<Float32Array>): Promise<Float32Array> {
    const global = new Float32Array(this.layout.size);
    for (const stage of this.stages) scatterStage(stage.layout, await read(stage), global);
    return global;
  }

  getParams(): Promise<Float32Array> {
    return this.gather((stage) => stage.getParams());
  }

  async setParams(params: Float32Array): Promise<void> {
    await Promise.all(this.stages.map((stage) => stage.setParams(gatherStage(stage.layout, params))));
  }

  async getOptimizerState(): Promise<OptimizerState> {
    const states = await Promise.all(this.stages.map((stage) => stage.getOptimizerState()));
    const m = new Float32Array(this.layout.size);
    const v = new Float32Array(this.layout.size);
    this.stages.forEach((stage, s) => {
      const state = states[s] as OptimizerState;
      scatterStage(stage.layout, state.m, m);
      scatterStage(stage.layout, state.v, v);
    });
    return { m, v, step: (states[0] as OptimizerState).step };
  }

  async setOptimizerState(state: OptimizerState): Promise<void> {
    if (state.m.length !== this.layout.size || state.v.length !== this.layout.size) {
      throw new RangeError(`optimizer state has ${state.m.length}/${state.v.length} values, needs ${this.layout.size}`);
    }
    await Promise.all(
      this.stages.map((stage) =>
        stage.setOptimizerState({
          m: gatherStage(stage.layout, state.m),
          v: gatherStage(stage.layout, state.v),
          step: state.step,
        }),
      ),
    );
  }

  destroy(): void {
    for (const stage of this.stages) stage.destroy();
  }
}
