/**
 * Inner-optimizer settings (AdamW as nanoGPT), with the reasons for the defaults that are not
 * obvious. Shared by the CPU and WebGPU trainers, `shoal train` and the swarm.
 */
export interface TrainConfig {
  batchSize: number;
  seqLen: number;
  maxLr: number;
  /** Cosine decay floor; nanoGPT uses maxLr/10. */
  minLr: number;
  warmupSteps: number;
  /** Steps of the cosine schedule; training may stop earlier. */
  totalSteps: number;
  beta1: number;
  /** 0.95 rather than PyTorch's 0.999: steadier for small-batch transformer training (nanoGPT). */
  beta2: number;
  eps: number;
  /** Decoupled, on 2-D tensors only (embeddings and linear weights). */
  weightDecay: number;
  /** Global gradient-norm clip. */
  gradClip: number;
  seed: number;
}

export function defaultTrainConfig(overrides: Partial<TrainConfig> = {}): TrainConfig {
  const maxLr = overrides.maxLr ?? 3e-3;
  return {
    batchSize: 16,
    seqLen: 64,
    maxLr,
    minLr: maxLr / 10,
    warmupSteps: 20,
    totalSteps: 400,
    beta1: 0.9,
    beta2: 0.95,
    eps: 1e-8,
    weightDecay: 0.1,
    gradClip: 1,
    seed: 1,
    ...overrides,
  };
}
