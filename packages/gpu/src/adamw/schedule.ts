/**
 * Learning-rate schedule as nanoGPT's get_lr: linear warmup, then cosine decay to minLr at
 * totalSteps, then minLr. Warmup uses (step + 1) / (warmupSteps + 1), as current nanoGPT does, so
 * step 0 already moves the weights (the older `step / warmupSteps` wasted it with lr = 0).
 */
export interface LearningRateSchedule {
  maxLr: number;
  /** nanoGPT sets this to ~maxLr / 10, per Chinchilla. */
  minLr: number;
  warmupSteps: number;
  /** nanoGPT's lr_decay_iters: the step where the cosine reaches minLr (≈ max_iters). */
  totalSteps: number;
}

/** The learning rate at `step` (counted from 0). */
export function learningRate(step: number, schedule: LearningRateSchedule): number {
  const { maxLr, minLr, warmupSteps, totalSteps } = schedule;
  if (step < warmupSteps) return (maxLr * (step + 1)) / (warmupSteps + 1);
  // At and past the end of the decay (also when there is no decay phase at all): the floor.
  if (step >= totalSteps) return minLr;
  const decayRatio = (step - warmupSteps) / (totalSteps - warmupSteps);
  const coeff = 0.5 * (1 + Math.cos(Math.PI * decayRatio)); // 1 → 0
  return minLr + coeff * (maxLr - minLr);
}
