import { describe, expect, it } from 'vitest';
import {
  BACKWARD_KEY_ARRAYS,
  BACKWARD_QUERY_ARRAYS,
  chooseRegisterTiling,
  chooseTiling,
  FORWARD_ARRAYS,
  MAX_VECS_PER_LANE,
  REGISTER_MAX_HEAD_SIZE,
  type RegisterKernel,
  registerConstants,
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

describe('chooseRegisterTiling', () => {
  const kernels: RegisterKernel[] = ['forward', 'backwardQuery', 'backwardKey'];

  it('fits 32 KiB for every head size up to 92, with at most 3 channel vec4s a lane', () => {
    for (const kernel of kernels) {
      for (let hs = 1; hs <= 92; hs++) {
        const tiling = chooseRegisterTiling(hs, kernel, 8192);
        expect(tiling, `${kernel} hs ${hs}`).not.toBeNull();
        if (!tiling) continue;
        expect(tiling.workgroupFloats * 4).toBeLessThanOrEqual(32_768);
        expect(tiling.stream).toBe(8 * tiling.perLane);
        expect(tiling.channelVecs * 8 * 4).toBeGreaterThanOrEqual(hs);
        expect(tiling.channelVecs).toBeLessThanOrEqual(3);
        expect(registerConstants(tiling).SCORE_VECS).toBe(tiling.stream * 8);
      }
    }
  });

  it('streams 32 rows a step in the forward and 16 in the backward at hs 64', () => {
    expect(chooseRegisterTiling(64, 'forward', 8192)?.stream).toBe(32);
    expect(chooseRegisterTiling(64, 'backwardQuery', 8192)?.stream).toBe(16);
    expect(chooseRegisterTiling(64, 'backwardKey', 8192)?.stream).toBe(16);
    expect(chooseRegisterTiling(16, 'backwardKey', 8192)?.stream).toBe(32);
  });

  it('gives up past hs 96 and where even 8 streamed rows do not fit', () => {
    expect(chooseRegisterTiling(REGISTER_MAX_HEAD_SIZE + 1, 'forward', 1 << 20)).toBeNull();
    expect(chooseRegisterTiling(96, 'backwardKey', 8192)).toBeNull(); // 32 KiB
    expect(chooseRegisterTiling(88, 'backwardKey', 8192)?.stream).toBe(8); // base's heads
    expect(chooseRegisterTiling(64, 'backwardQuery', 4096)).toBeNull(); // 16 KiB
    expect(chooseRegisterTiling(64, 'forward', 4096)?.stream).toBe(8);
  });
});
