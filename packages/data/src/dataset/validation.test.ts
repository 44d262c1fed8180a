import { describe, expect, it } from 'vitest';
import { openDataset } from './dataset.ts';
import { fixtureFiles, memorySource } from './test-fixture.node.ts';
import { validationSample, validationWindows } from './validation.ts';

describe('validationWindows', () => {
  it('spaces windows evenly over the shards, the first at 0 and the last at the final byte', () => {
    const windows = validationWindows([100, 50, 200], 10, 5);
    // usable offsets: 90 + 40 + 190 = 320; positions 0, 79, 159, 239, 319
    expect(windows).toEqual([
      { shard: 0, offset: 0 },
      { shard: 0, offset: 79 },
      { shard: 2, offset: 29 },
      { shard: 2, offset: 109 },
      { shard: 2, offset: 189 },
    ]);
  });

  it('skips shards too short for a window and refuses when none fits', () => {
    expect(validationWindows([5, 20], 10, 2).every((w) => w.shard === 1)).toBe(true);
    expect(() => validationWindows([5, 8], 10, 1)).toThrow(/no validation shard holds one window/);
  });
});

describe('validationSample', () => {
  it('gives everyone the same batches of about budget tokens, reading only the shards it needs', async () => {
    const files = await fixtureFiles({ train: [1000, 1000], validation: [3000, 3000, 3000] });
    const source = memorySource(files);
    const dataset = await openDataset(source);
    const batches = await validationSample(dataset, { batchSize: 2, seqLen: 32, budgetBytes: 640 });
    expect(batches).toHaveLength(10);
    const again = await validationSample(await openDataset(memorySource(files)), {
      batchSize: 2,
      seqLen: 32,
      budgetBytes: 640,
    });
    expect(again).toEqual(batches);
    const first = files.get('validation-00000.txt') as Uint8Array;
    expect(Array.from(batches[0]?.inputs.subarray(0, 32) ?? [])).toEqual(Array.from(first.subarray(0, 32)));
    expect(Array.from(batches[0]?.targets.subarray(0, 32) ?? [])).toEqual(Array.from(first.subarray(1, 33)));

    const one = memorySource(files);
    const tiny = await validationSample(await openDataset(one), { batchSize: 1, seqLen: 32, budgetBytes: 1 });
    expect(tiny).toHaveLength(1);
    expect(one.reads.get('validation-00000.txt')).toBe(1);
    expect(one.reads.has('validation-00001.txt')).toBe(false);
    expect(one.reads.has('train-00000.txt')).toBe(false);
  });
});
