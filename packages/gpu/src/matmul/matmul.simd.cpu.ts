/**
 * The CPU backend's float32 matmul in WebAssembly SIMD: the same products as matmul.cpu.ts
 * (llm.c layout, weights [OC, C]; forward overwrites, backward adds), 10–12× faster than the JS
 * loops. V8 never vectorises JS and its scalar loops top out near 4 GFLOP/s here (loads, bounds
 * checks and f32↔f64 conversions per multiply-add); this runs at 40–50 GFLOP/s a thread on the
 * model's shapes on a Zen 4 core (bench/cpu-step.ts; docs/cpu-engine.md says how close that is
 * to the ceiling). WebAssembly SIMD runs in Node and in browsers (Chrome 91+, Firefox 89+,
 * Safari 16.4+), in a Web Worker as on the main thread; where it is missing, `SimdMatmul.create`
 * returns null and the caller keeps the JS kernels. The other SIMD kernels share its memory, a
 * WasmArena (simd/arena.cpu.ts), and its KernelThreads (simd/threads.cpu.ts).
 *
 * One product, generated for a few register-tile shapes (matmul.simd-kernels.cpu.ts):
 *
 *   gemm: C[M,N] = C0[M,N] + Σ_k A[m,k]·B[k,n]      N a multiple of 4; addresses and strides in bytes
 *
 * C0 separates where the accumulators start from where they go: C0 = C adds into C; C0 = a bias
 * row with stride 0 initialises the forward's output with the bias, in the same pass.
 *
 * Products of PACK_MIN_ROWS rows or more are packed: B whole into panels of 8 columns
 * ([N/8][K][8]), A per K block into panels of 4 rows ([M/4][K_BLOCK][4]), and the panel kernel
 * keeps a 4 × 8 tile of C in 8 SIMD registers while k walks both panels with constant strides:
 * per k, two B loads, four splats of A and eight multiply-adds, which are relaxed SIMD's fused
 * f32x4.relaxed_madd where the engine has it (relaxedSimd(): Node 20 with the flag set at import,
 * Node 22+, Chrome 114+) and a multiply and an add elsewhere. B is packed by the threads, split by
 * panels; then each thread takes a range of C's rows. Smaller products (attention's 16-row
 * blocks) read A and B in place through strides (A one element at a time, so one kernel covers A
 * and Aᵀ), on the calling thread or as part of a caller's task.
 *
 *   forward  out  = bias + inp · Wᵀ:  A = inp [N,C], B = Wᵀ (packed straight from W [OC,C])
 *   backward dinp += dout · W:        A = dout [N,OC], B = W [OC,C]
 *            dW   += doutᵀ · inp:     A = doutᵀ (strides swapped), B = inp [N,C]
 *            dbias += 1ᵀ · dout:      A = a constant 1 (both strides 0), B = dout
 *
 * Accumulation is in f32 (as on the GPU), not in f64 as the JS kernels do: within 1e-5 of the
 * naive f64 loops on the test grid, fused or not. Every output is one thread's sum in a fixed
 * order, so results are bitwise the same on any number of threads. Operands are used in place
 * when they are views into the arena's memory (WasmArena.allocate; CpuGpt keeps its activations
 * there) and their rows are a multiple of 4 floats; others are copied into scratch (rows padded
 * to a multiple of 4), so any array and any shape works, only more slowly.
 */
import type { WasmArena } from '../simd/arena.cpu.ts';
import { type KernelCall, KernelThreads, splitRange } from '../simd/threads.cpu.ts';
import type { ModuleFamily } from '../simd/wasm.cpu.ts';
import { FNS, plainModule, relaxedModule } from './matmul.simd-kernels.cpu.ts';

const pad4 = (n: number) => (n + 3) & ~3;
const pad8 = (n: number) => (n + 7) & ~7;
/**
 * Rows of B (and columns of A) per pass over C. Unpacked, blocks of 64 kept both operands in L1
 * (dW with K = 1,024 went from 16–27 to 28–38 GFLOP/s); packed, 64, 128 and 256 time the same
 * (tiny, within 2%) and 64 keeps the packing scratch smallest.
 */
const K_BLOCK = 64;
/** Products with fewer rows than this run unpacked: packing B would cost more than it saves. */
const PACK_MIN_ROWS = 32;

export interface SimdMatmulOptions {
  /** Use relaxed SIMD's fused multiply-add where the engine has it (default true; false for tests and benchmarks). */
  relaxed?: boolean;
  /** Threads to split products over; they must run `SimdMatmul.moduleFor(arena, options)` (default: this thread). */
  threads?: KernelThreads;
}

/** float32 matmuls on a WasmArena's memory, on one thread or several (KernelThreads). */
export class SimdMatmul {
  /** The threads its products are split over (and that SimdAttention runs its heads on). */
  readonly threads: KernelThreads;
  private readonly fns: Record<(typeof FNS)[number], number>;

  /** Whether the kernels use relaxed SIMD's fused multiply-adds. */
  readonly relaxed: boolean;

