/**
 * Training-step timing shared by bench:engine and bench:device (free of TF.js): the seeded token
 * batches every engine trains on, and a trainer's milliseconds per step after a warm-up.
 */
import { mulberry32 } from '../packages/gpu/src/random.ts';
import type { GptConfig, PresetName } from '../packages/model/src/config.ts';
import { GpuTrainer } from '../packages/model/src/gpu/trainer.ts';
import type { Trainer } from '../packages/model/src/train/trainer.ts';

/** Batch shape per preset: nano's 1,024-token step, then 4,096 tokens; gpt2 at GPT-2's 8×1024. */
export const PRESET_BATCH: Record<PresetName, { B: number; T: number }> = {
  nano: { B: 16, T: 64 },
  tiny: { B: 32, T: 128 },
  small: { B: 16, T: 256 },
  base: { B: 8, T: 512 },
  gpt2: { B: 8, T: 1024 },
};

/** Seeded uniform bytes, B·T inputs and targets each, per batch. */
export function benchBatches(config: GptConfig, B: number, T: number, count: number, seed = 1337) {
  const next = mulberry32(seed + 1);
  const tokens = () => Int32Array.from({ length: B * T }, () => Math.floor(next() * config.vocabSize));
  return Array.from({ length: count }, () => ({ inputs: tokens(), targets: tokens() }));
}

/**
 * `warmup` steps reading each loss, then `count` steps timed without reading it (a GPU trainer
 * is flushed before the clock stops). `losses` has one entry per step; only the warm-up's were read.
 */
export async function timeSteps(
  trainer: Trainer,
  batches: ReturnType<typeof benchBatches>,
  warmup: number,
  count: number,
  lr = 1e-3,
) {
  const losses: number[] = [];
  for (const batch of batches.slice(0, warmup)) losses.push(await trainer.step(batch, lr));
  const started = performance.now();
  for (const batch of batches.slice(warmup, warmup + count)) {
    losses.push(await trainer.step(batch, lr, { readLoss: false }));
  }
  if (trainer instanceof GpuTrainer) await trainer.flush();
  return { msPerStep: (performance.now() - started) / count, losses };
}
