/**
 * The WebAssembly SIMD kernels SimdMatmul (matmul.simd.cpu.ts) runs, generated for a few
 * register-tile shapes: gemm (A and B read in place through strides), panel (a 4 × 8 or smaller
 * tile of C over packed panels of A and B), and the packers of A and B; compiled once as a module
 * with a multiply and an add (every engine with WebAssembly SIMD) and once with relaxed SIMD's
 * fused multiply-add (where `relaxedSimd()`).
 */
import { compileOnce, FunctionBuilder, type Instr, op, relaxedSimd } from '../simd/wasm.cpu.ts';

const GEMM_PARAMS = ['M', 'N', 'K', 'a', 'sam', 'sak', 'b', 'ldb', 'c', 'ldc', 'c0', 'ldc0'] as const;
const PANEL_PARAMS = ['M', 'N', 'K', 'a', 'b', 'kb', 'c', 'ldc', 'c0', 'ldc0'] as const;
const range = (n: number) => Array.from({ length: n }, (_, i) => i);

/** acc += x·b: one relaxed (fused) multiply-add, or a multiply and an add. */
function multiplyAdd(fma: boolean, acc: number, x: number, b: number): Instr[] {
  const { localGet: get, localSet: set } = op;
  return fma
    ? [get(x), get(b), get(acc), op.f32x4RelaxedMadd, set(acc)]
    : [get(acc), get(x), get(b), op.f32x4Mul, op.f32x4Add, set(acc)];
}

/**
 * The gemm over tiles of `rows` × 4·`vectors` outputs, reading A and B where they lie: M must be
 * a multiple of `rows` and N of 4·`vectors` (the dispatcher runs the 4×8 kernel on the bulk and
 * narrower ones on the edges). For products too small to repay packing (attention's row blocks).
 */
function gemmKernel(rows: number, vectors: number, fma: boolean): FunctionBuilder {
  const f = new FunctionBuilder(
    `gemm${rows}x${4 * vectors}`,
    GEMM_PARAMS.map((p) => [p, 'i32'] as const),
  );
  const { M, N, K, a, sam, sak, b, ldb, c, ldc, c0, ldc0 } = f.params;
  const { localGet: get, localSet: set, i32Const: int, i32Add: add, i32Mul: mul } = op;
  // kBytes = K·ldb, how far pb moves over the k loop.
  const { m, n, pa, pb, pbEnd, kBytes } = f.named('i32', ['m', 'n', 'pa', 'pb', 'pbEnd', 'kBytes']);
  // Per tile row r: byte offsets from row 0 in A, C and C0 (r·sam, r·ldc, r·ldc0), its C address.
  const rowLocals = range(rows).map(() => f.named('i32', ['a', 'c', 'c0', 'out']));
  const acc = range(rows).map(() => range(vectors).map(() => f.local('v128')));
  const bVec = range(vectors).map(() => f.local('v128'));
  const x = f.local('v128');

  f.emit(get(K), get(ldb), mul, set(kBytes));
  for (const [r, row] of rowLocals.entries()) {
    f.emit(get(sam), int(r), mul, set(row.a), get(ldc), int(r), mul, set(row.c), get(ldc0), int(r), mul, set(row.c0));
  }
  f.forLoop(m, int(0), get(M), rows, () => {
    f.forLoop(n, int(0), get(N), 4 * vectors, () => {
      // Accumulators start from C0's tile (pb as a temporary for its row address); C rows receive them.
      for (const [r, row] of rowLocals.entries()) {
        f.emit(get(c0), get(m), get(ldc0), mul, add, get(n), int(4), mul, add, get(row.c0), add, set(pb));
        for (const [v, accumulator] of (acc[r] ?? []).entries()) f.emit(get(pb), op.v128Load(16 * v), set(accumulator));
        f.emit(get(c), get(m), get(ldc), mul, add, get(n), int(4), mul, add, get(row.c), add, set(row.out));
      }
      f.emit(get(a), get(m), get(sam), mul, add, set(pa));
      f.emit(get(b), get(n), int(4), mul, add, set(pb));
      f.emit(get(pb), get(kBytes), add, set(pbEnd));
      // for k: one B row segment, `rows` splats of A, rows × vectors multiply-adds.
      f.emit(op.block, op.loop, get(pb), get(pbEnd), op.i32Eq, op.brIf(1));
      for (const [v, bv] of bVec.entries()) f.emit(get(pb), op.v128Load(16 * v), set(bv));
      for (const [r, row] of rowLocals.entries()) {
        f.emit(get(pa), ...(r > 0 ? [get(row.a), add] : []), op.v128Load32Splat(), set(x));
        for (const [v, accumulator] of (acc[r] ?? []).entries())
          f.emit(...multiplyAdd(fma, accumulator, x, bVec[v] as number));
      }
      f.emit(get(pa), get(sak), add, set(pa), get(pb), get(ldb), add, set(pb), op.br(0), op.end, op.end);
      for (const [r, row] of rowLocals.entries()) {
        for (const [v, accumulator] of (acc[r] ?? []).entries())
          f.emit(get(row.out), get(accumulator), op.v128Store(16 * v));
      }
    });
  });
  return f;
}

