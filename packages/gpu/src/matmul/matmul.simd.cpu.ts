/**
 * The CPU backend's float32 matmul in WebAssembly SIMD: the same products as matmul.cpu.ts
 * (llm.c layout, weights [OC, C]; forward overwrites, backward adds), 8–10× faster than the JS
 * loops. V8 never vectorises JS and its scalar loops top out near 4 GFLOP/s here (loads, bounds
 * checks and f32↔f64 conversions per multiply-add); this kernel runs at 25–40 GFLOP/s on the
 * model's shapes on the same 2-core machine (bench/cpu-step.ts), on par with TF.js's XNNPACK
 * build (≈26 GFLOP/s on a 512³ matmul). WebAssembly SIMD runs in Node and in browsers
 * (Chrome 91+, Firefox 89+, Safari 16.4+), in a Web Worker as on the main thread; where it is
 * missing, `SimdMatmul.create` returns null and the caller keeps the JS kernels. The other SIMD
 * kernels (attention, GELU, cross-entropy) share its memory, a WasmArena (simd/arena.cpu.ts).
 *
 * Everything is one kernel, generated for a few register-tile shapes:
 *
 *   gemm: C[M,N] = C0[M,N] + Σ_k A[m,k]·B[k,n]      N a multiple of 4; addresses and strides in bytes
 *
 * A is read one element at a time (splat to four lanes) through two strides, so one kernel covers
 * A and Aᵀ; B rows and C rows are contiguous. Each step of k loads 4·vectors floats of one B row
 * and `rows` elements of A and does rows × vectors f32x4 multiply-adds into accumulators that
 * stay in registers for the whole k loop (4 × 8 outputs: 8 accumulators + 2 B vectors + 1 splat
 * fit the 16 SIMD registers; 6 × 8 and 4 × 12 spill and measured 25–30% slower, 8 × 4 half as
 * fast, unrolling k by two 25% slower). C0 separates where the accumulators start from where
 * they go: C0 = C adds into C; C0 = a bias row with stride 0 initialises the forward's output
 * with the bias, in the same pass.
 *
 *   forward  out  = bias + inp · Wᵀ:  A = inp [N,C], B = Wᵀ [C,OC] (transposed into scratch once
 *                                     per call: C·OC floats against N·C·OC multiply-adds)
 *   backward dinp += dout · W:        A = dout [N,OC], B = W [OC,C]
 *            dW   += doutᵀ · inp:     A = doutᵀ (strides swapped), B = inp [N,C]
 *            dbias += 1ᵀ · dout:      A = a constant 1 (both strides 0), B = dout
 *
 * Accumulation is in f32 (as on the GPU), not in f64 as the JS kernels do: within 1e-5 of the
 * naive f64 loops on the test grid. Operands are used in place when they are views into the
 * arena's memory (WasmArena.allocate; CpuGpt keeps its activations there) and their rows are a multiple
 * of 4 floats; others are copied into scratch (rows padded to a multiple of 4), so any array and
 * any shape works, only more slowly. Nothing is allocated per call on the in-place path.
 */
import type { WasmArena } from '../simd/arena.cpu.ts';
import { assembleModule, compileOnce, FunctionBuilder, op } from '../simd/wasm.cpu.ts';

const GEMM_PARAMS = ['M', 'N', 'K', 'a', 'sam', 'sak', 'b', 'ldb', 'c', 'ldc', 'c0', 'ldc0'] as const;

/**
 * The gemm over tiles of `rows` × 4·`vectors` outputs: M must be a multiple of `rows` and N of
 * 4·`vectors` (the dispatcher runs the 4×8 kernel on the bulk and narrower ones on the edges).
 */
