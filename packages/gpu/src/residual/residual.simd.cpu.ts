/**
 * The residual connection for the CPU backend in WebAssembly SIMD, as residual.cpu.ts: out = a + b
 * and da += dout, db += dout, four floats at a time (the JS loops take ≈1.8 ns a float, ≈1 ms of
 * a nano step). Operands outside the arena are copied; values past the last multiple of 4 in JS.
 */
import type { WasmArena } from '../simd/arena.cpu.ts';
import { compileOnce, FunctionBuilder, op } from '../simd/wasm.cpu.ts';

/** residualForward(out, a, b, n) or residualBackward(da, db, dout, n): n a multiple of 4. */
function residualKernel(backward: boolean): FunctionBuilder {
  const names = backward ? ['da', 'db', 'dout', 'n'] : ['out', 'a', 'b', 'n'];
  const f = new FunctionBuilder(
    backward ? 'residualBackward' : 'residualForward',
    names.map((name) => [name, 'i32'] as const),
  );
  const { localGet: get, localSet: set, i32Add: add } = op;
  // Parameter indices: (out, a, b, n) forward, (da, db, dout, n) backward.
  const [first, second, third, n] = [0, 1, 2, 3];
  const { i, end } = f.named('i32', ['i', 'end']);
  const d = f.local('v128');
  const at = (base: number) => [...get(base), ...get(i), ...add];
  f.emit(get(n), op.i32Const(4), op.i32Mul, set(end));
  f.forLoop(i, op.i32Const(0), get(end), 16, () => {
    if (!backward) {
      f.emit(at(first), at(second), op.v128Load(), at(third), op.v128Load(), op.f32x4Add, op.v128Store());
      return;
    }
    f.emit(at(third), op.v128Load(), set(d));
    f.emit(at(first), at(first), op.v128Load(), get(d), op.f32x4Add, op.v128Store());
    f.emit(at(second), at(second), op.v128Load(), get(d), op.f32x4Add, op.v128Store());
  });
  return f;
}

const residualModule = compileOnce(() => [residualKernel(false), residualKernel(true)]);

interface ResidualExports {
  residualForward(out: number, a: number, b: number, n: number): void;
  residualBackward(da: number, db: number, dout: number, n: number): void;
}

/** Residual forward and backward on a WasmArena. */
export class SimdResidual {
  private readonly kernels: ResidualExports;

  private constructor(private readonly arena: WasmArena) {
    this.kernels = arena.exportsOf<ResidualExports>(residualModule);
  }

  /** The kernels on `arena`, or null where WebAssembly SIMD is unavailable. */
  static create(arena: WasmArena): SimdResidual | null {
    return residualModule(arena.shared) ? new SimdResidual(arena) : null;
  }

  /** out = a + b over n floats (overwrites), as residualForward. */
  forward(out: Float32Array, a: Float32Array, b: Float32Array, n: number): void {
    const arena = this.arena;
    arena.resetScratch();
    const [aAt, bAt, outAt] = [arena.place(a, 1, n), arena.place(b, 1, n), arena.output(out, n)];
    const n4 = n & ~3;
    this.kernels.residualForward(outAt, aAt, bAt, n4);
    const f32 = arena.f32;
    for (let i = n4; i < n; i++)
      f32[(outAt >> 2) + i] = (f32[(aAt >> 2) + i] as number) + (f32[(bAt >> 2) + i] as number);
    arena.copyOut(out, outAt, 1, n);
  }

  /** da += dout, db += dout over n floats, as residualBackward. */
  backward(da: Float32Array, db: Float32Array, dout: Float32Array, n: number): void {
    const arena = this.arena;
    arena.resetScratch();
    const [daAt, dbAt, doutAt] = [arena.place(da, 1, n), arena.place(db, 1, n), arena.place(dout, 1, n)];
    const n4 = n & ~3;
    this.kernels.residualBackward(daAt, dbAt, doutAt, n4);
    const f32 = arena.f32;
    for (let i = n4; i < n; i++) {
      const d = f32[(doutAt >> 2) + i] as number;
      f32[(daAt >> 2) + i] = (f32[(daAt >> 2) + i] as number) + d;
      f32[(dbAt >> 2) + i] = (f32[(dbAt >> 2) + i] as number) + d;
    }
    arena.copyOut(da, daAt, 1, n);
    arena.copyOut(db, dbAt, 1, n);
  }
}
