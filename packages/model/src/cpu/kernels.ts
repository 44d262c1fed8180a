/**
 * The kernels and storage behind one CpuGpt. Float64Array (the gradient-check reference) runs the
 * kernels' CPU references as they are. Float32Array (the training backend) runs every kernel
 * but the embedding (<1% of a step) in WebAssembly SIMD (the *.simd.cpu.ts kernels, 5–10× their
 * JS references), with the activations allocated in the kernels' shared memory (a WasmArena), so
 * no activation is ever copied. Where WebAssembly SIMD is missing, or a shape does not suit a
 * SIMD kernel (T, the head size or C not a multiple of 4, V not a multiple of 16), the JS
 * references run instead.
 */
import {
  attentionBackward,
  attentionForward,
  crossEntropyBackward,
  crossEntropyForward,
  embeddingBackward,
  embeddingForward,
  type FloatArray,
  geluBackward,
  geluForward,
  KernelThreads,
  layernormBackward,
  layernormForward,
  type ModuleFamily,
  matmulBackward,
  matmulForward,
  residualBackward,
  residualForward,
  SimdAttention,
  SimdCrossEntropy,
  SimdGelu,
  SimdLayernorm,
  SimdMatmul,
  SimdOptimizer,
  SimdResidual,
  WasmArena,
} from '@shoal/gpu';

/** Every kernel CpuGpt calls, with the signatures of the CPU references. */
export interface CpuKernels<A extends FloatArray> {
  embeddingForward(out: A, tokens: Int32Array, wte: A, wpe: A, B: number, T: number, C: number): void;
  embeddingBackward(dwte: A, dwpe: A, dout: A, tokens: Int32Array, B: number, T: number, C: number): void;
  layernormForward(out: A, mean: A, rstd: A, inp: A, weight: A, bias: A, N: number, C: number): void;
  layernormBackward(
    dinp: A,
    dweight: A,
    dbias: A,
    dout: A,
    inp: A,
    weight: A,
    mean: A,
    rstd: A,
    N: number,
    C: number,
  ): void;
  matmulForward(out: A, inp: A, weight: A, bias: A | null, N: number, C: number, OC: number): void;
  matmulBackward(
    dinp: A,
    dweight: A,
    dbias: A | null,
    dout: A,
    inp: A,
    weight: A,
    N: number,
    C: number,
    OC: number,
  ): void;
  attentionForward(out: A, preatt: A, att: A, qkv: A, B: number, T: number, C: number, NH: number): void;
  attentionBackward(
    dqkv: A,
    dpreatt: A,
    datt: A,
    dout: A,
    qkv: A,
    att: A,
    B: number,
    T: number,
    C: number,
    NH: number,
  ): void;
  geluForward(out: A, inp: A, n: number): void;
  geluBackward(dinp: A, inp: A, dout: A, n: number): void;
  residualForward(out: A, a: A, b: A, n: number): void;
  residualBackward(da: A, db: A, dout: A, n: number): void;
  crossEntropyForward(losses: A, logits: A, targets: Int32Array, N: number, V: number): number;
  crossEntropyBackward(dlogits: A, logits: A, targets: Int32Array, N: number, V: number): void;
}

/** The kernels' CPU references, generic over the float type: the definition the others must match. */
const CPU_REFERENCE_KERNELS: Readonly<CpuKernels<FloatArray>> = Object.freeze({
  embeddingForward,
  embeddingBackward,
  layernormForward,
  layernormBackward,
  matmulForward,
  matmulBackward,
  attentionForward,
  attentionBackward,
  geluForward,
  geluBackward,
  residualForward,
  residualBackward,
  crossEntropyForward,
  crossEntropyBackward,
});

export type FloatArrayConstructor<A extends FloatArray> = new (length: number) => A;

/** What a CpuGpt computes with: its kernels, and where its activations live. */
export interface CpuBackend<A extends FloatArray> {
  /** 'wasm-simd' when the matmuls run in WebAssembly SIMD, else 'js'. */
  readonly name: 'js' | 'wasm-simd';
  readonly kernels: CpuKernels<A>;
  /** Threads the kernels are split over (the caller's included): `threads` as asked, or 1 where they cannot be had. */
  readonly threads: number;
  /** Why fewer threads than asked run, when they do. */
  readonly threadsNote?: string;
  /** Resolves once every thread has started (kernels run on the calling thread alone until then, with the same results). */
  readonly ready: Promise<void>;
  /** `n` zeroed floats for activations (views into one block: call once per array you need). */
  allocate(n: number): A;
  /** Gradient norm and AdamW for vectors from `allocate`, in SIMD on the same threads (null on the JS kernels). */
  readonly optimizer: SimdOptimizer | null;
  /** Stops the threads. */
  destroy(): void;
}

