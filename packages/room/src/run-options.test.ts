import { describe, expect, it } from 'vitest';
import { DEFAULT_DILOCO } from './run-config.ts';
import {
  checkRunOptions,
  parseRunOption,
  parseRunQuery,
  RUN_OPTION_DEFAULTS,
  RUN_OPTION_NAMES,
  RUN_OPTIONS,
  type RunOptionName,
  runConfigOf,
  runOptionsSchema,
  runQueryOf,
} from './run-options.ts';

describe('the run options table', () => {
  it('holds a valid default for every option, within its range', () => {
    expect(runOptionsSchema.parse(RUN_OPTION_DEFAULTS)).toEqual(RUN_OPTION_DEFAULTS);
    for (const name of RUN_OPTION_NAMES) {
      const spec = RUN_OPTIONS[name];
      expect(spec.flag).toBe(`--${name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`);
      expect(parseRunOption(name, String(spec.default))).toEqual({ value: spec.default });
    }
  });

  it('gives the room its defaults: the config at the defaults is DEFAULT_DILOCO and the trainer’s', () => {
    const config = runConfigOf(RUN_OPTION_DEFAULTS);
    expect(config.diloco).toEqual(DEFAULT_DILOCO);
    expect(config.diloco).toMatchObject({ innerSteps: 50, fragments: 2, codec: 'fp4', codecBlockSize: 1024 });
    expect(config.diloco.aggregation).toEqual({ kind: 'centered-clip' });
    expect(config.train).toMatchObject({ batchSize: 16, seqLen: 64, maxLr: 3e-3, seed: 1 });
    expect(config.train.minLr).toBeCloseTo(3e-4, 12);
    expect(config.data).toEqual({ corpus: 'moby-dick', seed: 1 });
  });

  it('parses one value from text, or says why not', () => {
    expect(parseRunOption('innerSteps', '10')).toEqual({ value: 10 });
    expect(parseRunOption('innerSteps', '2.5').error).toMatch(/whole number/);
    expect(parseRunOption('innerSteps', '0').error).toBe('at least 1');
    expect(parseRunOption('alpha', '3').error).toBe('at most 1');
    expect(parseRunOption('lr', 'abc').error).toBe('abc is not a number');
    expect(parseRunOption('lr', ' ').error).toBe('  is not a number');
    expect(parseRunOption('lr', '').error).toBe('(empty) is not a number');
    expect(parseRunOption('codec', 'zip').error).toMatch(/unknown codec "zip": choose fp32, bf16, int8, int4, fp4/);
    expect(parseRunOption('aggregation', 'median').error).toMatch(/clipped-mean, trimmed-mean, mean/);
    expect(parseRunOption('preset', 'tiny')).toEqual({ value: 'tiny' });
    // the codecs' scales cover pairs of 4-bit values
    expect(parseRunOption('blockSize', '3').error).toBe('a multiple of 2');
    expect(parseRunOption('blockSize', '1').error).toBe('at least 2');
  });
});

describe('the URL query', () => {
  it('reads the option names in camelCase', () => {
    const { values, errors } = parseRunQuery('?preset=tiny&innerSteps=10&fragments=4&codec=int8&outerLr=0.5&batch=8');
    expect(errors).toEqual({});
    expect(values).toMatchObject({
      preset: 'tiny',
      innerSteps: 10,
      fragments: 4,
      codec: 'int8',
      outerLr: 0.5,
      batch: 8,
    });
    expect(values.alpha).toBe(RUN_OPTION_DEFAULTS.alpha);
  });

  it('reports bad values per field and keeps the defaults for them', () => {
    const { values, errors } = parseRunQuery('?preset=huge&innerSteps=2.5&alpha=3&codec=zip&lr=abc&aggregation=median');
    expect(Object.keys(errors).sort()).toEqual(['aggregation', 'alpha', 'codec', 'innerSteps', 'lr', 'preset']);
    expect(errors.innerSteps).toMatch(/whole number/);
    expect(values).toEqual(RUN_OPTION_DEFAULTS);
  });

  it('round-trips through runQueryOf, writing only what differs from the defaults', () => {
    const { values } = parseRunQuery('?preset=nano&innerSteps=7&overlap=0&blockSize=32&aggregation=trimmed-mean');
    expect(runQueryOf(values)).toBe('?innerSteps=7&overlap=0&blockSize=32&aggregation=trimmed-mean');
    expect(parseRunQuery(runQueryOf(values)).values).toEqual(values);
    expect(runQueryOf(RUN_OPTION_DEFAULTS)).toBe('');
  });
});

