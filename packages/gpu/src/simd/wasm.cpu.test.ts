import { describe, expect, it } from 'vitest';
import { WasmArena } from './arena.cpu.ts';
import {
  assembleModule,
  compileOnce,
  declareExpConstants,
  emitExp,
  FunctionBuilder,
  op,
  relaxedSimd,
  sleb,
  uleb,
} from './wasm.cpu.ts';

/** exp(src, dst, n): dst = e^src over n floats (n a multiple of 4), through emitExp. */
const expModule = compileOnce(() => {
  const f = new FunctionBuilder('exp', [
    ['src', 'i32'],
    ['dst', 'i32'],
    ['n', 'i32'],
  ]);
  const { src, dst, n } = f.params;
  const { i, end } = f.named('i32', ['i', 'end']);
  const { x, e } = f.named('v128', ['x', 'e']);
  const constants = declareExpConstants(f);
  f.emit(op.localGet(n), op.i32Const(4), op.i32Mul, op.localSet(end));
  f.forLoop(i, op.i32Const(0), op.localGet(end), 16, () => {
    f.emit(op.localGet(src), op.localGet(i), op.i32Add, op.v128Load(), op.localSet(x));
    emitExp(f, x, e, constants);
    f.emit(op.localGet(dst), op.localGet(i), op.i32Add, op.localGet(e), op.v128Store());
  });
  return [f];
});

describe('the WebAssembly assembler', () => {
  it('encodes LEB128 as the spec examples', () => {
    expect(uleb(0)).toEqual([0]);
    expect(uleb(624485)).toEqual([0xe5, 0x8e, 0x26]);
    expect(sleb(-123456)).toEqual([0xc0, 0xbb, 0x78]);
    expect(sleb(63)).toEqual([63]);
    expect(sleb(64)).toEqual([0xc0, 0x00]);
    expect(sleb(-64)).toEqual([0x40]);
  });

  it('builds a vector exp within 2 ulp of Math.exp, clamped outside [−87, 88]', () => {
    const n = 4096;
    const arena = WasmArena.create({ floats: 2 * n }) as WasmArena;
    const { exp } = arena.exportsOf<{ exp(src: number, dst: number, n: number): void }>(expModule);
    const [x, y] = [arena.allocate(n), arena.allocate(n)];
    for (let i = 0; i < n - 4; i++) x[i] = -87 + (175 * i) / (n - 4);
    x.set([-1000, -88, 89, 1000], n - 4);
    exp(x.byteOffset, y.byteOffset, n);
    let worst = 0;
    for (let i = 0; i < n - 4; i++) {
      const want = Math.exp(x[i] as number);
      const ulp = 2 ** (Math.floor(Math.log2(want)) - 23);
      worst = Math.max(worst, Math.abs((y[i] as number) - want) / ulp);
    }
    expect(worst).toBeLessThanOrEqual(2);
    // Below −87 every input gives e^−87 (a normal float, not 0); above 88, e^88 (finite).
    const [tiny, tiny2, huge, huge2] = Array.from(y.subarray(n - 4));
    expect(tiny2).toBe(tiny);
    expect(huge2).toBe(huge);
    expect(Math.abs((tiny as number) / Math.exp(-87) - 1)).toBeLessThan(1e-6);
    expect(Math.abs((huge as number) / Math.exp(88) - 1)).toBeLessThan(1e-6);
  });

  it('compiles a module for an ordinary and for a shared memory, and refuses what does not build', () => {
    const shared = WasmArena.create({ floats: 4 * 4096, shared: true }) as WasmArena;
    expect(shared.shared).toBe(true);
    expect(shared.memory.buffer).toBeInstanceOf(SharedArrayBuffer);
    expect(expModule(true)).not.toBe(expModule(false));
    const { exp } = shared.exportsOf<{ exp(src: number, dst: number, n: number): void }>(expModule);
    const [x, y] = [shared.allocate(4), shared.allocate(4)];
    x.set([0, 1, -1, 2]);
    exp(x.byteOffset, y.byteOffset, 4);
    expect(Array.from(y).map((v, i) => Math.abs(v / Math.exp(x[i] as number) - 1) < 1e-6)).toEqual([
      true,
      true,
      true,
      true,
    ]);
    // A shared memory cannot grow: scratch past its end is refused, never a detached view.
    expect(() => shared.scratch(1 << 20)).toThrow(/reserve them at create/);
    expect(compileOnce(() => null)()).toBeNull();
    expect(() => shared.exportsOf(compileOnce(() => null))).toThrow(/does not compile/);
    // The bytes a shared import takes: flags 3 (shared, with a maximum), min 1, max 65,536 pages.
    expect(assembleModule([], true).join(',')).toContain([0x02, 0x03, 0x01, 0x80, 0x80, 0x04].join(','));
    expect(typeof relaxedSimd()).toBe('boolean');
  });
});