/** The most threads the CPU engine uses by default: past this, the model's products split too finely to gain. */
export const MAX_DEFAULT_CPU_THREADS = 8;

/**
 * The CPU engine's default thread count on a machine with `cores` logical cores (Node:
 * os.availableParallelism(); browsers: navigator.hardwareConcurrency, and only where the page
 * is cross-origin isolated): every core, up to MAX_DEFAULT_CPU_THREADS. A volunteer's duty cycle
 * then sets how much of the wall time they are busy.
 */
export function defaultCpuThreads(cores: number | undefined): number {
  if (!cores || !Number.isFinite(cores) || cores < 1) return 1;
  return Math.min(MAX_DEFAULT_CPU_THREADS, Math.floor(cores));
}

export interface CpuBackendOptions {
  /** Float32Array only: run matmuls in WebAssembly SIMD when available (default true). */
  simd?: boolean;
  /**
   * Float32Array with SIMD only: threads to split the kernels over, the caller's included
   * (default 1). More than one needs a shared WebAssembly memory (SharedArrayBuffer: browsers
   * allow it on cross-origin isolated pages) and a thread spawner (@shoal/gpu's entries register
   * one); where either is missing the backend runs on one thread and says why in `threadsNote`.
   * Results are bitwise the same on any number of threads.
   */
  threads?: number;
  /** Float32Array with SIMD only: let the matmul use relaxed SIMD's fused multiply-adds where it can (default true). */
  relaxed?: boolean;
}

/**
 * The backend for `floats` floats of activations and matmuls of the given shapes [N, C, OC]
 * (the arena reserves scratch for the largest call, so no call ever needs to grow its memory).
 */
export function createCpuBackend<A extends FloatArray>(
  ArrayType: FloatArrayConstructor<A>,
  floats: number,
  shapes: CpuModelShapes,
  options: CpuBackendOptions = {},
): CpuBackend<A> {
  const threads = options.threads ?? 1;
  if (!Number.isInteger(threads) || threads < 1)
    throw new RangeError(`threads must be a whole number ≥ 1, not ${threads}`);
  const simd =
    (ArrayType as unknown) === Float32Array && options.simd !== false
      ? createSimdKernels(floats, shapes, options)
      : null;
  if (simd) return simd as unknown as CpuBackend<A>;
  return {
    name: 'js',
    kernels: CPU_REFERENCE_KERNELS,
    threads: 1,
    ...(threads > 1 ? { threadsNote: 'the JS kernels run on one thread' } : {}),
    ready: Promise.resolve(),
    allocate: (n) => new ArrayType(n),
    optimizer: null,
    destroy() {},
  };
}

/** The shapes one CpuGpt's kernels see, to size the SIMD scratch. */
export interface CpuModelShapes {
  /** [N, C, OC] of every matmul. */
  matmuls: readonly [number, number, number][];
  T: number;
  C: number;
  NH: number;
  /** Rows and vocabulary of the cross-entropy. */
  N: number;
  V: number;
  /** The longest vector the optimizer runs on (0: none). */
  optimizer?: number;
}

/**
 * The float32 backend on WebAssembly SIMD, or null where it cannot run (no SIMD, or no memory).
 * Each other family falls back to its JS reference on its own when its module does not compile
 * (the GELU module, unrolled, is 4.8 kB; the others 0.3–1.8 kB) or the shapes do not suit it.
 */
