/**
 * CPU engines for the simulator's workers that share what they can. The workers of one process
 * take turns on one thread (a CPU step runs to its end before the clock moves on), so one
 * `CpuCompute` per model and batch shape serves all of them: its activations, their gradients, the
 * parameter gradient and the step's working copies of θ, m and v (for `small` at 16×64, 560 MB)
 * exist once instead of once a worker.
 * Each worker's trainer keeps what is truly its own: θ_local and the AdamW moments m and v
 * (12 bytes a parameter) and its step count. The arithmetic is the same code on the same buffers,
 * so the losses are the bits a worker with an engine of its own gets (shared-cpu.test.ts).
 */
import {
  type CpuBackendOptions,
  CpuCompute,
  CpuTrainer,
  type GptConfig,
  type TrainConfig,
  type Trainer,
} from '@shoal/model';

export interface SharedCpuTrainers {
  createTrainer(model: GptConfig, train: TrainConfig, params: Float32Array): Promise<Trainer>;
  /** The computes made so far (one per model and batch shape). */
  readonly computes: readonly CpuCompute[];
  /** Destroys every compute: call after the trainers made here are done with. */
  destroy(): void;
}

export function sharedCpuTrainers(options: CpuBackendOptions = {}): SharedCpuTrainers {
  const computes = new Map<string, CpuCompute>();
  return {
    async createTrainer(model, train, params) {
      const key = JSON.stringify([model, train.batchSize, train.seqLen]);
      let compute = computes.get(key);
      if (!compute) {
        compute = new CpuCompute(model, train.batchSize, train.seqLen, options);
        computes.set(key, compute);
      }
      return new CpuTrainer(model, train, params, { compute });
    },
    get computes() {
      return [...computes.values()];
    },
    destroy() {
      for (const compute of computes.values()) compute.destroy();
      computes.clear();
    },
  };
}