function gemmKernel(rows: number, vectors: number): FunctionBuilder {
  const f = new FunctionBuilder(
    `gemm${rows}x${4 * vectors}`,
    GEMM_PARAMS.map((p) => [p, 'i32'] as const),
  );
  const { M, N, K, a, sam, sak, b, ldb, c, ldc, c0, ldc0 } = f.params;
  const { localGet: get, localSet: set, i32Const: int, i32Add: add, i32Mul: mul } = op;
  const range = (n: number) => Array.from({ length: n }, (_, i) => i);
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
        for (const [v, accumulator] of (acc[r] ?? []).entries()) {
          f.emit(get(accumulator), get(x), get(bVec[v] as number), op.f32x4Mul, op.f32x4Add, set(accumulator));
        }
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

type GemmFn = (
  M: number,
  N: number,
  K: number,
  a: number,
  sam: number,
  sak: number,
  b: number,
  ldb: number,
  c: number,
  ldc: number,
  c0: number,
  ldc0: number,
) => void;

interface GemmExports {
  gemm4x8: GemmFn;
  gemm4x4: GemmFn;
  gemm1x8: GemmFn;
  gemm1x4: GemmFn;
}

const gemmModule = compileOnce(() =>
  assembleModule([gemmKernel(4, 2), gemmKernel(4, 1), gemmKernel(1, 2), gemmKernel(1, 1)]),
);

const pad4 = (n: number) => (n + 3) & ~3;
/**
 * Rows of B (and columns of A) per pass over C. With the whole k range in one pass, a 4×8 tile
 * streams K rows of A and B through the cache; for dW (K = B·T = 1,024) that spills L1 and ran at
 * 16–27 GFLOP/s. Blocks of 64 keep both panels in L1: dW 28–38 GFLOP/s, dinp with K = 512 25 → 36,
 * the rest unchanged at 35–42 (block sizes 32…1,024 timed on the nano and tiny shapes), for one
 * reload of the C tile per block.
 */
const K_BLOCK = 64;

/** float32 matmuls on a WasmArena's memory. */
export class SimdMatmul {
  private readonly kernels: GemmExports;

  private constructor(private readonly arena: WasmArena) {
    this.kernels = arena.exportsOf<GemmExports>(gemmModule() as WebAssembly.Module);
  }

  /** Whether this JavaScript engine runs WebAssembly SIMD (and may compile it here). */
  static get available(): boolean {
    return gemmModule() !== null;
  }

  /** The engine on `arena`, or null where WebAssembly SIMD is unavailable. */
  static create(arena: WasmArena): SimdMatmul | null {
    return SimdMatmul.available ? new SimdMatmul(arena) : null;
  }

  /** Scratch floats that any matmul of this shape needs, even with every operand copied. */
  static scratchFloats(N: number, C: number, OC: number): number {
    const [Cp, OCp] = [pad4(C), pad4(OC)];
    const forward = N * C + C * OCp + OCp + N * OCp;
    const backward = N * OCp + OC * Cp + 2 * N * Cp + OC * Cp + OCp;
    return Math.max(forward, backward) + 8 * 4; // + alignment of up to 8 blocks
  }

  /** out[N,OC] = inp[N,C]·W[OC,C]ᵀ + bias (overwrites out), as matmulForward. */
  forward(
    out: Float32Array,
    inp: Float32Array,
    weight: Float32Array,
    bias: Float32Array | null,
    N: number,
    C: number,
    OC: number,
  ): void {
    const arena = this.arena;
    const OCp = pad4(OC);
    const outInPlace = OCp === OC && arena.owns(out);
    arena.resetScratch();
    const weightT = arena.scratch(C * OCp);
    const biasRow = arena.scratch(OCp);
    const outAt = outInPlace ? out.byteOffset : arena.scratch(N * OCp);
    const inpAt = arena.place(inp, N, C);
    const f32 = arena.f32;
    // Wᵀ [C, OCp] and the bias row, zero-padded.
    for (let o = 0; o < OCp; o++) {
      const dst = (weightT >> 2) + o;
      if (o < OC) for (let i = 0, src = o * C; i < C; i++) f32[dst + i * OCp] = weight[src + i] as number;
      else for (let i = 0; i < C; i++) f32[dst + i * OCp] = 0;
      f32[(biasRow >> 2) + o] = bias && o < OC ? (bias[o] as number) : 0;
    }
    this.gemm(N, OCp, C, inpAt, 4 * C, 4, weightT, 4 * OCp, outAt, 4 * OCp, biasRow, 0);
    arena.copyOut(out, outAt, N, OC, OCp);
  }

  /** dinp += dout·W, dW += doutᵀ·inp, dbias += Σ_n dout (all three add), as matmulBackward. */
  backward(
    dinp: Float32Array,
    dweight: Float32Array,
    dbias: Float32Array | null,
    dout: Float32Array,
    inp: Float32Array,
    weight: Float32Array,
    N: number,
    C: number,
    OC: number,
  ): void {
    const arena = this.arena;
    const [Cp, OCp] = [pad4(C), pad4(OC)];
    arena.resetScratch();
    const doutAt = arena.place(dout, N, OC, OCp);
    const inpAt = arena.place(inp, N, C, Cp);
    const weightAt = arena.place(weight, OC, C, Cp);
    const dinpAt = arena.place(dinp, N, C, Cp);
    const dweightAt = arena.place(dweight, OC, C, Cp);
    const dbiasAt = dbias ? arena.place(dbias, 1, OC, OCp) : 0;

    this.gemm(N, Cp, OC, doutAt, 4 * OCp, 4, weightAt, 4 * Cp, dinpAt, 4 * Cp, dinpAt, 4 * Cp);
    this.gemm(OC, Cp, N, doutAt, 4, 4 * OCp, inpAt, 4 * Cp, dweightAt, 4 * Cp, dweightAt, 4 * Cp);
    // 1ᵀ·dout: A is the constant 1.0 at byte 0 of the arena, read with both strides 0.
    if (dbias) this.gemm(1, OCp, N, 0, 0, 0, doutAt, 4 * OCp, dbiasAt, 0, dbiasAt, 0);

    arena.copyOut(dinp, dinpAt, N, C, Cp);
    arena.copyOut(dweight, dweightAt, OC, C, Cp);
    if (dbias) arena.copyOut(dbias, dbiasAt, 1, OC, OCp);
  }

  /**
   * C[M,N] = C0 + A·B on byte addresses in the arena (N a multiple of 4), in blocks of K_BLOCK
   * along k (the first block starts from C0, the others from C).
   */
  gemm(
    M: number,
    N: number,
    K: number,
    a: number,
    sam: number,
    sak: number,
    b: number,
    ldb: number,
    c: number,
    ldc: number,
    c0: number,
    ldc0: number,
  ): void {
    for (let k0 = 0; k0 < K || k0 === 0; k0 += K_BLOCK) {
      const [init, initStride] = k0 === 0 ? [c0, ldc0] : [c, ldc];
      this.tiles(M, N, Math.min(K_BLOCK, K - k0), a + k0 * sak, sam, sak, b + k0 * ldb, ldb, c, ldc, init, initStride);
    }
  }

  /** One k block: the 4×8 kernel on the bulk of C, narrower ones on a last 4 columns and the last M mod 4 rows. */
  private tiles(
    M: number,
    N: number,
    K: number,
    a: number,
    sam: number,
    sak: number,
    b: number,
    ldb: number,
    c: number,
    ldc: number,
    c0: number,
    ldc0: number,
  ): void {
    const M4 = M - (M % 4);
    const N8 = N - (N % 8);
    const k = this.kernels;
    if (M4 > 0 && N8 > 0) k.gemm4x8(M4, N8, K, a, sam, sak, b, ldb, c, ldc, c0, ldc0);
    if (M4 > 0 && N8 < N) k.gemm4x4(M4, 4, K, a, sam, sak, b + 4 * N8, ldb, c + 4 * N8, ldc, c0 + 4 * N8, ldc0);
    if (M4 < M) {
      const [aTail, cTail, c0Tail] = [a + M4 * sam, c + M4 * ldc, c0 + M4 * ldc0];
      if (N8 > 0) k.gemm1x8(M - M4, N8, K, aTail, sam, sak, b, ldb, cTail, ldc, c0Tail, ldc0);
      if (N8 < N) {
        k.gemm1x4(M - M4, 4, K, aTail, sam, sak, b + 4 * N8, ldb, cTail + 4 * N8, ldc, c0Tail + 4 * N8, ldc0);
      }
    }
  }
}
