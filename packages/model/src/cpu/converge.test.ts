import { BatchSampler, loadMobyDick, splitCorpus, unigramEntropy, validationBatches } from '@shoal/data';
import { learningRate } from '@shoal/gpu';
import { describe, expect, it } from 'vitest';
import { PRESETS } from '../config.ts';
import { initParameters } from '../init.ts';
import { buildLayout } from '../layout.ts';
import { defaultTrainConfig } from '../train-config.ts';
import { CpuTrainer } from './trainer.ts';

describe('nano on Moby Dick (CPU backend)', () => {
  it('reaches a validation loss below 2.6 nats within 400 steps of 1,024 tokens', { timeout: 600_000 }, async () => {
    const { train, validation } = splitCorpus(loadMobyDick());
    // Learning byte frequencies alone gives the unigram entropy (≈3.07), far above 2.6.
    expect(unigramEntropy(validation)).toBeGreaterThan(3);
    const config = PRESETS.nano;
    const settings = defaultTrainConfig({
      batchSize: 16,
      seqLen: 64,
      maxLr: 3e-3,
      warmupSteps: 40,
      totalSteps: 400,
      seed: 1,
    });
    const trainer = new CpuTrainer(config, settings, initParameters(buildLayout(config), settings.seed));
    const sampler = new BatchSampler(train, { batchSize: 16, seqLen: 64, seed: settings.seed });
    const evalSet = validationBatches(validation, { batchSize: 16, seqLen: 64, count: 32 });
    const initial = await trainer.evaluate(evalSet);
    const curve: number[] = [];
    for (let step = 0; step < 400; step++) {
      await trainer.step(sampler.next(), learningRate(step, settings));
      if ((step + 1) % 100 === 0) curve.push(await trainer.evaluate(evalSet));
    }
    console.log(
      `nano validation loss: initial ${initial.toFixed(3)}, every 100 steps ${curve.map((l) => l.toFixed(3)).join(' → ')}`,
    );
    expect(initial).toBeGreaterThan(5); // ln(256) = 5.55
    for (let i = 1; i < curve.length; i++) expect(curve[i]).toBeLessThan(curve[i - 1] as number);
    expect(curve.at(-1)).toBeLessThan(2.6);
  });
});
