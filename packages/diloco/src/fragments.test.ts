import { buildLayout, PRESETS, type PresetName, tensor } from '@shoal/model';
import { describe, expect, it } from 'vitest';
import { buildFragments, type FragmentMode, fragmentBlocks, gatherFragment, scatterFragment } from './fragments.ts';

// Sizes by hand: embeddings E = (V + T)·C, a block B = 12C² + 13C, ln_f 2C.
const nano = { E: (256 + 64) * 64, B: 12 * 64 * 64 + 13 * 64, lnF: 2 * 64 }; // 20480, 49984, 128
const tiny = { E: (256 + 128) * 128, B: 12 * 128 * 128 + 13 * 128, lnF: 2 * 128 }; // 49152, 198272, 256
const small = { E: (256 + 256) * 384, B: 12 * 384 * 384 + 13 * 384, lnF: 2 * 384 }; // 196608, 1774464, 768

const table = (name: PresetName, P: number, mode: FragmentMode) =>
  buildFragments(buildLayout(PRESETS[name]), P, mode).map(({ blocks, ranges }) => ({ blocks, ranges }));

describe('buildFragments tables', () => {
  it('nano (2 layers)', () => {
    const { E, B, lnF } = nano;
    expect(E + 2 * B + lnF).toBe(buildLayout(PRESETS.nano).size);
    for (const mode of ['sequential', 'strided'] as const) {
      expect(table('nano', 1, mode)).toEqual([{ blocks: [0, 1], ranges: [[0, E + 2 * B + lnF]] }]);
      expect(table('nano', 2, mode)).toEqual([
        { blocks: [0], ranges: [[0, E + B]] },
        { blocks: [1], ranges: [[E + B, E + 2 * B + lnF]] },
      ]);
    }
  });

  it('tiny (4 layers)', () => {
    const { E, B, lnF } = tiny;
    const end = E + 4 * B + lnF;
    expect(table('tiny', 2, 'sequential')).toEqual([
      { blocks: [0, 1], ranges: [[0, E + 2 * B]] },
      { blocks: [2, 3], ranges: [[E + 2 * B, end]] },
    ]);
    expect(table('tiny', 2, 'strided')).toEqual([
      {
        blocks: [0, 2],
        ranges: [
          [0, E + B],
          [E + 2 * B, E + 3 * B],
        ],
      },
      {
        blocks: [1, 3],
        ranges: [
          [E + B, E + 2 * B],
          [E + 3 * B, end],
        ],
      },
    ]);
    // P = 3 does not divide 4: sequential gives the extra block to the last fragment (the first
    // already has the embeddings); strided deals blocks round-robin, so fragment 0 gets it.
    expect(table('tiny', 3, 'sequential')).toEqual([
      { blocks: [0], ranges: [[0, E + B]] },
      { blocks: [1], ranges: [[E + B, E + 2 * B]] },
      { blocks: [2, 3], ranges: [[E + 2 * B, end]] },
    ]);
    expect(table('tiny', 3, 'strided')).toEqual([
      {
        blocks: [0, 3],
        ranges: [
          [0, E + B],
          [E + 3 * B, end],
        ],
      },
      { blocks: [1], ranges: [[E + B, E + 2 * B]] },
      { blocks: [2], ranges: [[E + 2 * B, E + 3 * B]] },
    ]);
  });

  it('small (6 layers)', () => {
    const { E, B, lnF } = small;
    const end = E + 6 * B + lnF;
    expect(table('small', 4, 'sequential').map((f) => f.blocks)).toEqual([[0], [1], [2, 3], [4, 5]]);
    expect(table('small', 4, 'strided').map((f) => f.blocks)).toEqual([[0, 4], [1, 5], [2], [3]]);
    expect(table('small', 4, 'strided')[1]?.ranges).toEqual([
      [E + B, E + 2 * B],
      [E + 5 * B, end],
    ]);
    expect(table('small', 3, 'strided')[0]?.ranges).toEqual([
      [0, E + B],
      [E + 3 * B, E + 4 * B],
    ]);
    const six = table('small', 6, 'sequential');
    expect(six.map((f) => f.blocks)).toEqual([[0], [1], [2], [3], [4], [5]]);
    expect(six[0]?.ranges).toEqual([[0, E + B]]);
    expect(six[5]?.ranges).toEqual([[E + 5 * B, end]]);
    expect(table('small', 6, 'strided')).toEqual(six);
  });

  it('rejects P outside 1 … n_layer and unknown modes', () => {
    const layout = buildLayout(PRESETS.small);
    expect(() => buildFragments(layout, 0, 'sequential')).toThrow(/from 1 to n_layer = 6, got 0/);
    expect(() => buildFragments(layout, 7, 'strided')).toThrow(RangeError);
    expect(() => buildFragments(layout, 1.5, 'strided')).toThrow(/got 1.5/);
    expect(() => fragmentBlocks(6, 2, 'random' as FragmentMode)).toThrow(/'sequential' or 'strided'/);
  });
});

