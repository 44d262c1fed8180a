import { describe, expect, it } from 'vitest';
import {
  BACKWARD_KEY_ARRAYS,
  BACKWARD_QUERY_ARRAYS,
  chooseTiling,
  FORWARD_ARRAYS,
  MAX_VECS_PER_LANE,
} from './attention.tiling.ts';

describe('chooseTiling', () => {
  it('fits 256 invocations and 16 KiB for every head size up to 160', () => {
    for (const arrays of [FORWARD_ARRAYS, BACKWARD_QUERY_ARRAYS, BACKWARD_KEY_ARRAYS]) {
      for (let hs = 1; hs <= 160; hs++) {
        const tiling = chooseTiling(hs, arrays);
        expect(tiling.workgroupFloats * 4).toBeLessThanOrEqual(16_384);
        expect(tiling.lanes * tiling.rows).toBe(256);
        expect(tiling.lanes % tiling.tile).toBe(0);
        expect(tiling.parts * tiling.tile).toBe(tiling.lanes);
        expect(tiling.vecsPerLane).toBeLessThanOrEqual(MAX_VECS_PER_LANE);
        expect(tiling.vecsPerLane * tiling.lanes * 4).toBeGreaterThanOrEqual(hs);
      }
    }
  });

  it('picks wide tiles for GPT-2 head sizes', () => {
    expect(chooseTiling(64, FORWARD_ARRAYS)).toMatchObject({ lanes: 16, rows: 16, tile: 16 });
    expect(
      chooseTiling(128, BACKWARD_QUERY_ARRAYS).rows * chooseTiling(128, BACKWARD_QUERY_ARRAYS).tile,
    ).toBeGreaterThanOrEqual(32);
  });

  it('refuses what cannot fit', () => {
    expect(() => chooseTiling(4096, FORWARD_ARRAYS)).toThrow(/no tiling/);
    expect(() => chooseTiling(0, FORWARD_ARRAYS)).toThrow(/positive integer/);
  });
});