/**
 * The microkernel on packed panels: C[M,N] = C0 + A·B with A packed as [M/rows][K][rows] (a
 * panel's `rows` values of one k side by side) and B as [N/(4·vectors)][kb][4·vectors] (B's
 * panels may be longer than this call's K: the whole product's B is packed once), so the k
 * loop walks two pointers by constant steps and every load has a constant offset. That frees the
 * general-purpose registers the strided kernel spends on per-row addresses and measured 1.15×
 * faster with the same 4×8 tile (1.4× with relaxed multiply-adds). Tiles with more than 8
 * accumulators (6×8, 4×12, 5×8, 3×16) all ran at half speed on V8 11: its register allocator
 * spills them.
 */
function panelKernel(rows: number, vectors: number, fma: boolean): FunctionBuilder {
  const f = new FunctionBuilder(
    `panel${rows}x${4 * vectors}`,
    PANEL_PARAMS.map((p) => [p, 'i32'] as const),
  );
  const { M, N, K, a, b, kb, c, ldc, c0, ldc0 } = f.params;
  const { localGet: get, localSet: set, i32Const: int, i32Add: add, i32Mul: mul } = op;
  const { m, n, pa, pb, pbEnd, out, init, kBytes } = f.named('i32', [
    'm',
    'n',
    'pa',
    'pb',
    'pbEnd',
    'out',
    'init',
    'kBytes',
  ]);
  const acc = range(rows).map(() => range(vectors).map(() => f.local('v128')));
  const bVec = range(vectors).map(() => f.local('v128'));
  const x = f.local('v128');
  const rowOffset = (stride: number, r: number): Instr[] => (r > 0 ? [get(stride), int(r), mul, add] : []);

  f.emit(get(K), int(16 * vectors), mul, set(kBytes));
  f.forLoop(m, int(0), get(M), rows, () => {
    f.forLoop(n, int(0), get(N), 4 * vectors, () => {
      f.emit(get(c0), get(m), get(ldc0), mul, add, get(n), int(4), mul, add, set(init));
      f.emit(get(c), get(m), get(ldc), mul, add, get(n), int(4), mul, add, set(out));
      for (const r of range(rows)) {
        for (const v of range(vectors)) {
          f.emit(get(init), ...rowOffset(ldc0, r), op.v128Load(16 * v), set(acc[r]?.[v] as number));
        }
      }
      f.emit(get(a), get(m), get(K), mul, int(4), mul, add, set(pa));
      f.emit(get(b), get(n), get(kb), mul, int(4), mul, add, set(pb), get(pb), get(kBytes), add, set(pbEnd));
      f.emit(op.block, op.loop, get(pb), get(pbEnd), op.i32Eq, op.brIf(1));
      for (const v of range(vectors)) f.emit(get(pb), op.v128Load(16 * v), set(bVec[v] as number));
      for (const r of range(rows)) {
        f.emit(get(pa), op.v128Load32Splat(4 * r), set(x));
        for (const v of range(vectors)) f.emit(...multiplyAdd(fma, acc[r]?.[v] as number, x, bVec[v] as number));
      }
      f.emit(get(pa), int(4 * rows), add, set(pa), get(pb), int(16 * vectors), add, set(pb), op.br(0), op.end, op.end);
      for (const r of range(rows)) {
        for (const v of range(vectors)) {
          f.emit(get(out), ...rowOffset(ldc, r), get(acc[r]?.[v] as number), op.v128Store(16 * v));
        }
      }
    });
  });
  return f;
}

