import { afterAll, describe, expect, it } from 'vitest';
import { compareArrays } from '../compare.ts';
import { gradNorm } from '../gradnorm/gradnorm.cpu.ts';
import { randomFloats } from '../random.ts';
import { WasmArena } from '../simd/arena.cpu.ts';
import '../simd/spawn.node.ts';
import { KernelThreads } from '../simd/threads.cpu.ts';
import { adamwUpdate } from './adamw.cpu.ts';
import { SimdOptimizer } from './adamw.simd.cpu.ts';

const pools: KernelThreads[] = [];
afterAll(() => {
  for (const pool of pools) pool.close();
});

/** An optimizer on `threads` threads, and `n`-float vectors in its arena holding `values`. */
async function optimizerOn(threads: number, n: number) {
  const arena = WasmArena.create({
    floats: 4 * n + 64,
    scratchFloats: SimdOptimizer.scratchFloats(n),
    shared: threads > 1,
  }) as WasmArena;
  const pool = new KernelThreads(arena, [SimdOptimizer.module], threads);
  pools.push(pool);
  await pool.ready;
  const take = (values: Float32Array) => {
    const view = arena.allocate(values.length);
    view.set(values);
    return view;
  };
  return { optimizer: SimdOptimizer.create(arena, pool) as SimdOptimizer, take, arena };
}

describe('SimdOptimizer (WebAssembly SIMD)', () => {
  for (const n of [3, 1001, 70_003]) {
    it(`gradient norm and AdamW within float32 of the float64 reference, n = ${n}`, async () => {
      const { optimizer, take } = await optimizerOn(1, n);
      const start = [
        randomFloats(n, 1),
        randomFloats(n, 2),
        randomFloats(n, 3).map((x) => 0.1 * x),
        randomFloats(n, 4).map((x) => x * x),
      ];
      const [p, g, m, v] = start.map(take) as [Float32Array, Float32Array, Float32Array, Float32Array];
      const want = start.map((x) => x.slice()) as [Float32Array, Float32Array, Float32Array, Float32Array];
      expect(Math.abs(optimizer.gradNorm(g) / gradNorm(want[1]) - 1)).toBeLessThan(1e-6);
      for (const t of [1, 2, 7]) {
        optimizer.update(p, g, m, v, 3e-3, 0.9, 0.95, 1e-8, 0.1, t, 0.5);
        adamwUpdate(want[0], want[1], want[2], want[3], n, 3e-3, 0.9, 0.95, 1e-8, 0.1, t, 0.5);
      }
      for (const [name, got, reference] of [
        ['params', p, want[0]],
        ['m', m, want[2]],
        ['v', v, want[3]],
      ] as const) {
        const result = compareArrays(got, reference, { atol: 1e-6, rtol: 1e-5 });
        expect(result.ok, `${name}: ${result.message}`).toBe(true);
      }
    });
  }

  it('gives bitwise the same norm and update on 1 and 2 threads', async () => {
    const n = 200_003; // several pieces, a tail
    const results = [];
    for (const threads of [1, 2]) {
      const { optimizer, take } = await optimizerOn(threads, n);
      const [p, g, m, v] = [1, 2, 3, 4].map((seed) => take(randomFloats(n, seed))) as Float32Array[];
      const norm = optimizer.gradNorm(g as Float32Array);
      optimizer.update(
        p as Float32Array,
        g as Float32Array,
        m as Float32Array,
        v as Float32Array,
        1e-3,
        0.9,
        0.95,
        1e-8,
        0.1,
        3,
        0.7,
      );
      results.push({ norm, p: Array.from(p as Float32Array), v: Array.from(v as Float32Array) });
    }
    expect(results[1]).toEqual(results[0]);
  });

  it('refuses vectors outside its memory and of unequal lengths', async () => {
    const { optimizer, take } = await optimizerOn(1, 64);
    expect(() => optimizer.gradNorm(new Float32Array(8))).toThrow(/live in the arena/);
    const [a, b] = [take(new Float32Array(8)), take(new Float32Array(4))];
    expect(() => optimizer.update(a, a, a, b, 1e-3, 0.9, 0.95, 1e-8, 0, 1)).toThrow(/same length/);
  });
});
