/**
 * AdamW over a layout with nanoGPT's decay rule (2-D tensors only), one call per contiguous run of
 * tensors with the same decay flag. The runs' views are made when the arrays change, not per step.
 * Shared by the CPU trainer and the CPU pipeline stage.
 */
import { adamwUpdate, type SimdOptimizer } from '@shoal/gpu';
import type { ParamLayout } from '../layout.ts';
import type { TrainConfig } from '../train-config.ts';

export interface AdamWArrays {
  params: Float32Array;
  grads: Float32Array;
  m: Float32Array;
  v: Float32Array;
}

export class AdamWRuns {
  private readonly runs: { offset: number; size: number; decay: boolean }[] = [];
  private views: (AdamWArrays & { decay: boolean })[] = [];

  /** `optimizer`: run the update in SIMD (the arrays must then live in its arena). */
  constructor(
    layout: ParamLayout,
    private readonly optimizer: SimdOptimizer | null = null,
  ) {
    for (const t of layout.tensors) {
      const last = this.runs.at(-1);
      if (last && last.decay === t.decay && last.offset + last.size === t.offset) last.size += t.size;
      else this.runs.push({ offset: t.offset, size: t.size, decay: t.decay });
    }
  }

  /** Points the runs at new arrays (after setParams or setOptimizerState). */
  point(arrays: AdamWArrays): void {
    this.views = this.runs.map(({ offset, size, decay }) => {
      const range = (a: Float32Array) => a.subarray(offset, offset + size);
      return {
        params: range(arrays.params),
        grads: range(arrays.grads),
        m: range(arrays.m),
        v: range(arrays.v),
        decay,
      };
    });
  }

  /** AdamW step `t` (from 1) at learning rate `lr`; the gradient is multiplied by `gradScale` first. */
  update(train: TrainConfig, lr: number, t: number, gradScale: number): void {
    const { beta1, beta2, eps, weightDecay } = train;
    if (this.optimizer) {
      const runs = this.views.map((run) => ({ ...run, decay: run.decay ? weightDecay : 0 }));
      this.optimizer.updateRuns(runs, lr, beta1, beta2, eps, t, gradScale);
      return;
    }
    for (const run of this.views) {
      const decay = run.decay ? weightDecay : 0;
      adamwUpdate(run.params, run.grads, run.m, run.v, run.params.length, lr, beta1, beta2, eps, decay, t, gradScale);
    }
  }
}
