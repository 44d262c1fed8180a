/**
 * LayerNorm for the CPU backend in WebAssembly SIMD: layernorm.cpu.ts's passes, four channels at
 * a time (≈5× the JS loops, which spent ≈3.5 ms of a nano step and ≈13 ms of a tiny one here).
 * Row sums are f32 over four lanes (the reference sums in f64); the parameter gradients add row
 * by row into f32, in the reference's order. Needs C a multiple of 4 (`supports`); parameters
 * and their gradients outside the arena are copied in and out (C floats each).
 */
import type { WasmArena } from '../simd/arena.cpu.ts';
import { compileOnce, emitHorizontal, FunctionBuilder, op } from '../simd/wasm.cpu.ts';

const LAYERNORM_EPS = 1e-5; // as layernorm.cpu.ts (which re-exports this file: no import back)

const i32 = <N extends string>(name: N) => [name, 'i32'] as const;

/** layernormForward(out, mean, rstd, inp, weight, bias, N, C, invC): addresses in bytes. */
function forwardKernel(): FunctionBuilder {
  const f = new FunctionBuilder('layernormForward', [
    ...(['out', 'mean', 'rstd', 'inp', 'weight', 'bias', 'N', 'C'] as const).map(i32),
    ['invC', 'f32'],
  ]);
  const { localGet: get, localSet: set, i32Add: add, i32Mul: mul, i32Const: int } = op;
  const p = f.params;
  const { r, j, rowBytes, row, out } = f.named('i32', ['r', 'j', 'rowBytes', 'row', 'out']);
  const { m, s } = f.named('f32', ['m', 's']);
  const { acc, x, mv, sv } = f.named('v128', ['acc', 'x', 'mv', 'sv']);
  f.emit(get(p.C), int(4), mul, set(rowBytes));
  f.forLoop(r, int(0), get(p.N), 1, () => {
    f.emit(get(p.inp), get(r), get(rowBytes), mul, add, set(row));
    f.emit(get(p.out), get(r), get(rowBytes), mul, add, set(out));
    // mean
    f.emit(op.f32x4Const(0), set(acc));
    f.forLoop(j, int(0), get(rowBytes), 16, () => {
      f.emit(get(acc), get(row), get(j), add, op.v128Load(), op.f32x4Add, set(acc));
    });
    emitHorizontal(f, acc, 'add');
    f.emit(get(p.invC), op.f32Mul, set(m), get(m), op.f32x4Splat, set(mv));
    // rstd = 1/√(Σ(x − mean)²/C + ε): two passes, as the reference (E[x²] − mean² cancels)
    f.emit(op.f32x4Const(0), set(acc));
    f.forLoop(j, int(0), get(rowBytes), 16, () => {
      f.emit(get(row), get(j), add, op.v128Load(), get(mv), op.f32x4Sub, set(x));
      f.emit(get(acc), get(x), get(x), op.f32x4Mul, op.f32x4Add, set(acc));
    });
    f.emit(op.f32Const(1));
    emitHorizontal(f, acc, 'add');
    f.emit(get(p.invC), op.f32Mul, op.f32Const(LAYERNORM_EPS), op.f32Add, op.f32Sqrt, op.f32Div, set(s));
    f.emit(get(s), op.f32x4Splat, set(sv));
    // out = (x − mean)·rstd·weight + bias
    f.forLoop(j, int(0), get(rowBytes), 16, () => {
      f.emit(get(out), get(j), add); // the store's address
      f.emit(get(row), get(j), add, op.v128Load(), get(mv), op.f32x4Sub, get(sv), op.f32x4Mul);
      f.emit(get(p.weight), get(j), add, op.v128Load(), op.f32x4Mul);
      f.emit(get(p.bias), get(j), add, op.v128Load(), op.f32x4Add, op.v128Store());
    });
    f.emit(get(p.mean), get(r), int(4), mul, add, get(m), op.f32Store());
    f.emit(get(p.rstd), get(r), int(4), mul, add, get(s), op.f32Store());
  });
  return f;
}

