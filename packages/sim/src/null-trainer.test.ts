import { buildLayout, defaultTrainConfig, initParameters, presetConfig } from '@shoal/model';
import { describe, expect, it } from 'vitest';
import { NullTrainer, SharedParams, sameBits } from './null-trainer.ts';

const model = presetConfig('nano');
const layout = buildLayout(model);
const train = defaultTrainConfig({ batchSize: 2, seqLen: 16 });

describe('NullTrainer (a dry run’s engine)', () => {
  it('holds nothing of its own while its θ_local is the shared one, and its own copy once it differs', async () => {
    const sharing = new SharedParams();
    const init = initParameters(layout, 1);
    const trainers = Array.from({ length: 4 }, () => new NullTrainer(model, train, init.slice(), sharing));
    expect(sharing.bytes).toBe(4 * layout.size);
    expect(trainers.map((t) => t.ownBytes)).toEqual([0, 0, 0, 0]);

    // what a merge does: read, change, write back
    const [first, second] = trainers as [NullTrainer, NullTrainer];
    const params = await first.getParams();
    params[7] = (params[7] as number) + 1;
    expect(sameBits(await second.getParams(), init)).toBe(true); // a copy: the shared one is untouched
    await first.setParams(params);
    expect(first.ownBytes).toBe(4 * layout.size);
    expect(sameBits(await first.getParams(), params)).toBe(true);
    expect(sameBits(await second.getParams(), init)).toBe(true);
    expect(second.ownBytes).toBe(0);

    // back to the shared values: its own copy is dropped
    await first.setParams(init.slice());
    expect(first.ownBytes).toBe(0);
    expect(sameBits(await first.getParams(), init)).toBe(true);
  });

  it('tells values apart by their bits (−0 from 0), and refuses a vector of another size', async () => {
    const sharing = new SharedParams();
    const zeros = new Float32Array(layout.size);
    const trainer = new NullTrainer(model, train, zeros, sharing);
    const negative = zeros.slice();
    negative[3] = -0;
    await trainer.setParams(negative);
    expect(trainer.ownBytes).toBe(4 * layout.size);
    expect(Object.is((await trainer.getParams())[3], -0)).toBe(true);
    await expect(trainer.setParams(new Float32Array(3))).rejects.toThrow(/3 values/);
  });

  it('reads and writes a fragment’s ranges: a write of the shared values keeps nothing of its own', async () => {
    const sharing = new SharedParams();
    const init = initParameters(layout, 1);
    const [first, second] = [0, 1].map(() => new NullTrainer(model, train, init, sharing)) as [
      NullTrainer,
      NullTrainer,
    ];
    const ranges = [
      [10, 20],
      [100, 105],
    ] as const;
    const out = new Float32Array(15);
    await first.readRanges(ranges, out);
    expect(sameBits(out, Float32Array.of(...init.subarray(10, 20), ...init.subarray(100, 105)))).toBe(true);
    await first.writeRanges(ranges, out);
    expect(first.ownBytes).toBe(0);

    out[12] = -1; // init[102]
    await first.writeRanges(ranges, out);
    expect(first.ownBytes).toBe(4 * layout.size);
    const expected = init.slice();
    expected[102] = -1;
    expect(sameBits(await first.getParams(), expected)).toBe(true);
    expect(sameBits(await second.getParams(), init)).toBe(true); // the shared copy is untouched
  });
});
