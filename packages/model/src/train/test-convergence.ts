/**
 * The convergence check both backends run in `npm test` (issue: nano must reach a validation
 * loss below 2.6 nats on Moby Dick within 400 steps of 1,024 tokens; learning byte frequencies
 * alone gives the unigram entropy, about 3.07). A test kit, not part of the package's API.
 */
import { BatchSampler, loadMobyDick, splitCorpus, unigramEntropy, validationBatches } from '@shoal/data';
import { learningRate } from '@shoal/gpu';
import { expect } from 'vitest';
import { type GptConfig, PRESETS } from '../config.ts';
import { initParameters } from '../init.ts';
import { buildLayout } from '../layout.ts';
import { defaultTrainConfig, type TrainConfig } from '../train-config.ts';
import type { Trainer } from './trainer.ts';

const NANO_CONVERGENCE = {
  config: PRESETS.nano as GptConfig,
  settings: defaultTrainConfig({ batchSize: 16, seqLen: 64, maxLr: 3e-3, warmupSteps: 40, totalSteps: 400, seed: 1 }),
  steps: 400,
  evalEvery: 100,
};

/** Trains from the seeded init, checks the curve, and returns it for the log. */
export async function checkNanoConvergence(
  createTrainer: (config: GptConfig, settings: TrainConfig, params: Float32Array) => Promise<Trainer>,
): Promise<{ initial: number; curve: number[]; seconds: number }> {
  const { config, settings, steps, evalEvery } = NANO_CONVERGENCE;
  const { train, validation } = splitCorpus(loadMobyDick());
  expect(unigramEntropy(validation)).toBeGreaterThan(3);
  const trainer = await createTrainer(config, settings, initParameters(buildLayout(config), settings.seed));
  const started = performance.now();
  try {
    const { batchSize, seqLen, seed } = settings;
    const sampler = new BatchSampler(train, { batchSize, seqLen, seed });
    const evalSet = validationBatches(validation, { batchSize, seqLen, count: 32 });
    const initial = await trainer.evaluate(evalSet);
    const curve: number[] = [];
    for (let step = 0; step < steps; step++) {
      await trainer.step(sampler.next(), learningRate(step, settings), { readLoss: false });
      if ((step + 1) % evalEvery === 0) curve.push(await trainer.evaluate(evalSet));
    }
    const seconds = (performance.now() - started) / 1000;
    console.log(
      `nano on ${trainer.backend}: validation loss ${initial.toFixed(3)} → ${curve.map((l) => l.toFixed(3)).join(' → ')} ` +
        `(every ${evalEvery} steps; ${seconds.toFixed(1)} s)`,
    );
    expect(initial).toBeGreaterThan(5); // ln(256) = 5.55
    for (let i = 1; i < curve.length; i++) expect(curve[i]).toBeLessThan(curve[i - 1] as number);
    expect(curve.at(-1)).toBeLessThan(2.6);
    return { initial, curve, seconds };
  } finally {
    trainer.destroy();
  }
}
