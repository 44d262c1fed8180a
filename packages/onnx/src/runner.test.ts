import { mulberry32 } from '@shoal/gpu/random';
import { buildLayout, CpuGpt, type GptConfig } from '@shoal/model';
import * as ort from 'onnxruntime-web';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildModel, exportOnnx } from './export.ts';
import { encodeModel } from './proto.ts';
import { argmax, modelShapeOf, OnnxSampler, runLogits, sampleTopK } from './runner.ts';
import { spreadParameters } from './test-params.ts';

const config: GptConfig = { nLayer: 1, nHead: 2, nEmbd: 8, blockSize: 7, vocabSize: 37 };
const params = spreadParameters(buildLayout(config), 2);
const model = exportOnnx(config, params);
let sampler: OnnxSampler;

beforeAll(async () => {
  sampler = await OnnxSampler.create(model);
});
afterAll(() => sampler.release());

describe('OnnxSampler', () => {
  it('reads block_size and vocab_size from the file', () => {
    expect(sampler.shape).toEqual({ blockSize: 7, vocabSize: 37 });
    expect(modelShapeOf(model)).toEqual({ blockSize: 7, vocabSize: 37 });
  });

  it('rejects a sequence longer than block_size, a token outside the vocabulary and ragged rows, plainly', async () => {
    await expect(sampler.logits([1, 2, 3, 4, 5, 6, 7, 8])).rejects.toThrow(
      "sequence length 8 exceeds the model's block_size 7",
    );
    await expect(sampler.logits([1, 2, 37])).rejects.toThrow('token 37 at position 2 is outside [0, 37)');
    await expect(sampler.logits([1, -1])).rejects.toThrow('token -1 at position 1 is outside [0, 37)');
    await expect(sampler.logits([1, 2, 3], 2)).rejects.toThrow('3 tokens do not make 2 rows of at least one token');
    await expect(sampler.logits([], 1)).rejects.toThrow('0 tokens do not make 1 rows');
  });

  it('the model itself refuses seq > block_size too, rather than computing something', async () => {
    // Severity 4 (fatal only): the failure below is expected, its log line is noise.
    const session = await ort.InferenceSession.create(model, { logSeverityLevel: 4 });
    try {
      const ids = new ort.Tensor('int64', new BigInt64Array(8), [1, 8]);
      await expect(session.run({ input_ids: ids })).rejects.toThrow(/7 by 8|out of data bounds/);
    } finally {
      await session.release();
    }
  });

  it('rejects bytes that are not an exported model', async () => {
    expect(() => modelShapeOf(new Uint8Array([0xff, 0xff, 0xff]))).toThrow(/^not an ONNX model/);
    const text = new TextEncoder().encode('not a model');
    await expect(OnnxSampler.create(text)).rejects.toThrow(/^not an ONNX model/);
    const shape = { blockSize: 4, vocabSize: 4 };
    await expect(OnnxSampler.create(text, { shape })).rejects.toThrow(/protobuf parsing failed/);
    const bare = encodeModel({ ...buildModel(config, params), metadataProps: [] });
    expect(() => modelShapeOf(bare)).toThrow("ONNX model has no block_size in its metadata: pass the model's shape");
  });

  it('runLogits gives the same logits as a sampler', async () => {
    const ids = [3, 1, 4, 1, 5, 9];
    expect(await runLogits(model, ids, 2)).toEqual(await sampler.logits(ids, 2));
  });

  it('greedy generation follows the engine past block_size (the context is cropped)', async () => {
    const prompt = [5, 10, 15, 20, 25];
    const got = await sampler.generate(prompt, 6, { temperature: 0 });
    const context = [...prompt];
    for (let i = 0; i < 6; i++) {
      const window = context.slice(-config.blockSize);
      const engine = new CpuGpt<Float64Array>(config, 1, window.length, Float64Array);
      engine.forward(Float64Array.from(params), Int32Array.from(window), null);
      context.push(argmax(engine.logits.subarray((window.length - 1) * config.vocabSize)));
    }
    expect(got).toEqual(context.slice(prompt.length));
  });

  it('samples repeatably with a seeded random, within the top k', async () => {
    const first = await sampler.generate([1, 2], 8, { temperature: 0.8, topK: 5, random: mulberry32(9) });
    const again = await sampler.generate([1, 2], 8, { temperature: 0.8, topK: 5, random: mulberry32(9) });
    expect(first).toEqual(again);
    expect(first.every((t) => Number.isInteger(t) && t >= 0 && t < 37)).toBe(true);
  });
});

describe('sampleTopK', () => {
  const logits = [0.5, 3, -1, 2.9, 0];
  it('with k = 1 is argmax', () => {
    expect(sampleTopK(logits, 1, 1, () => 0.99)).toBe(1);
  });
  it('draws only among the top k, in proportion to exp(logit / temperature)', () => {
    const random = mulberry32(4);
    const counts = new Map<number, number>();
    for (let i = 0; i < 4000; i++) {
      const t = sampleTopK(logits, 1, 2, random);
      counts.set(t, (counts.get(t) ?? 0) + 1);
    }
    expect([...counts.keys()].sort()).toEqual([1, 3]);
    const share = (counts.get(1) ?? 0) / 4000;
    expect(share).toBeCloseTo(Math.exp(0.1) / (1 + Math.exp(0.1)), 1);
  });
});
