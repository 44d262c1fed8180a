import { afterAll, describe, expect, it } from 'vitest';
import { SimdMatmul } from '../matmul/matmul.simd.cpu.ts';
import { randomFloats } from '../random.ts';
import { WasmArena } from './arena.cpu.ts';
import { nodeThreadSpawner } from './spawn.node.ts';
import { KernelThreads, registerThreadSpawner, splitRange } from './threads.cpu.ts';

const pools: KernelThreads[] = [];
afterAll(() => {
  for (const pool of pools) pool.close();
});

/** A matmul engine on `count` threads (waiting until they have started), with its arena. */
async function engineOn(count: number, floats: number, scratchFloats: number) {
  const arena = WasmArena.create({ floats, scratchFloats, shared: count > 1 }) as WasmArena;
  const module = SimdMatmul.moduleFor(arena);
  if (!module) throw new Error('no WebAssembly SIMD');
  const threads = new KernelThreads(arena, [module], count);
  pools.push(threads);
  await threads.ready;
  expect(threads.started).toBe(true);
  return { arena, threads, matmul: SimdMatmul.create(arena, { threads }) as SimdMatmul };
}

/** Forward then backward of one matmul, with operands in the arena; every result, copied out. */
function forwardBackward(matmul: SimdMatmul, arena: WasmArena, N: number, C: number, OC: number, seed: number) {
  const take = (values: Float32Array) => {
    const view = arena.allocate(values.length);
    view.set(values);
    return view;
  };
  const inp = take(randomFloats(N * C, seed));
  const weight = randomFloats(OC * C, seed + 1);
  const bias = randomFloats(OC, seed + 2);
  const out = take(new Float32Array(N * OC));
  matmul.forward(out, inp, weight, bias, N, C, OC);
  const dinp = take(randomFloats(N * C, seed + 3));
  const dweight = randomFloats(OC * C, seed + 4);
  const dbias = randomFloats(OC, seed + 5);
  matmul.backward(dinp, dweight, dbias, take(randomFloats(N * OC, seed + 6)), inp, take(weight), N, C, OC);
  return [out, dinp, dweight, dbias].map((x) => Float32Array.from(x));
}

const bits = (x: Float32Array) => Array.from(new Uint32Array(x.buffer, x.byteOffset, x.length));