describe('buildFragments invariants', () => {
  for (const name of ['nano', 'tiny', 'small'] as const) {
    const layout = buildLayout(PRESETS[name]);
    const L = layout.config.nLayer;
    for (const mode of ['sequential', 'strided'] as const) {
      it(`${name}, ${mode}, every P: each parameter in exactly one fragment, block counts within one`, () => {
        for (let P = 1; P <= L; P++) {
          const fragments = buildFragments(layout, P, mode);
          expect(fragments).toHaveLength(P);
          const hits = new Uint8Array(layout.size);
          for (const f of fragments) {
            let previousEnd = -1;
            for (const [start, end] of f.ranges) {
              expect(start).toBeGreaterThan(previousEnd); // sorted, disjoint, not touching
              for (let i = start; i < end; i++) hits[i] = (hits[i] as number) + 1;
              previousEnd = end;
            }
          }
          expect(hits.every((h) => h === 1)).toBe(true);
          expect(fragments.reduce((sum, f) => sum + f.size, 0)).toBe(layout.size);
          const counts = fragments.map((f) => f.blocks.length);
          expect(Math.max(...counts) - Math.min(...counts)).toBeLessThanOrEqual(1);
          expect(fragments.flatMap((f) => f.blocks).sort((a, b) => a - b)).toEqual([...Array(L).keys()]);
          // embeddings ride with block 0, ln_f with the last block
          const holding = (offset: number) =>
            fragments.find((f) => f.ranges.some(([s, e]) => s <= offset && offset < e));
          const withBlock = (b: number) => fragments.find((f) => f.blocks.includes(b));
          expect(holding(tensor(layout, 'transformer.wpe.weight').offset)).toBe(withBlock(0));
          expect(holding(tensor(layout, 'transformer.ln_f.bias').offset)).toBe(withBlock(L - 1));
        }
      });
    }
  }
});

describe('gatherFragment / scatterFragment', () => {
  const layout = buildLayout(PRESETS.tiny);
  const flat = Float32Array.from({ length: layout.size }, (_, i) => Math.sin(i) * 3);

  it('round-trips every fragment through its contiguous form', () => {
    for (const mode of ['sequential', 'strided'] as const) {
      const fragments = buildFragments(layout, 3, mode);
      const rebuilt = new Float32Array(layout.size);
      for (const f of fragments) {
        const contiguous = gatherFragment(flat, f);
        expect(contiguous).toHaveLength(f.size);
        scatterFragment(contiguous, f, rebuilt);
      }
      // a plain loop: toEqual over 0.8M elements takes seconds
      expect(rebuilt.findIndex((value, i) => value !== flat[i])).toBe(-1);
    }
  });

  it('concatenates ranges in ascending offset order', () => {
    const fragment = buildFragments(layout, 2, 'strided')[1];
    if (!fragment) throw new Error('no fragment 1');
    const contiguous = gatherFragment(flat, fragment);
    const [[s0, e0] = [0, 0], [s1] = [0]] = fragment.ranges;
    expect(contiguous[0]).toBe(flat[s0]);
    expect(contiguous[e0 - s0]).toBe(flat[s1]);
  });

  it('checks lengths', () => {
    const fragment = buildFragments(layout, 2, 'sequential')[0];
    if (!fragment) throw new Error('no fragment 0');
    expect(() => gatherFragment(flat, fragment, new Float32Array(3))).toThrow(/output holds 3/);
    expect(() => scatterFragment(new Float32Array(3), fragment, flat)).toThrow(/got 3/);
    expect(() => gatherFragment(new Float32Array(10), fragment)).toThrow(/flat vector has 10/);
  });
});

describe('fragment tensors', () => {
  it('lists every tensor once, at its offset in the contiguous form, with its shape', () => {
    const layout = buildLayout(PRESETS.tiny);
    for (const mode of ['sequential', 'strided'] as const) {
      const fragments = buildFragments(layout, 3, mode);
      const names = fragments.flatMap((f) => f.tensors.map((t) => t.name)).sort();
      expect(names).toEqual(layout.tensors.map((t) => t.name).sort());
      const flat = Float32Array.from({ length: layout.size }, (_, i) => i);
      for (const f of fragments) {
        const contiguous = gatherFragment(flat, f);
        expect(f.tensors.reduce((n, t) => n + t.size, 0)).toBe(f.size);
        for (const t of f.tensors) {
          const spec = layout.byName.get(t.name);
          expect(contiguous[t.offset]).toBe(spec?.offset);
          expect(t.rows * t.cols).toBe(t.size);
          expect([t.rows, t.cols]).toEqual(spec?.shape.length === 2 ? spec.shape : [t.size, 1]);
        }
      }
    }
  });
});
