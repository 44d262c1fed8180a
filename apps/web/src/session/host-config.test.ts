import { describe, expect, it } from 'vitest';
import { HOST_FORM_DEFAULTS, hostQueryOf, parseHostQuery, runConfigOf } from './host-config.ts';

describe('the room form and its URL query', () => {
  it('reads the CLI option names in camelCase', () => {
    const { values, errors } = parseHostQuery('?preset=tiny&innerSteps=10&fragments=4&codec=int8&outerLr=0.5&batch=8');
    expect(errors).toEqual({});
    expect(values).toMatchObject({
      preset: 'tiny',
      innerSteps: 10,
      fragments: 4,
      codec: 'int8',
      outerLr: 0.5,
      batch: 8,
    });
    expect(values.alpha).toBe(HOST_FORM_DEFAULTS.alpha);
  });

  it('reports bad values per field and keeps the defaults for them', () => {
    const { values, errors } = parseHostQuery('?preset=huge&innerSteps=2.5&alpha=3&codec=zip&lr=abc');
    expect(Object.keys(errors).sort()).toEqual(['alpha', 'codec', 'innerSteps', 'lr', 'preset']);
    expect(errors.innerSteps).toMatch(/whole number/);
    expect(errors.alpha).toMatch(/at most 1/);
    expect(values.preset).toBe('nano');
  });

  it('round-trips through hostQueryOf, writing only what differs from the defaults', () => {
    const { values } = parseHostQuery('?preset=nano&innerSteps=7&overlap=0');
    expect(hostQueryOf(values)).toBe('?innerSteps=7&overlap=0');
    expect(parseHostQuery(hostQueryOf(values)).values).toEqual(values);
    expect(hostQueryOf(HOST_FORM_DEFAULTS)).toBe('');
  });

  it('builds the run config, and refuses what does not fit the model', () => {
    const config = runConfigOf(parseHostQuery('?innerSteps=5&fragments=2&batch=4&seq=32&lr=0.01').values);
    expect(config.diloco).toMatchObject({
      innerSteps: 5,
      fragments: 2,
      outerLr: 0.7,
      outerMomentum: 0.9,
      codec: 'fp4',
    });
    expect(config.train).toMatchObject({ batchSize: 4, seqLen: 32, maxLr: 0.01, minLr: 0.001 });
    expect(config.model.nLayer).toBe(2);
    expect(() => runConfigOf({ ...HOST_FORM_DEFAULTS, fragments: 3 })).toThrow(
      /3 fragments exceed the model's 2 blocks/,
    );
    expect(() => runConfigOf({ ...HOST_FORM_DEFAULTS, seq: 128 })).toThrow(/block size 64/);
  });
});