describe('runConfigOf', () => {
  it('builds the run config from every option', () => {
    const { values } = parseRunQuery(
      '?innerSteps=5&fragments=2&batch=4&seq=32&lr=0.01&outerLr=0.5&outerMomentum=0.8&blockSize=32&steps=99&seed=7',
    );
    const config = runConfigOf(values);
    expect(config.diloco).toMatchObject({
      innerSteps: 5,
      fragments: 2,
      outerLr: 0.5,
      outerMomentum: 0.8,
      codecBlockSize: 32,
    });
    expect(config.train).toMatchObject({
      batchSize: 4,
      seqLen: 32,
      maxLr: 0.01,
      minLr: 0.001,
      totalSteps: 99,
      seed: 7,
    });
  });

  it('refuses what is out of range or does not fit the model, naming the field', () => {
    expect(() => runConfigOf({ ...RUN_OPTION_DEFAULTS, fragments: 3 })).toThrow(
      "Fragments (P): at most the model's 2 layers",
    );
    expect(() => runConfigOf({ ...RUN_OPTION_DEFAULTS, seq: 128 })).toThrow(
      "Sequence: at most the model's block size 64",
    );
    expect(() => runConfigOf({ ...RUN_OPTION_DEFAULTS, alpha: 2 })).toThrow('Own weights kept at merge (α): at most 1');
    expect(() => runConfigOf({ ...RUN_OPTION_DEFAULTS, codec: 'zip' })).toThrow(/unknown codec/);
    expect(() => runConfigOf({ ...RUN_OPTION_DEFAULTS, preset: 'huge' })).toThrow(/unknown model "huge"/);
    // τ 60 > H 50 (a room seen in practice): a round's result would merge after the fragment's next round opened
    expect(() => runConfigOf({ ...RUN_OPTION_DEFAULTS, overlap: 60 })).toThrow(
      'Merge delay, steps (τ): less than the inner steps per round, H = 50',
    );
  });

  it('sets a pipeline only for S > 1, and refuses one that does not fit the model, batch or fragments', () => {
    expect(runConfigOf(RUN_OPTION_DEFAULTS).pipeline).toBeUndefined();
    expect(runConfigOf({ ...RUN_OPTION_DEFAULTS, pipelineStages: 2 }).pipeline).toEqual({
      stages: 2,
      micros: 8, // the smallest divisor of the batch of 16 that is at least 4S
      schedule: '1f1b',
      activations: 'f32',
    });
    const tiny = { ...RUN_OPTION_DEFAULTS, preset: 'tiny', pipelineStages: 4, fragments: 4, microBatches: 4 };
    expect(runConfigOf({ ...tiny, pipelineSchedule: 'gpipe', activations: 'bf16' }).pipeline).toEqual({
      stages: 4,
      micros: 4,
      schedule: 'gpipe',
      activations: 'bf16',
    });
    expect(() => runConfigOf({ ...RUN_OPTION_DEFAULTS, pipelineStages: 3 })).toThrow(
      "Pipeline stages (S): at most the model's 2 layers",
    );
    expect(() => runConfigOf({ ...tiny, microBatches: 3 })).toThrow('Micro-batches (M): a divisor of the batch, 16');
    expect(runConfigOf({ ...tiny, pipelineStages: 2, fragments: 3 }).pipeline?.stages).toBe(2); // [0] [1] [2,3] in [0,1] [2,3]
    expect(() => runConfigOf({ ...tiny, pipelineStages: 3, fragments: 2 })).toThrow(
      /Fragments \(P\): Fragment 0 spans two/,
    );
  });

  it('takes a checkpoint’s model in place of the preset’s', () => {
    const model = { nLayer: 4, nHead: 2, nEmbd: 32, blockSize: 32, vocabSize: 256 };
    expect(runConfigOf({ ...RUN_OPTION_DEFAULTS, fragments: 4, seq: 32 }, { model }).model).toEqual(model);
  });
});