describe('KernelThreads', () => {
  it('splits ranges on aligned starts, the last taking the tail', () => {
    expect(splitRange(10, 2, 4)).toEqual([
      [0, 4],
      [4, 10],
    ]);
    expect(splitRange(1024, 2, 4)).toEqual([
      [0, 512],
      [512, 1024],
    ]);
    expect(splitRange(3, 4, 4)).toEqual([[0, 3]]);
    expect(splitRange(0, 2, 8)).toEqual([]);
    expect(splitRange(24, 3, 8)).toEqual([
      [0, 8],
      [8, 16],
      [16, 24],
    ]);
  });

  it('gives bitwise the same matmuls on 1, 2 and 3 threads, shapes with tails included', async () => {
    // Rows mod 4 and columns mod 8 nonzero; one product with fewer rows than the packing threshold.
    const shapes: [number, number, number][] = [
      [1024, 64, 256],
      [250, 36, 100],
      [66, 132, 12],
      [20, 16, 44],
    ];
    for (const [index, [N, C, OC]] of shapes.entries()) {
      const floats = 4 * (N * C + N * OC + OC * C) + 64;
      const scratch = SimdMatmul.scratchFloats(N, C, OC);
      const results = [];
      for (const count of [1, 2, 3]) {
        const { arena, matmul } = await engineOn(count, floats, scratch);
        results.push(forwardBackward(matmul, arena, N, C, OC, 100 * index));
      }
      for (const other of results.slice(1)) {
        for (const [i, array] of other.entries()) {
          expect(bits(array), `N=${N} C=${C} OC=${OC} result ${i}`).toEqual(bits(results[0]?.[i] as Float32Array));
        }
      }
    }
  });

  it('runs jobs on the calling thread until the threads have started, with the same results', async () => {
    const [N, C, OC] = [256, 32, 64];
    const floats = 4 * (N * C + N * OC + OC * C) + 64;
    const scratch = SimdMatmul.scratchFloats(N, C, OC);
    const arena = WasmArena.create({ floats, scratchFloats: scratch, shared: true }) as WasmArena;
    const threads = new KernelThreads(
      arena,
      [SimdMatmul.moduleFor(arena) as NonNullable<ReturnType<typeof SimdMatmul.moduleFor>>],
      2,
    );
    pools.push(threads);
    expect(threads.started).toBe(false); // nothing has run yet: no thread can have started
    const early = forwardBackward(SimdMatmul.create(arena, { threads }) as SimdMatmul, arena, N, C, OC, 7);
    await threads.ready;
    const { arena: other, matmul } = await engineOn(2, floats, scratch);
    const late = forwardBackward(matmul, other, N, C, OC, 7);
    for (const [i, array] of late.entries()) expect(bits(array)).toEqual(bits(early[i] as Float32Array));
  });

  it('reports a kernel that fails on another thread as an error, and keeps working', async () => {
    const { threads, matmul, arena } = await engineOn(2, 1024, SimdMatmul.scratchFloats(64, 8, 8));
    const fn = threads.fn(matmul.module, 'packB8');
    const outside = arena.memory.buffer.byteLength + 4096; // out of bounds: the wasm traps
    // Whichever thread takes the bad task: its trap here, or the other thread's failure, is thrown.
    const good = { fn, args: [1, 8, 0, 32, 64] };
    const bad = { fn, args: [1, 8, outside, 32, 64] };
    for (let i = 0; i < 10; i++) {
      expect(() => threads.run(i % 2 ? [[good], [bad]] : [[bad], [good], [good]])).toThrow(
        /failed on thread 1|out of bounds/,
      );
    }
    threads.run([[{ fn, args: [1, 8, 0, 32, 64] }], [{ fn, args: [1, 8, 0, 32, 96] }]]);
  });

  it('runs a list of tasks too long for one job as several, with the same results', async () => {
    const { threads, matmul, arena } = await engineOn(2, 1 << 16, SimdMatmul.scratchFloats(64, 8, 8));
    const fn = threads.fn(matmul.module, 'packB8');
    const src = arena.allocate(8);
    src.set([1, 2, 3, 4, 5, 6, 7, 8]);
    const dst = arena.allocate(8 * 6);
    // 6 tasks of 12,000 one-row copies (8 words each): 576,000 words, past one job's 262,144.
    const tasks = Array.from({ length: 6 }, (_, t) =>
      Array.from({ length: 12_000 }, () => ({ fn, args: [1, 8, src.byteOffset, 32, dst.byteOffset + 32 * t] })),
    );
    threads.run(tasks);
    expect(Array.from(dst)).toEqual(Array.from({ length: 48 }, (_, i) => (i % 8) + 1));
    // One round too long for the buffer runs on the calling thread.
    dst.fill(0);
    threads.run([tasks[0]?.concat(tasks[0], tasks[0]) ?? [], tasks[1] ?? []]);
    expect(Array.from(dst.subarray(0, 16))).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 5, 6, 7, 8]);
  });

  it('gives up waiting for threads that never start, and runs every job on the calling thread', async () => {
    registerThreadSpawner(() => ({ terminate() {} })); // a thread that never runs (a CSP without blob: workers)
    try {
      const [N, C, OC] = [64, 16, 32];
      const arena = WasmArena.create({
        floats: 4 * (N * C + N * OC + OC * C) + 64,
        scratchFloats: SimdMatmul.scratchFloats(N, C, OC),
        shared: true,
      }) as WasmArena;
      const module = SimdMatmul.moduleFor(arena) as NonNullable<ReturnType<typeof SimdMatmul.moduleFor>>;
      const threads = new KernelThreads(arena, [module], 2, 50);
      pools.push(threads);
      await threads.ready; // resolves after 50 ms, not never
      expect(threads.started).toBe(false);
      const results = forwardBackward(SimdMatmul.create(arena, { threads }) as SimdMatmul, arena, N, C, OC, 5);
      const { arena: other, matmul } = await engineOn(
        1,
        4 * (N * C + N * OC + OC * C) + 64,
        SimdMatmul.scratchFloats(N, C, OC),
      );
      const alone = forwardBackward(matmul, other, N, C, OC, 5);
      for (const [i, array] of results.entries()) expect(bits(array)).toEqual(bits(alone[i] as Float32Array));
    } finally {
      registerThreadSpawner(nodeThreadSpawner);
    }
  });

  it('refuses what cannot work: threads on an unshared memory, a function it does not run', () => {
    const arena = WasmArena.create({ floats: 16 }) as WasmArena;
    const module = SimdMatmul.moduleFor(arena) as NonNullable<ReturnType<typeof SimdMatmul.moduleFor>>;
    expect(() => new KernelThreads(arena, [module], 2)).toThrow(/shared WasmArena/);
    expect(() => new KernelThreads(arena, [module], 0)).toThrow(RangeError);
    expect(() => new KernelThreads(arena, [module], 1).fn(module, 'nope')).toThrow(/no kernel module/);
  });
});