  private constructor(
    private readonly arena: WasmArena,
    readonly module: ModuleFamily,
    threads: KernelThreads | undefined,
  ) {
    this.relaxed = module === relaxedModule;
    this.threads = threads ?? new KernelThreads(arena, [module], 1);
    this.fns = Object.fromEntries(FNS.map((name) => [name, this.threads.fn(module, name)])) as typeof this.fns;
  }

  /** Whether this JavaScript engine runs WebAssembly SIMD (and may compile it here). */
  static get available(): boolean {
    return plainModule() !== null;
  }

  /**
   * The kernel module `create` uses on `arena` with these options (relaxed where it can), or null
   * where WebAssembly SIMD is unavailable: give it to the KernelThreads that `options.threads` names.
   */
  static moduleFor(arena: WasmArena, options: Pick<SimdMatmulOptions, 'relaxed'> = {}): ModuleFamily | null {
    if (!plainModule(arena.shared)) return null;
    return options.relaxed !== false && relaxedModule(arena.shared) ? relaxedModule : plainModule;
  }

  /** The engine on `arena`, or null where WebAssembly SIMD is unavailable. */
  static create(arena: WasmArena, options: SimdMatmulOptions = {}): SimdMatmul | null {
    const module = SimdMatmul.moduleFor(arena, options);
    if (!module) return null;
    if (options.threads && !options.threads.has(module))
      throw new Error('SimdMatmul: its threads must run its kernel module (SimdMatmul.moduleFor)');
    return new SimdMatmul(arena, module, options.threads);
  }

  /** Scratch floats that any matmul of this shape needs, even with every operand copied. */
  static scratchFloats(N: number, C: number, OC: number): number {
    const [Cp, OCp] = [pad4(C), pad4(OC)];
    const forward = OCp * C + OCp + N * OCp + N * C + SimdMatmul.packFloats(N, OCp, C);
    const backward =
      N * OCp + OC * Cp + 2 * N * Cp + OC * Cp + OCp + SimdMatmul.packFloats(Math.max(N, OC), Cp, Math.max(N, OC));
    return Math.max(forward, backward) + 10 * 4; // + alignment of up to 10 blocks
  }

