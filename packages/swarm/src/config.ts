/**
 * A room's run configuration with the design's defaults (ARCHITECTURE.md, "The algorithm"):
 * Streaming DiLoCo with P fragments synced every H inner steps, overlap τ, merge α, outer Nesterov
 * η 0.7 / μ 0.9, 4-bit fp4 contributions in blocks of 64. Option names follow `shoal simulate`.
 */
import { defaultTrainConfig, type GptConfig, presetConfig, type TrainConfig } from '@shoal/model';
import type { RunConfig } from '@shoal/protocol';

export type DilocoSettings = RunConfig['diloco'];

export const DEFAULT_DILOCO: DilocoSettings = {
  fragments: 2,
  fragmentMode: 'sequential',
  innerSteps: 50,
  overlap: 2,
  alpha: 0.5,
  outerLr: 0.7,
  outerMomentum: 0.9,
  codec: 'fp4',
  codecBlockSize: 64,
  errorFeedback: false,
  // Robust by default: each Δ is scaled down to at most 2× the median norm before the weighted
  // mean, so one volunteer cannot steer θ_global by sending a scaled Δ (docs/hostile-volunteers.md
  // has the measurement beside the plain mean and the trimmed mean).
  aggregation: { kind: 'clipped-mean' },
  hashAlgorithm: 'xxh128',
  weightCapFactor: 4,
  // Half the participants must report the committed hash: a round survives a crash or two. The
  // coordinator also needs a strict majority of participants and host together, host included.
  quorum: 0.5,
};

export interface RunConfigOptions {
  preset?: string;
  model?: GptConfig;
  train?: Partial<TrainConfig>;
  diloco?: Partial<DilocoSettings>;
  corpus?: string;
  heartbeatMs?: number;
}

export function createRunConfig(options: RunConfigOptions = {}): RunConfig {
  const model = options.model ?? presetConfig(options.preset ?? 'nano');
  const train = defaultTrainConfig({ seqLen: Math.min(64, model.blockSize), ...options.train });
  const diloco = { ...DEFAULT_DILOCO, ...options.diloco };
  if (diloco.fragments > model.nLayer) {
    throw new RangeError(`--fragments ${diloco.fragments} exceeds the model's ${model.nLayer} blocks`);
  }
  return {
    model,
    train,
    diloco,
    data: { corpus: options.corpus ?? 'moby-dick', seed: train.seed },
    heartbeatMs: options.heartbeatMs ?? 1000,
  };
}

/**
 * The largest |value| of an honest pseudo-gradient Δ = θ_global − θ_local, per coordinate: an
 * AdamW step moves a coordinate by at most about the learning rate (|m̂/√v̂| ≤ 1 but for rare
 * spikes), H steps by H·lr, and a contribution's weight (its steps) is capped at weightCapFactor
 * times the median's; a factor of 4 on top covers the spikes. Shard owners refuse a contribution
 * beyond it and replicas refuse an aggregate beyond it, before any outer step. A worker whose own
 * Δ would exceed half of it (it trained alone for long) scales its Δ down to that first.
 */
export function contributionBound(config: RunConfig): number {
  const { train, diloco } = config;
  return 4 * Math.max(train.maxLr, 1e-6) * diloco.innerSteps * diloco.weightCapFactor;
}
