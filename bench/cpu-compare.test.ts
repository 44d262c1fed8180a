import { describe, expect, test } from 'vitest';
import { PRESETS, trainingStepFlops } from '../packages/model/src/config.ts';
import {
  type CpuTableRow,
  DEFAULT_CPU_SHAPES,
  formatCpuTable,
  fullSquareStepFlops,
  median,
  parseCpuShapes,
  parseThreadList,
  roundOrder,
  summariseRuns,
} from './cpu-compare.ts';

describe('parseCpuShapes', () => {
  test('the default is the three measured shapes', () => {
    expect(parseCpuShapes(DEFAULT_CPU_SHAPES)).toEqual([
      { preset: 'nano', B: 16, T: 64 },
      { preset: 'tiny', B: 8, T: 128 },
      { preset: 'tiny', B: 32, T: 128 },
    ]);
  });

  test.each([
    ['', /no shapes/],
    ['nano16x64', /not preset:BxT/],
    ['huge:1x8', /unknown preset "huge"/],
    ['nano:16x65', /T ≤ 64/],
    ['nano:0x64', /B ≥ 1/],
    ['nano:16x064', /B ≥ 1/],
    ['nano:16x64,tiny:8', /"tiny:8" is not preset:BxT/],
  ])('%j is refused', (text, message) => {
    expect(() => parseCpuShapes(text)).toThrow(message);
  });

  test('accepts × as well as x', () => {
    expect(parseCpuShapes('tiny:4×32')).toEqual([{ preset: 'tiny', B: 4, T: 32 }]);
  });
});

describe('parseThreadList', () => {
  test('sorts and drops repeats', () => {
    expect(parseThreadList('2,1,2', '--threads')).toEqual([1, 2]);
  });

  test.each(['0', '1,a', '1.5', '-1', ''])('%j is refused, naming the flag', (text) => {
    expect(() => parseThreadList(text, '--shoal-threads')).toThrow(/--shoal-threads/);
  });
});

test('median of odd and even counts; none throws', () => {
  expect(median([5, 1, 3])).toBe(3);
  expect(median([4, 1, 3, 2])).toBe(2.5);
  expect(() => median([])).toThrow(RangeError);
});

test('roundOrder puts every engine first once in as many rounds as engines', () => {
  const engines = ['shoal', 'torch1', 'torch2'];
  const orders = [0, 1, 2].map((round) => roundOrder(engines, round));
  expect(orders).toEqual([
    ['shoal', 'torch1', 'torch2'],
    ['torch1', 'torch2', 'shoal'],
    ['torch2', 'shoal', 'torch1'],
  ]);
  expect(roundOrder(engines, 3)).toEqual(orders[0]);
  expect(roundOrder([], 4)).toEqual([]);
});

test('summariseRuns: the median of run medians, and CPU time over wall time', () => {
  const summary = summariseRuns([
    { ms: [10, 30, 11], cpuMs: [20, 60, 22], losses: [1, 1, 1] }, // median 11
    { ms: [50, 50, 50], cpuMs: [50, 50, 50], losses: [1, 1, 1] }, // median 50, a busy run
    { ms: [12, 13, 12], cpuMs: [12, 13, 12], losses: [1, 1, 1] }, // median 12
  ]);
  expect(summary.runMedians).toEqual([11, 50, 12]);
  expect(summary.msPerStep).toBe(12);
  expect(summary.coresBusy).toBeCloseTo((102 + 150 + 37) / (51 + 150 + 37), 12);
  expect(() => summariseRuns([])).toThrow(RangeError);
});

describe('fullSquareStepFlops', () => {
  test('exceeds the causal count by the masked half of QKᵀ and PV: 6·L·B·C·T·(T−1)', () => {
    for (const [config, B, T] of [
      [PRESETS.nano, 16, 64],
      [PRESETS.tiny, 8, 128],
      [PRESETS.small, 2, 256],
    ] as const) {
      const { nLayer: L, nEmbd: C } = config;
      expect(fullSquareStepFlops(config, B, T) - trainingStepFlops(config, B, T)).toBe(6 * L * B * C * T * (T - 1));
    }
  });

  test('equals the causal count at T = 1, where there is nothing to mask', () => {
    expect(fullSquareStepFlops(PRESETS.tiny, 4, 1)).toBe(trainingStepFlops(PRESETS.tiny, 4, 1));
  });
});

describe('formatCpuTable', () => {
  const row = (engine: string, threads: number, msPerStep: number, preset = 'nano'): CpuTableRow => ({
    preset,
    B: 16,
    T: 64,
    flops: 1e9,
    engine,
    threads,
    msPerStep,
    runMedians: [msPerStep - 1, msPerStep + 1],
    coresBusy: threads * 0.95,
  });

  test('speed is against the same shape’s Shoal 1-thread row; GFLOP/s from the FLOPs', () => {
    const table = formatCpuTable([row('Shoal', 1, 40), row('PyTorch', 1, 20), row('PyTorch', 2, 80)]);
    const lines = table.split('\n');
    expect(lines).toHaveLength(5);
    expect(lines[2]).toBe('| nano 16×64 (1.00 GFLOP) | Shoal | 1 | 40.0 | 39.0–41.0 | 25.0 | 0.95 | 1.00× |');
    expect(lines[3]).toContain('| PyTorch | 1 | 20.0 | 19.0–21.0 | 50.0 | 0.95 | 2.00× |');
    expect(lines[4]).toContain('| PyTorch | 2 | 80.0 | 79.0–81.0 | 12.5 | 1.90 | 0.50× |');
  });

  test('a shape without a Shoal 1-thread row has no speed; a lone engine says so', () => {
    const lone = { ...row('TF.js-WASM', 1, 400, 'tiny'), runMedians: [], alone: true };
    const line = formatCpuTable([row('Shoal', 1, 40), lone]).split('\n')[3];
    expect(line).toContain('| TF.js-WASM (alone) | 1 | 400.0 | — |');
    expect(line).toMatch(/\| — \|$/);
  });
});
