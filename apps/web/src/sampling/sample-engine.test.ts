// The engine in Node: onnxruntime-web's WebAssembly backend runs here too (single-threaded), so
// the export → session → byte-by-byte loop is tested on a small model against the CPU engine.

import { buildLayout, CpuGpt, type GptConfig } from '@shoal/model';
import { argmax } from '@shoal/onnx/runner';
import { spreadParameters } from '@shoal/onnx/test-params';
import { afterAll, describe, expect, it } from 'vitest';
import { release, sample } from './sample-engine.ts';
import type { SampleEvent, SampleRequest } from './settings.ts';

const model: GptConfig = { nLayer: 1, nHead: 2, nEmbd: 8, blockSize: 8, vocabSize: 256 };
const params = spreadParameters(buildLayout(model), 3);

async function run(request: Partial<SampleRequest>, cancelled?: () => boolean): Promise<SampleEvent[]> {
  const events: SampleEvent[] = [];
  await sample(
    { prompt: 'ab', temperature: 0, topK: 0, maxNewTokens: 12, params, model, ...request },
    (e) => events.push(e),
    cancelled,
  );
  return events;
}

const textOf = (events: SampleEvent[]) => events.map((e) => (e.type === 'text' ? e.text : '')).join('');
const phases = (events: SampleEvent[]) =>
  events.flatMap((e) => (e.type === 'progress' ? [e.phase === 'generate' ? `generate ${e.done}` : e.phase] : []));
const last = (events: SampleEvent[]) => events[events.length - 1];

afterAll(() => release());

describe('sample', () => {
  it('greedy text follows the CPU engine byte by byte, past block_size, with progress along the way', async () => {
    const events = await run({});
    const context = [97, 98];
    for (let i = 0; i < 12; i++) {
      const window = context.slice(-model.blockSize);
      const engine = new CpuGpt<Float64Array>(model, 1, window.length, Float64Array);
      engine.forward(Float64Array.from(params), Int32Array.from(window), null);
      context.push(argmax(engine.logits.subarray((window.length - 1) * model.vocabSize)));
    }
    const expected = new TextDecoder('utf-8', { fatal: false }).decode(Uint8Array.from(context.slice(2)));
    expect(textOf(events)).toBe(expected);
    expect(phases(events)).toEqual(['export', 'load', ...Array.from({ length: 13 }, (_, i) => `generate ${i}`)]);
    const done = last(events);
    expect(done?.type).toBe('done');
    if (done?.type === 'done') {
      expect(done.stats.tokens).toBe(12);
      expect(done.stats.threads).toBe(1);
    }
  });

  it('samples repeatably with a seed', async () => {
    const seeded = { temperature: 1, topK: 20, seed: 7, maxNewTokens: 16 };
    const first = textOf(await run(seeded));
    expect(textOf(await run(seeded))).toBe(first);
    expect(textOf(await run({ ...seeded, seed: 8 }))).not.toBe(first);
  });

  it('reuses the exported session while paramsKey stays the same', async () => {
    const first = await run({ paramsKey: 'round-1', maxNewTokens: 3 });
    const again = await run({ paramsKey: 'round-1', maxNewTokens: 3 });
    const changed = await run({ paramsKey: 'round-2', maxNewTokens: 3 });
    expect(phases(first).slice(0, 2)).toEqual(['export', 'load']);
    expect(phases(again)[0]).toBe('generate 0');
    expect(textOf(again)).toBe(textOf(first));
    expect(phases(changed).slice(0, 2)).toEqual(['export', 'load']);
    const stats = last(again);
    expect(stats?.type === 'done' && stats.stats.exportMs === 0 && stats.stats.loadMs === 0).toBe(true);
    await release();
  });

  it('stops between tokens when cancelled', async () => {
    let tokens = 0;
    const events: SampleEvent[] = [];
    await sample(
      { prompt: 'ab', temperature: 0, topK: 0, maxNewTokens: 50, params, model },
      (e) => {
        events.push(e);
        if (e.type === 'progress' && e.phase === 'generate') tokens = e.done;
      },
      () => tokens >= 3,
    );
    const done = last(events);
    expect(done?.type === 'done' && done.stats.tokens).toBe(3);
  });

  it('ends with an error event naming the stage, never a throw', async () => {
    const wrongLength = last(await run({ params: params.subarray(1) }));
    expect(wrongLength).toMatchObject({ type: 'error', stage: 'export' });
    expect(wrongLength?.type === 'error' && wrongLength.message).toMatch(
      /^Could not export the model to ONNX: params have \d+ values, this config needs \d+/,
    );
    expect(last(await run({ topK: -1 }))).toMatchObject({ type: 'error', stage: 'params' });
    const small = { ...model, vocabSize: 128 };
    const outside = last(await run({ prompt: 'é', model: small, params: spreadParameters(buildLayout(small), 3) }));
    expect(outside).toMatchObject({ type: 'error', stage: 'params', message: expect.stringMatching(/byte 195/) });
  });
});
