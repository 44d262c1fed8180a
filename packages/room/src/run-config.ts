/**
 * A run configuration from partial settings, the rest at the defaults of the run options
 * (run-options.ts): for tests, benchmarks and the simulator, which set the engine's fields directly.
 * What a person sets goes through `runConfigOf` instead.
 */
import { defaultTrainConfig, type GptConfig, presetConfig, type TrainConfig } from '@shoal/model';
import type { RunConfig } from '@shoal/protocol';
import type { DilocoSettings } from '@shoal/swarm';
import { RUN_OPTION_DEFAULTS, runConfigOf } from './run-options.ts';

/** The room's DiLoCo settings at the run options' defaults (run-options.ts). */
export const DEFAULT_DILOCO: DilocoSettings = runConfigOf(RUN_OPTION_DEFAULTS).diloco;

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
