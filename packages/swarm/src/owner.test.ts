import { createCodec } from '@shoal/diloco';
import { describe, expect, it } from 'vitest';
import { ShardCollector } from './owner.ts';

const LENGTH = 128;

function collector() {
  return new ShardCollector({
    fragment: 0,
    round: 1,
    shard: 0,
    length: LENGTH,
    codec: createCodec('int4', { blockSize: 64 }),
    participants: ['a', 'b'],
    rule: { kind: 'mean' },
    maxWeight: 1_000,
  });
}

describe('ShardCollector', () => {
  it("refuses a contribution whose header names another codec than the round's, though its bytes decode", () => {
    const values = Float32Array.from({ length: LENGTH }, (_, i) => Math.sin(i) / 100);
    // int4 and fp4 share one layout: fp4 bytes are valid int4 bytes, meaning other values
    const payload = createCodec('fp4', { blockSize: 64 }).encode(values);
    const owner = collector();
    expect(owner.add('a', { codec: 'fp4', weight: 10, payload })).toEqual({
      accepted: false,
      reason: 'codec',
      message: "header says fp4, the round's codec is int4",
    });
    expect(owner.add('b', { codec: 'int4', weight: 10, payload })).toEqual({ accepted: true });
    const result = owner.finish();
    expect(result.accepted).toEqual(['b']);
    expect(result.verdicts).toContainEqual(expect.objectContaining({ peer: 'a', weight: 0, reason: 'codec' }));
  });
});
