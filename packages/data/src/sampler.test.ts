import { describe, expect, it } from 'vitest';
import { type Batch, BatchSampler, validationBatches } from './sampler.ts';

// The pinned offsets in this file were cross-checked against an independent Python port of hash.ts.
// A corpus whose byte at i is a known function of i, so windows can be checked against offsets.
const corpus = Uint8Array.from({ length: 100_003 }, (_, i) => (i * 7 + (i >> 8)) & 0xff);
const options = { batchSize: 4, seqLen: 16, seed: 1234 };

const draw = (sampler: BatchSampler, n: number): Batch[] => Array.from({ length: n }, () => sampler.next());

describe('BatchSampler', () => {
  it('draws B rows of T tokens whose targets are the inputs shifted by one', () => {
    const sampler = new BatchSampler(corpus, options);
    const offsets = sampler.offsets();
    const { inputs, targets } = sampler.next();
    expect(inputs).toBeInstanceOf(Int32Array);
    expect(inputs.length).toBe(4 * 16);
    expect(targets.length).toBe(4 * 16);
    offsets.forEach((offset, row) => {
      const window = Array.from(corpus.subarray(offset, offset + 17));
      expect(Array.from(inputs.subarray(row * 16, row * 16 + 16))).toEqual(window.slice(0, 16));
      expect(Array.from(targets.subarray(row * 16, row * 16 + 16))).toEqual(window.slice(1));
    });
    expect(sampler.position).toBe(1);
  });

  it('gives the same batches for the same seed and worker, and different ones otherwise', () => {
    const a = draw(new BatchSampler(corpus, options), 5);
    expect(draw(new BatchSampler(corpus, { ...options, worker: 0 }), 5)).toEqual(a);
    expect(draw(new BatchSampler(corpus, { ...options, worker: 1 }), 5)).not.toEqual(a);
    expect(draw(new BatchSampler(corpus, { ...options, seed: 1235 }), 5)).not.toEqual(a);
    // Successive batches differ too.
    expect(a[1]).not.toEqual(a[0]);
  });

  it('pins the offsets, so every machine and every refactor draws the same data', () => {
    const sampler = new BatchSampler(corpus, options);
    expect(sampler.offsets(0)).toEqual([44513, 5772, 2926, 73803]);
    expect(new BatchSampler(corpus, { ...options, worker: 3 }).offsets(7)).toEqual([26768, 76110, 55711, 19906]);
  });

  it('resumes exactly from a saved state', () => {
    const original = new BatchSampler(corpus, options);
    draw(original, 3);
    const state = JSON.parse(JSON.stringify(original.getState()));
    expect(state).toEqual({ batchSize: 4, seqLen: 16, seed: 1234, worker: 0, position: 3 });
    const resumed = new BatchSampler(corpus, options);
    resumed.setState(state);
    expect(resumed.position).toBe(3);
    expect(draw(resumed, 4)).toEqual(draw(original, 4));
    // Positions past 2^32 still give distinct, valid batches.
    expect(original.offsets(2 ** 32)).not.toEqual(original.offsets(0));
    expect(original.offsets(2 ** 40).every((o) => o >= 0 && o <= corpus.length - 17)).toBe(true);
  });

  it('refuses a state from another seed, worker or shape', () => {
    const sampler = new BatchSampler(corpus, options);
    const state = sampler.getState();
    expect(() => sampler.setState({ ...state, worker: 2 })).toThrow(/sampler state has worker 2, this sampler has 0/);
    expect(() => sampler.setState({ ...state, seqLen: 32 })).toThrow(/seqLen 32/);
    expect(() => sampler.setState({ ...state, position: -1 })).toThrow(/sampler position must be an integer ≥ 0/);
  });

  it('covers the corpus uniformly, last window included', () => {
    // 8 windows over an 11-byte corpus with T = 2: offsets 0..8, each about 1/9 of the draws.
    const tiny = new Uint8Array(11);
    const sampler = new BatchSampler(tiny, { batchSize: 90, seqLen: 2, seed: 7 });
    const counts = new Array(9).fill(0);
    for (let i = 0; i < 100; i++) for (const o of sampler.offsets(i)) counts[o]++;
    for (const c of counts) expect(Math.abs(c - 1000)).toBeLessThan(150); // ±4.7σ of Binomial(9000, 1/9)
  });

  it('rejects bad options and a split shorter than one window', () => {
    expect(() => new BatchSampler(new Uint8Array(16), options)).toThrow(
      'the training split has 16 bytes, fewer than one window of seqLen + 1 = 17',
    );
    expect(() => new BatchSampler(new Uint8Array(17), options)).not.toThrow();
    expect(() => new BatchSampler(corpus, { ...options, batchSize: 0 })).toThrow(/batchSize must be an integer ≥ 1/);
    expect(() => new BatchSampler(corpus, { ...options, seqLen: 2.5 })).toThrow(/seqLen/);
    expect(() => new BatchSampler(corpus, { ...options, seed: -1 })).toThrow(/seed/);
    expect(() => new BatchSampler(corpus, { ...options, worker: Number.NaN })).toThrow(/worker/);
  });
});

describe('validationBatches', () => {
  const validation = corpus.subarray(90_000);

  it('is a fixed set of evenly spaced windows from the first byte to the last', () => {
    const batches = validationBatches(validation, { batchSize: 3, seqLen: 8, count: 4 });
    expect(batches.length).toBe(4);
    expect(validationBatches(validation, { batchSize: 3, seqLen: 8, count: 4 })).toEqual(batches);
    const first = batches[0] as Batch;
    const last = batches[3] as Batch;
    expect(Array.from(first.inputs.subarray(0, 8))).toEqual(Array.from(validation.subarray(0, 8)));
    expect(Array.from(last.targets.subarray(16, 24))).toEqual(Array.from(validation.subarray(validation.length - 8)));
    // Row i starts at floor(i · (length − 9) / 11); check the targets shift on row 5 (batch 1, row 2).
    const offset = Math.floor((5 * (validation.length - 9)) / 11);
    expect(Array.from((batches[1] as Batch).targets.subarray(16, 24))).toEqual(
      Array.from(validation.subarray(offset + 1, offset + 9)),
    );
  });

  it('handles a single window and refuses a split shorter than one window', () => {
    const [only] = validationBatches(new Uint8Array([1, 2, 3]), { batchSize: 1, seqLen: 2, count: 1 });
    expect(only).toEqual({ inputs: new Int32Array([1, 2]), targets: new Int32Array([2, 3]) });
    expect(() => validationBatches(new Uint8Array(8), { batchSize: 1, seqLen: 8, count: 1 })).toThrow(
      'the validation split has 8 bytes, fewer than one window of seqLen + 1 = 9',
    );
    expect(() => validationBatches(validation, { batchSize: 1, seqLen: 8, count: 0 })).toThrow(/count/);
  });
});