describe('checkRunOptions: the rules between fields, each error on the field to change', () => {
  it('passes the defaults, and every preset at the default sequence', () => {
    expect(checkRunOptions(RUN_OPTION_DEFAULTS)).toEqual({});
    for (const preset of RUN_OPTIONS.preset.choices) {
      expect(checkRunOptions({ ...RUN_OPTION_DEFAULTS, preset }), preset).toEqual({});
    }
  });

  it('refuses τ ≥ H on τ, and takes τ = H − 1', () => {
    expect(checkRunOptions({ ...RUN_OPTION_DEFAULTS, innerSteps: 50, overlap: 60 })).toEqual({
      overlap: "less than the inner steps per round, H = 50 (a round's result merges before the fragment's next round)",
    });
    expect(checkRunOptions({ ...RUN_OPTION_DEFAULTS, innerSteps: 5, overlap: 5 })).toHaveProperty('overlap');
    expect(checkRunOptions({ ...RUN_OPTION_DEFAULTS, innerSteps: 5, overlap: 4 })).toEqual({});
    // H itself out of range: the rule waits for H, which carries the error
    expect(checkRunOptions({ ...RUN_OPTION_DEFAULTS, innerSteps: 0, overlap: 60 })).toEqual({
      innerSteps: 'at least 1',
    });
  });

  it('checks the sequence and fragments against the model, a checkpoint’s in place of the preset’s', () => {
    const values = { ...RUN_OPTION_DEFAULTS, seq: 128, fragments: 4 };
    expect(checkRunOptions(values)).toEqual({
      seq: "at most the model's block size 64",
      fragments: "at most the model's 2 layers",
    });
    expect(checkRunOptions({ ...values, preset: 'tiny' })).toEqual({});
    const model = { nLayer: 3, nHead: 2, nEmbd: 32, blockSize: 32, vocabSize: 256 };
    expect(checkRunOptions({ ...values, preset: 'tiny' }, model)).toEqual({
      seq: "at most the model's block size 32",
      fragments: "at most the model's 3 layers",
    });
    // an unknown preset has no shape to check against: only its own error
    expect(checkRunOptions({ ...values, preset: 'huge' })).toEqual({ preset: expect.stringMatching(/unknown model/) });
  });

  it('wants the schedule at least as long as its warmup', () => {
    expect(checkRunOptions({ ...RUN_OPTION_DEFAULTS, steps: 19 })).toEqual({
      steps: "at least the schedule's 20 warmup steps",
    });
    expect(checkRunOptions({ ...RUN_OPTION_DEFAULTS, steps: 20 })).toEqual({});
  });

  it('checks a pipeline only when there is one, and says which divisor is missing', () => {
    expect(checkRunOptions({ ...RUN_OPTION_DEFAULTS, microBatches: 3 })).toEqual({});
    const tiny = { ...RUN_OPTION_DEFAULTS, preset: 'tiny', pipelineStages: 2, fragments: 2 };
    expect(checkRunOptions({ ...tiny, microBatches: 3 })).toEqual({ microBatches: 'a divisor of the batch, 16' });
    expect(checkRunOptions({ ...tiny, batch: 12, microBatches: 8 })).toEqual({
      microBatches: 'a divisor of the batch, 12',
    });
    // 0 picks a divisor itself (the smallest ≥ 4S, or the whole batch): a batch of 7 has one
    expect(checkRunOptions({ ...tiny, batch: 7 })).toEqual({});
    expect(checkRunOptions({ ...tiny, pipelineStages: 5 })).toEqual({ pipelineStages: "at most the model's 4 layers" });
  });

  it('is what runConfigOf refuses, so shoal host, shoal simulate and the form agree', () => {
    for (const values of [
      { ...RUN_OPTION_DEFAULTS, overlap: 60 },
      { ...RUN_OPTION_DEFAULTS, steps: 5 },
      { ...RUN_OPTION_DEFAULTS, seq: 65 },
      { ...RUN_OPTION_DEFAULTS, batch: 0 },
    ]) {
      const errors = checkRunOptions(values);
      const [name] = Object.keys(errors) as RunOptionName[];
      if (!name) throw new Error('no error for a value the rules refuse');
      expect(() => runConfigOf(values)).toThrow(`${RUN_OPTIONS[name].label}: ${errors[name]}`);
    }
  });
});