function createSimdKernels(
  floats: number,
  shapes: CpuModelShapes,
  options: CpuBackendOptions,
): CpuBackend<Float32Array> | null {
  if (!SimdMatmul.available) return null;
  const { matmuls, T, C, NH, N, V } = shapes;
  const scratchFloats = Math.max(
    ...matmuls.map(([n, c, oc]) => SimdMatmul.scratchFloats(n, c, oc)),
    SimdAttention.scratchFloats(N / T, T, C, NH),
    SimdCrossEntropy.scratchFloats(N, V),
    SimdLayernorm.scratchFloats(N, C),
    SimdOptimizer.scratchFloats(shapes.optimizer ?? 0),
    // SimdGelu and SimdResidual copy nothing here (their operands are activations): no scratch.
  );
  const pool = createThreads(floats, scratchFloats, options);
  if (!pool) return null;
  const { arena, threads, note } = pool;
  const matmul = SimdMatmul.create(arena, { relaxed: options.relaxed, threads });
  if (!matmul) return null;
  const attention = SimdAttention.supports(T, C, NH) ? SimdAttention.create(arena, matmul) : null;
  const crossEntropy = SimdCrossEntropy.supports(V) ? SimdCrossEntropy.create(arena) : null;
  const layernorm = SimdLayernorm.supports(C) ? SimdLayernorm.create(arena) : null;
  const gelu = SimdGelu.create(arena, threads);
  const residual = SimdResidual.create(arena);
  const js = CPU_REFERENCE_KERNELS;
  const kernels: CpuKernels<Float32Array> = {
    embeddingForward: js.embeddingForward,
    embeddingBackward: js.embeddingBackward,
    layernormForward: layernorm
      ? (out, mean, rstd, inp, weight, bias, N, C) => layernorm.forward(out, mean, rstd, inp, weight, bias, N, C)
      : js.layernormForward,
    layernormBackward: layernorm
      ? (dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C) =>
          layernorm.backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C)
      : js.layernormBackward,
    matmulForward: (out, inp, weight, bias, N, C, OC) => matmul.forward(out, inp, weight, bias, N, C, OC),
    matmulBackward: (dinp, dweight, dbias, dout, inp, weight, N, C, OC) =>
      matmul.backward(dinp, dweight, dbias, dout, inp, weight, N, C, OC),
    attentionForward: attention
      ? (out, preatt, att, qkv, B, T, C, NH) => attention.forward(out, preatt, att, qkv, B, T, C, NH)
      : js.attentionForward,
    attentionBackward: attention
      ? (dqkv, dpreatt, datt, dout, qkv, att, B, T, C, NH) =>
          attention.backward(dqkv, dpreatt, datt, dout, qkv, att, B, T, C, NH)
      : js.attentionBackward,
    geluForward: gelu ? (out, inp, n) => gelu.forward(out, inp, n) : js.geluForward,
    geluBackward: gelu ? (dinp, inp, dout, n) => gelu.backward(dinp, inp, dout, n) : js.geluBackward,
    residualForward: residual ? (out, a, b, n) => residual.forward(out, a, b, n) : js.residualForward,
    residualBackward: residual ? (da, db, dout, n) => residual.backward(da, db, dout, n) : js.residualBackward,
    crossEntropyForward: crossEntropy
      ? (losses, logits, targets, N, V) => crossEntropy.forward(losses, logits, targets, N, V)
      : js.crossEntropyForward,
    crossEntropyBackward: crossEntropy
      ? (dlogits, logits, targets, N, V) => crossEntropy.backward(dlogits, logits, targets, N, V)
      : js.crossEntropyBackward,
  };
  return {
    name: 'wasm-simd',
    kernels,
    threads: threads.size,
    ...(note ? { threadsNote: note } : {}),
    ready: threads.ready,
    allocate: (n) => arena.allocate(n),
    optimizer: SimdOptimizer.create(arena, threads),
    destroy: () => threads.close(),
  };
}

/** The kernel modules the threads run: the matmul's, and those of the families split over threads that compile here. */
function threadModules(arena: WasmArena, matmul: ModuleFamily): ModuleFamily[] {
  return [
    matmul,
    ...[SimdAttention.module, SimdGelu.module, SimdOptimizer.module].filter((family) => family(arena.shared) !== null),
  ];
}

/**
 * The arena and its KernelThreads: `options.threads` of them on a shared memory where that can
 * be had, else one on an ordinary memory, with the reason. Null where no memory can be had.
 */
function createThreads(
  floats: number,
  scratchFloats: number,
  options: CpuBackendOptions,
): { arena: WasmArena; threads: KernelThreads; note?: string } | null {
  const asked = options.threads ?? 1;
  const single = (note?: string) => {
    const arena = WasmArena.create({ floats, scratchFloats });
    const module = arena && SimdMatmul.moduleFor(arena, options);
    if (!arena || !module) return null;
    return {
      arena,
      threads: new KernelThreads(arena, threadModules(arena, module), 1),
      ...(note ? { note } : {}),
    };
  };
  if (asked === 1) return single();
  if (typeof SharedArrayBuffer === 'undefined') {
    return single('no SharedArrayBuffer here (a browser page must be cross-origin isolated): one thread');
  }
  const arena = WasmArena.create({ floats, scratchFloats, shared: true });
  const module = arena && SimdMatmul.moduleFor(arena, options);
  if (!arena || !module) return single('no shared WebAssembly memory of this size could be had: one thread');
  try {
    return { arena, threads: new KernelThreads(arena, threadModules(arena, module), asked) };
  } catch (error) {
    return single(`${error instanceof Error ? error.message : String(error)}: one thread`);
  }
}
