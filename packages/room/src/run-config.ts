/**
 * A run configuration from partial settings: the room runConfigOf makes at the run options'
 * defaults, with the engine's fields set directly over it. For tests, benchmarks and the attack
 * room, which set fields (a model of their own, a schedule, H) that a person sets as run options;
 * what a person sets goes through `runConfigOf` alone.
 */
import { defaultTrainConfig, type GptConfig, presetConfig, type TrainConfig } from '@shoal/model';
import type { RunConfig } from '@shoal/protocol';
import type { DilocoSettings } from '@shoal/swarm';
import { RUN_OPTION_DEFAULTS, runConfigOf } from './run-options.ts';

/** The room at the run options' defaults. */
const DEFAULT_ROOM: RunConfig = runConfigOf(RUN_OPTION_DEFAULTS);

/** The room's DiLoCo settings at the run options' defaults: what createRunConfig's rooms start from. */
export const DEFAULT_DILOCO: DilocoSettings = DEFAULT_ROOM.diloco;

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
    ...DEFAULT_ROOM,
    model,
    train,
    diloco,
    data: { corpus: options.corpus ?? DEFAULT_ROOM.data.corpus, seed: train.seed },
    heartbeatMs: options.heartbeatMs ?? DEFAULT_ROOM.heartbeatMs,
  };
}