  /** Scratch floats `gemm` takes to pack a product with C [M, N] over K: all of B, and a K block of A. */
  static packFloats(M: number, N: number, K: number): number {
    return K * pad8(N) + K_BLOCK * M;
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
    // W [OCp, C] (pad rows zero) and the bias row [OCp]: B = Wᵀ is packed straight from W.
    const weightAt = OCp === OC ? arena.place(weight, OC, C) : arena.scratch(OCp * C);
    const biasRow = arena.scratch(OCp);
    const outAt = outInPlace ? out.byteOffset : arena.scratch(N * OCp);
    const inpAt = arena.place(inp, N, C);
    const f32 = arena.f32;
    if (OCp !== OC) {
      f32.set(weight.subarray(0, OC * C), weightAt >> 2);
      f32.fill(0, (weightAt >> 2) + OC * C, (weightAt >> 2) + OCp * C);
    }
    for (let o = 0; o < OCp; o++) f32[(biasRow >> 2) + o] = bias && o < OC ? (bias[o] as number) : 0;
    this.packed(N, OCp, C, inpAt, 4 * C, 4, weightAt, 4 * C, true, outAt, 4 * OCp, biasRow, 0);
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
   * C[M,N] = C0 + A·B on byte addresses in the arena (N a multiple of 4). Products of
   * PACK_MIN_ROWS rows or more are packed (see `packed`) and split over the threads; smaller ones
   * (attention's row blocks) read A and B where they lie, on the calling thread, in blocks of
   * K_BLOCK along k (the first block starts from C0, the others from C). Each output is the same
   * sum in the same order either way, up to the multiply-add's rounding.
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
    if (M >= PACK_MIN_ROWS) {
      this.packed(M, N, K, a, sam, sak, b, ldb, false, c, ldc, c0, ldc0);
      return;
    }
    const calls: KernelCall[] = [];
    this.directCalls(calls, M, N, K, a, sam, sak, b, ldb, c, ldc, c0, ldc0);
    this.threads.run([calls]);
  }

  /**
   * C = C0 + A·B through packed panels (scratch: SimdMatmul.packFloats), B given as [K, N] with
   * rows ldb bytes apart, or (`bT`) as its transpose [N, K]. Two jobs: the threads pack all of B,
   * splitting its 8-column panels; then each thread takes a range of C's rows (a multiple of 4,
   * the last one any tail) and, per K block, packs its rows of A and runs the panel kernels on
   * them. Every output is computed by one thread in a fixed order: bitwise the same on any
   * number of threads.
   */
  private packed(
    M: number,
    N: number,
    K: number,
    a: number,
    sam: number,
    sak: number,
    b: number,
    ldb: number,
    bT: boolean,
    c: number,
    ldc: number,
    c0: number,
    ldc0: number,
  ): void {
    const { fns, threads, arena } = this;
    const packB = arena.scratch(K * pad8(N));
    const packA = arena.scratch(K_BLOCK * M);
    const N8 = N - (N % 8);
    const bTail = packB + 4 * N8 * K; // the last 4 columns' panel, [K][4]
    // 1. B, whole, into [N/8][K][8] panels and a [K][4] one.
    // Bᵀ given as [N, K] is A-shaped: its columns pack as packA's rows do (strides ldb and 4).
    const packColumns = (n: number, count: number, eight: boolean, dst: number): KernelCall =>
      bT
        ? { fn: eight ? fns.packA8 : fns.packA4, args: [count, K, b + n * ldb, ldb, 4, dst] }
        : { fn: eight ? fns.packB8 : fns.packB4, args: [K, count, b + 4 * n, ldb, dst] };
    const bTasks: KernelCall[][] = splitRange(N8, threads.tasks, 8).map(([n0, n1]) => [
      packColumns(n0, n1 - n0, true, packB + 4 * n0 * K),
    ]);
    if (N8 < N) {
      const tail = packColumns(N8, 4, false, bTail);
      if (bTasks.length > 0) bTasks[bTasks.length - 1]?.push(tail);
      else bTasks.push([tail]);
    }
    threads.run(bTasks);
    // 2. Rows of C: per K block, that block of their A rows packed, then the panels.
    const rowTasks = splitRange(M, threads.tasks, 4).map(([m0, m1]) => {
      const calls: KernelCall[] = [];
      const rows = m1 - m0;
      const rows4 = rows - (rows % 4);
      const aPack = packA + 4 * m0 * K_BLOCK; // this range's own packing area
      for (let k0 = 0; k0 < K || k0 === 0; k0 += K_BLOCK) {
        const kb = Math.min(K_BLOCK, K - k0);
        const [init, initStride] = k0 === 0 ? [c0, ldc0] : [c, ldc];
        const aRows = a + m0 * sam + k0 * sak;
        const aTail = aPack + 4 * rows4 * kb;
        if (rows4 > 0) calls.push({ fn: fns.packA4, args: [rows4, kb, aRows, sam, sak, aPack] });
        if (rows4 < rows)
          calls.push({ fn: fns.packA1, args: [rows - rows4, kb, aRows + rows4 * sam, sam, sak, aTail] });
        const [b8, b4] = [packB + 32 * k0, bTail + 16 * k0];
        const [cRow, initRow] = [c + m0 * ldc, init + m0 * initStride];
        const [cTail, initTail] = [cRow + rows4 * ldc, initRow + rows4 * initStride];
        const panel = (fn: number, m: number, n: number, pa: number, pb: number, cAt: number, initAt: number) =>
          calls.push({ fn, args: [m, n, kb, pa, pb, K, cAt, ldc, initAt, initStride] });
        if (rows4 > 0 && N8 > 0) panel(fns.panel4x8, rows4, N8, aPack, b8, cRow, initRow);
        if (rows4 > 0 && N8 < N) panel(fns.panel4x4, rows4, 4, aPack, b4, cRow + 4 * N8, initRow + 4 * N8);
        if (rows4 < rows && N8 > 0) panel(fns.panel1x8, rows - rows4, N8, aTail, b8, cTail, initTail);
        if (rows4 < rows && N8 < N) panel(fns.panel1x4, rows - rows4, 4, aTail, b4, cTail + 4 * N8, initTail + 4 * N8);
      }
      return calls;
    });
    threads.run(rowTasks);
  }

  /**
   * The calls of an unpacked product, C = C0 + A·B read in place (N a multiple of 4), appended to
   * `calls`: per K block, the 4×8 kernel on the bulk of C and narrower ones on a last 4 columns
   * and the last M mod 4 rows. For callers that run small products as tasks of their own
   * (SimdAttention, one task per head).
   */
  directCalls(
    calls: KernelCall[],
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
    const { fns } = this;
    const [M4, N8] = [M - (M % 4), N - (N % 8)];
    for (let k0 = 0; k0 < K || k0 === 0; k0 += K_BLOCK) {
      const [init, ldi] = k0 === 0 ? [c0, ldc0] : [c, ldc];
      const kb = Math.min(K_BLOCK, K - k0);
      const [ak, bk] = [a + k0 * sak, b + k0 * ldb];
      const tile = (fn: number, m: number, n: number, aAt: number, col: number, cAt: number, initAt: number) =>
        calls.push({
          fn,
          args: [m, n, kb, aAt, sam, sak, bk + 4 * col, ldb, cAt + 4 * col, ldc, initAt + 4 * col, ldi],
        });
      if (M4 > 0 && N8 > 0) tile(fns.gemm4x8, M4, N8, ak, 0, c, init);
      if (M4 > 0 && N8 < N) tile(fns.gemm4x4, M4, 4, ak, N8, c, init);
      const [aTail, cTail, initTail] = [ak + M4 * sam, c + M4 * ldc, init + M4 * ldi];
      if (M4 < M && N8 > 0) tile(fns.gemm1x8, M - M4, N8, aTail, 0, cTail, initTail);
      if (M4 < M && N8 < N) tile(fns.gemm1x4, M - M4, 4, aTail, N8, cTail, initTail);
    }
  }
}