/** packA{rows}(M, K, a, sam, sak, dst): A[M,K] (strides in bytes) into panels [M/rows][K][rows] at dst. */
function packAKernel(rows: number): FunctionBuilder {
  const f = new FunctionBuilder(
    `packA${rows}`,
    (['M', 'K', 'a', 'sam', 'sak', 'dst'] as const).map((p) => [p, 'i32'] as const),
  );
  const { M, K, a, sam, sak, dst } = f.params;
  const { localGet: get, localSet: set, i32Const: int, i32Add: add, i32Mul: mul } = op;
  const { m, k, src, out } = f.named('i32', ['m', 'k', 'src', 'out']);
  f.emit(get(dst), set(out));
  f.forLoop(m, int(0), get(M), rows, () => {
    f.emit(get(a), get(m), get(sam), mul, add, set(src));
    f.forLoop(k, int(0), get(K), 1, () => {
      for (const r of range(rows)) {
        f.emit(get(out), get(src), ...(r > 0 ? [get(sam), int(r), mul, add] : []), op.f32Load(), op.f32Store(4 * r));
      }
      f.emit(get(out), int(4 * rows), add, set(out), get(src), get(sak), add, set(src));
    });
  });
  return f;
}

/** packB{4·vectors}(K, N, b, ldb, dst): B[K,N] (rows ldb bytes apart) into panels [N/(4·vectors)][K][4·vectors]. */
function packBKernel(vectors: number): FunctionBuilder {
  const f = new FunctionBuilder(
    `packB${4 * vectors}`,
    (['K', 'N', 'b', 'ldb', 'dst'] as const).map((p) => [p, 'i32'] as const),
  );
  const { K, N, b, ldb, dst } = f.params;
  const { localGet: get, localSet: set, i32Const: int, i32Add: add, i32Mul: mul } = op;
  const { n, k, src, out } = f.named('i32', ['n', 'k', 'src', 'out']);
  f.emit(get(dst), set(out));
  f.forLoop(n, int(0), get(N), 4 * vectors, () => {
    f.emit(get(b), get(n), int(4), mul, add, set(src));
    f.forLoop(k, int(0), get(K), 1, () => {
      for (const v of range(vectors)) f.emit(get(out), get(src), op.v128Load(16 * v), op.v128Store(16 * v));
      f.emit(get(out), int(16 * vectors), add, set(out), get(src), get(ldb), add, set(src));
    });
  });
  return f;
}

const gemmFunctions = (fma: boolean) => [
  ...[4, 1].flatMap((rows) => [2, 1].map((vectors) => gemmKernel(rows, vectors, fma))),
  ...[4, 1].flatMap((rows) => [2, 1].map((vectors) => panelKernel(rows, vectors, fma))),
  packAKernel(8), // also packs the forward's B = Wᵀ straight from W (its columns are W's rows)
  packAKernel(4),
  packAKernel(1),
  packBKernel(2),
  packBKernel(1),
];
/** The kernels with multiply, then add: every engine with WebAssembly SIMD. */
export const plainModule = compileOnce(() => gemmFunctions(false));
/** The kernels with relaxed multiply-adds, where `relaxedSimd()`. */
export const relaxedModule = compileOnce(() => (relaxedSimd() ? gemmFunctions(true) : null));

/** The functions SimdMatmul calls, through KernelThreads. */
export const FNS = [
  'gemm4x8',
  'gemm4x4',
  'gemm1x8',
  'gemm1x4',
  'packA4',
  'packA1',
  'packB8',
  'packB4',
  'packA8',
  'panel4x8',
  'panel4x4',
  'panel1x8',
  'panel1x4',
] as const;