/** layernormBackward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C, invC). */
function backwardKernel(): FunctionBuilder {
  const f = new FunctionBuilder('layernormBackward', [
    ...(['dinp', 'dweight', 'dbias', 'dout', 'inp', 'weight', 'mean', 'rstd', 'N', 'C'] as const).map(i32),
    ['invC', 'f32'],
  ]);
  const { localGet: get, localSet: set, i32Add: add, i32Mul: mul, i32Const: int } = op;
  const p = f.params;
  const { r, j, rowBytes, offset } = f.named('i32', ['r', 'j', 'rowBytes', 'offset']);
  const { mv, sv, sumDnorm, sumDnormNorm, norm, d, dnorm, meanDnorm, meanDnormNorm } = f.named('v128', [
    'mv',
    'sv',
    'sumDnorm',
    'sumDnormNorm',
    'norm',
    'd',
    'dnorm',
    'meanDnorm',
    'meanDnormNorm',
  ]);
  /** norm = (x − mean)·rstd, d = dout, dnorm = weight·d at byte j of the row at `offset`. */
  const loadRow = () => {
    f.emit(get(p.inp), get(offset), add, get(j), add, op.v128Load(), get(mv), op.f32x4Sub, get(sv), op.f32x4Mul);
    f.emit(set(norm), get(p.dout), get(offset), add, get(j), add, op.v128Load(), set(d));
    f.emit(get(p.weight), get(j), add, op.v128Load(), get(d), op.f32x4Mul, set(dnorm));
  };
  f.emit(get(p.C), int(4), mul, set(rowBytes));
  f.forLoop(r, int(0), get(p.N), 1, () => {
    f.emit(get(r), get(rowBytes), mul, set(offset));
    f.emit(get(p.mean), get(r), int(4), mul, add, op.f32Load(), op.f32x4Splat, set(mv));
    f.emit(get(p.rstd), get(r), int(4), mul, add, op.f32Load(), op.f32x4Splat, set(sv));
    // The two row means the input gradient needs.
    f.emit(op.f32x4Const(0), set(sumDnorm), op.f32x4Const(0), set(sumDnormNorm));
    f.forLoop(j, int(0), get(rowBytes), 16, () => {
      loadRow();
      f.emit(get(sumDnorm), get(dnorm), op.f32x4Add, set(sumDnorm));
      f.emit(get(sumDnormNorm), get(dnorm), get(norm), op.f32x4Mul, op.f32x4Add, set(sumDnormNorm));
    });
    emitHorizontal(f, sumDnorm, 'add');
    f.emit(get(p.invC), op.f32Mul, op.f32x4Splat, set(meanDnorm));
    emitHorizontal(f, sumDnormNorm, 'add');
    f.emit(get(p.invC), op.f32Mul, op.f32x4Splat, set(meanDnormNorm));
    f.forLoop(j, int(0), get(rowBytes), 16, () => {
      loadRow();
      const accumulate = (base: number, rowed: boolean, value: () => void) => {
        const address = () => f.emit(get(base), ...(rowed ? [get(offset), add] : []), get(j), add);
        address(); // the store's
        address();
        f.emit(op.v128Load());
        value();
        f.emit(op.f32x4Add, op.v128Store());
      };
      accumulate(p.dbias, false, () => f.emit(get(d)));
      accumulate(p.dweight, false, () => f.emit(get(norm), get(d), op.f32x4Mul));
      accumulate(p.dinp, true, () => {
        f.emit(get(dnorm), get(meanDnorm), op.f32x4Sub, get(norm), get(meanDnormNorm), op.f32x4Mul, op.f32x4Sub);
        f.emit(get(sv), op.f32x4Mul);
      });
    });
  });
  return f;
}

const layernormModule = compileOnce(() => [forwardKernel(), backwardKernel()]);

interface LayernormExports {
  layernormForward(
    out: number,
    mean: number,
    rstd: number,
    inp: number,
    weight: number,
    bias: number,
    N: number,
    C: number,
    invC: number,
  ): void;
  layernormBackward(
    dinp: number,
    dweight: number,
    dbias: number,
    dout: number,
    inp: number,
    weight: number,
    mean: number,
    rstd: number,
    N: number,
    C: number,
    invC: number,
  ): void;
}

/** LayerNorm forward and backward on a WasmArena. */
export class SimdLayernorm {
  private readonly kernels: LayernormExports;

  private constructor(private readonly arena: WasmArena) {
    this.kernels = arena.exportsOf<LayernormExports>(layernormModule);
  }

  /** The kernels on `arena`, or null where WebAssembly SIMD is unavailable. */
  static create(arena: WasmArena): SimdLayernorm | null {
    return layernormModule(arena.shared) ? new SimdLayernorm(arena) : null;
  }

  /** Whether rows of C channels suit the kernels (C a multiple of 4). */
  static supports(C: number): boolean {
    return C % 4 === 0;
  }

  /** Scratch floats a call needs with every operand copied. */
  static scratchFloats(N: number, C: number): number {
    return 3 * N * C + 2 * N + 4 * C + 40;
  }

  /** As layernormForward: out, mean, rstd overwritten. */
  forward(
    out: Float32Array,
    mean: Float32Array,
    rstd: Float32Array,
    inp: Float32Array,
    weight: Float32Array,
    bias: Float32Array,
    N: number,
    C: number,
  ): void {
    const arena = this.arena;
    arena.resetScratch();
    const [inpAt, weightAt, biasAt] = [arena.place(inp, N, C), arena.place(weight, 1, C), arena.place(bias, 1, C)];
    const [outAt, meanAt, rstdAt] = [arena.output(out, N * C), arena.output(mean, N), arena.output(rstd, N)];
    this.kernels.layernormForward(outAt, meanAt, rstdAt, inpAt, weightAt, biasAt, N, C, 1 / C);
    arena.copyOut(out, outAt, N, C);
    arena.copyOut(mean, meanAt, 1, N);
    arena.copyOut(rstd, rstdAt, 1, N);
  }

  /** As layernormBackward: dinp, dweight, dbias added to. */
  backward(
    dinp: Float32Array,
    dweight: Float32Array,
    dbias: Float32Array,
    dout: Float32Array,
    inp: Float32Array,
    weight: Float32Array,
    mean: Float32Array,
    rstd: Float32Array,
    N: number,
    C: number,
  ): void {
    const arena = this.arena;
    arena.resetScratch();
    const [doutAt, inpAt, weightAt] = [arena.place(dout, N, C), arena.place(inp, N, C), arena.place(weight, 1, C)];
    const [meanAt, rstdAt] = [arena.place(mean, 1, N), arena.place(rstd, 1, N)];
    const [dinpAt, dweightAt, dbiasAt] = [
      arena.place(dinp, N, C),
      arena.place(dweight, 1, C),
      arena.place(dbias, 1, C),
    ];
    this.kernels.layernormBackward(dinpAt, dweightAt, dbiasAt, doutAt, inpAt, weightAt, meanAt, rstdAt, N, C, 1 / C);
    arena.copyOut(dinp, dinpAt, N, C);
    arena.copyOut(dweight, dweightAt, 1, C);
    arena.copyOut(dbias, dbiasAt, 1, C);
  }
}
