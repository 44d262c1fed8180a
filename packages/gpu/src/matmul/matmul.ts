/**
 * The matmul family of a linear layer (weights [OC, C] row-major, activations [N, C], N = B·T),
 * following kernel.ts: pipelines compiled once in `create`, one BoundKernel per use.
 *
 *   forward         out[N,OC]  = inp[N,C]·W[OC,C]ᵀ (+ bias[OC])
 *   backwardInput   dinp[N,C] += dout[N,OC]·W[OC,C]
 *   backwardWeight  dW[OC,C]  += dout[N,OC]ᵀ·inp[N,C]   (and dbias[OC] += Σ_n dout[n,:])
 *
 * All three run one kernel (plan.ts: the tiled matmul.wgsl by default, or the register-tiled
 * matmul.register.wgsl with or without subgroups) with different tile loads. Each has a vec4
 * pipeline (C and OC multiples of 4) and a scalar one (any shape). The weight gradient reduces
 * over N, which can be long while OC×C has few tiles; it then splits K over workgroups into
 * partial results that a second kernel sums in a fixed order (deterministic, no atomics).
 *
 * Every storage binding is read_write: WebGPU forbids a buffer bound read-only and writable in
 * one dispatch, and the model's views of one flat buffer (inp and out in the activations) would
 * be exactly that.
 */
import { createEmptyStorageBuffer } from '../buffers.ts';
import { type BoundKernel, bindKernel, ceilDiv, sequence, type TensorView } from '../kernel.ts';
import { createComputePipeline } from '../shader.ts';
import matrixSource from './matmul.matrix.wgsl?raw';
import registerShared from './matmul.register.shared.wgsl?raw';
import registerSubgroup from './matmul.register.subgroup.wgsl?raw';
import registerCore from './matmul.register.wgsl?raw';
import roundF16Source from './matmul.round-f16.wgsl?raw';
import scalarAccess from './matmul.scalar.wgsl?raw';
import reduceSource from './matmul.split-reduce.wgsl?raw';
import vec4Access from './matmul.vec4.wgsl?raw';
import core from './matmul.wgsl?raw';
import {
  type MatrixKernelConfig,
  matrixCore,
  matrixPrelude,
  resolveMatrixTiles,
  SUBGROUP_MATRIX_FEATURE,
} from './matrix.ts';
import {
  foldCount,
  type Limits,
  MAX_PARTIAL_BYTES,
  type MatmulKernelName,
  type MatmulTiles,
  planGrid,
  planningLimits,
  planSplitK,
  resolveTiles,
  tensorBinding,
} from './plan.ts';
import { SharedScratch } from './scratch.ts';

export interface MatmulOptions {
  /** Which kernel (plan.ts); default 'tiled'. tune.ts picks one per adapter by measuring. */
  kernel?: MatmulKernelName;
  /**
   * Invocations along the result's columns, at least 8; a tile is 4·workgroupX (tiled) or
   * 8·workgroupX (register) columns wide (default 16, register 8).
   */
  workgroupX?: number;
  /** Invocations along the result's rows; a tile is 8·workgroupY rows high (default 16, register 8). */
  workgroupY?: number;
  /** K depth of the slices staged in workgroup memory, a multiple of 4 (default 16, register 8). */
  tileK?: number;
  /** The weight gradient splits K until about this many workgroups run (default 256). */
  targetWorkgroups?: number;
  /**
   * The subgroup-matrix (tensor-core) kernel on this configuration instead of `kernel`
   * (matrix.ts; matmul.matrix.wgsl). It changes the operands' precision: gate it (gate.ts).
   */
  matrix?: MatrixKernelConfig;
  /**
   * 'f16': the tiled kernel rounds its staged operands to f16 and accumulates in f32, the
   * numerics of the matrix kernel with f16 operands on any adapter (a room whose volunteers
   * train in f16 operands, with or without tensor cores, computes alike).
   */
  roundOperands?: 'f16';
  /** Tests only: rewrites each product's WGSL before compilation (a deliberately wrong kernel). */
  transformSource?: (code: string) => string;
}

export interface MatmulForwardArgs {
  out: TensorView; // [N, OC], overwritten
  inp: TensorView; // [N, C]
  weight: TensorView; // [OC, C]
  bias?: TensorView | null; // [OC]
  N: number;
  C: number;
  OC: number;
}

export interface MatmulBackwardInputArgs {
  dinp: TensorView; // [N, C], added to (overwritten with accumulate: false)
  dout: TensorView; // [N, OC]
  weight: TensorView; // [OC, C]
  N: number;
  C: number;
  OC: number;
  /**
   * Add into dinp (default, llm.c's semantics) or overwrite it. The model overwrites the
   * activation gradients it reuses across layers, which saves zeroing them per layer.
   */
  accumulate?: boolean;
}

export interface MatmulBackwardWeightArgs {
  dweight: TensorView; // [OC, C], added to
  dbias?: TensorView | null; // [OC], added to
  dout: TensorView; // [N, OC]
  inp: TensorView; // [N, C]
  N: number;
  C: number;
  OC: number;
  /** Partial results over K (N); default from targetWorkgroups. 1 disables the split. */
  splitK?: number;
}

type Product = 'forward' | 'backwardInput' | 'backwardWeight';
type Access = 'vec4' | 'scalar';

/** Which operand is stored with K contiguous (see the table in matmul.wgsl). */
const LAYOUTS: Record<Product, { A_K_CONTIGUOUS: number; B_K_CONTIGUOUS: number }> = {
  forward: { A_K_CONTIGUOUS: 1, B_K_CONTIGUOUS: 1 }, // inp [N,C], W [OC,C]
  backwardInput: { A_K_CONTIGUOUS: 1, B_K_CONTIGUOUS: 0 }, // dout [N,OC], W [OC,C]
  backwardWeight: { A_K_CONTIGUOUS: 0, B_K_CONTIGUOUS: 0 }, // dout [N,OC], inp [N,C]
};

/**
 * The power of two f16 operands scale dout by before rounding it (A_SCALE in matmul.wgsl and
 * matmul.matrix.wgsl): a static loss scale, PyTorch GradScaler's initial 2¹⁶. A step's dout is a
 * mean over B·T tokens, mostly below f16's normal range (6.1e-5). Measured on an H200 (small,
 * 400 steps of Moby Dick): unscaled, f16 trained 38% worse than f32 from step 250 on; at 2¹² 2.6%,
 * at 2¹⁶ 1.9%. Values past 65504 / 2¹⁶ ≈ 1 saturate (a step's dout stays far below).
 */
export const F16_GRADIENT_SCALE = 65536;

// Bits of Params.flags in matmul.wgsl.
const ACCUMULATE = 1;
const ADD_BIAS = 2;
const REDUCE_BIAS = 4;
const REDUCE_WORKGROUP = 256;

/** The WGSL module of a kernel: global access, then the core (and its slice multiplier). */
function kernelSource(kernel: MatmulKernelName, access: string): string {
  if (kernel === 'tiled') return `${access}\n${core}\n${roundF16Source}`;
  if (kernel === 'register') return `${access}\n${registerCore}\n${registerShared}`;
  return `enable subgroups;\n${access}\n${registerCore}\n${registerSubgroup}`;
}

export class MatmulKernels {
  private constructor(
    private readonly device: GPUDevice,
    private readonly limits: Limits,
    readonly tiles: MatmulTiles,
    private readonly pipelines: Record<`${Product}.${Access}`, GPUComputePipeline>,
    private readonly reducePipeline: GPUComputePipeline,
    /** Bound where a kernel has no bias: 'auto' layouts need every declared binding. */
    private readonly noBias: GPUBuffer,
    private readonly scratch: SharedScratch,
  ) {}

  static async create(device: GPUDevice, options: MatmulOptions = {}): Promise<MatmulKernels> {
    const limits = planningLimits(device.limits);
    let tiles: MatmulTiles;
    let sourceOf: (access: string) => string;
    let constants: Record<string, number> = {};
    if (options.matrix) {
      const subgroupMaxSize = device.adapterInfo?.subgroupMaxSize || 32;
      const matrixTiles = resolveMatrixTiles(limits, options.matrix, subgroupMaxSize, options.targetWorkgroups);
      // Emulated, f16 operands need no shader-f16: they are staged as f32 rounded to f16.
      const missing = [
        ...(options.matrix.emulate ? [] : [SUBGROUP_MATRIX_FEATURE, 'subgroups' as GPUFeatureName]),
        ...(options.matrix.componentType === 'f16' && !options.matrix.emulate ? ['shader-f16' as GPUFeatureName] : []),
      ].filter((feature) => !device.features.has(feature));
      if (missing.length > 0) {
        throw new RangeError(`MatmulKernels: the matrix kernel needs the device feature(s) ${missing.join(', ')}`);
      }
      tiles = matrixTiles;
      const prelude = matrixPrelude(matrixTiles, subgroupMaxSize, device.features.has('shader-f16'));
      const body = matrixCore(matrixSource, matrixTiles.matrix.emulate);
      sourceOf = (access) => `${prelude}\n${access}\n${body}\n${roundF16Source}`;
    } else {
      tiles = resolveTiles(limits, options);
      if (tiles.kernel === 'registerSubgroup' && !device.features.has('subgroups')) {
        throw new RangeError("MatmulKernels: kernel 'registerSubgroup' needs the device feature 'subgroups'");
      }
      constants = { WG_X: tiles.workgroupX, WG_Y: tiles.workgroupY, TILE_K: tiles.tileK };
      if (options.roundOperands === 'f16') {
        if (tiles.kernel !== 'tiled') throw new RangeError('MatmulKernels: roundOperands needs the tiled kernel');
        constants.ROUND_F16 = 1;
      }
      const kernel = tiles.kernel as MatmulKernelName;
      sourceOf = (access) => kernelSource(kernel, access);
    }
    const halfOperands = options.roundOperands === 'f16' || options.matrix?.componentType === 'f16';
    const entries = (['forward', 'backwardInput', 'backwardWeight'] as const).flatMap((product) =>
      (['vec4', 'scalar'] as const).map(async (access) => {
        const source = sourceOf(access === 'vec4' ? vec4Access : scalarAccess);
        const code = options.transformSource ? options.transformSource(source) : source;
        const label = `MatmulKernels.${product}${access === 'vec4' ? 'Vec4' : 'Scalar'}`;
        const scaled: Record<string, number> =
          halfOperands && product !== 'forward' ? { A_SCALE: F16_GRADIENT_SCALE } : {};
        const pipeline = await createComputePipeline(device, label, code, {
          ...constants,
          ...scaled,
          ...LAYOUTS[product],
        });
        return [`${product}.${access}`, pipeline] as const;
      }),
    );
    const [pipelines, reducePipeline] = await Promise.all([
      Promise.all(entries),
      createComputePipeline(device, 'MatmulKernels.splitReduce', reduceSource, { WORKGROUP_SIZE: REDUCE_WORKGROUP }),
    ]);
    const noBias = createEmptyStorageBuffer(device, 'MatmulKernels.noBias', 16);
    const scratch = new SharedScratch(device, 'MatmulKernels.partials', MAX_PARTIAL_BYTES);
    const byName = Object.fromEntries(pipelines) as Record<`${Product}.${Access}`, GPUComputePipeline>;
    return new MatmulKernels(device, limits, tiles, byName, reducePipeline, noBias, scratch);
  }

  /** out = inp·Wᵀ (+ bias), overwriting out. */
  forward({ out, inp, weight, bias, N, C, OC }: MatmulForwardArgs): BoundKernel {
    const label = 'MatmulKernels.forward';
    const binding = this.binder(label);
    return this.bindProduct(label, 'forward', C, OC, {
      dims: [N, OC, C], // M × N over K
      a: binding(inp, N * C, 'inp'),
      b: binding(weight, OC * C, 'weight'),
      out: binding(out, N * OC, 'out'),
      bias: bias ? binding(bias, OC, 'bias') : null,
      flags: bias ? ADD_BIAS : 0,
    });
  }

  /** dinp += dout·W (dinp = dout·W with accumulate: false). */
  backwardInput({ dinp, dout, weight, N, C, OC, accumulate = true }: MatmulBackwardInputArgs): BoundKernel {
    const label = 'MatmulKernels.backwardInput';
    const binding = this.binder(label);
    return this.bindProduct(label, 'backwardInput', C, OC, {
      dims: [N, C, OC],
      a: binding(dout, N * OC, 'dout'),
      b: binding(weight, OC * C, 'weight'),
      out: binding(dinp, N * C, 'dinp'),
      bias: null,
      flags: accumulate ? ACCUMULATE : 0,
    });
  }

  /** dW += doutᵀ·inp and dbias += Σ_n dout, split over N when OC×C alone has too few tiles. */
  backwardWeight({ dweight, dbias, dout, inp, N, C, OC, splitK }: MatmulBackwardWeightArgs): BoundKernel {
    const label = 'MatmulKernels.backwardWeight';
    const binding = this.binder(label);
    const a = binding(dout, N * OC, 'dout');
    const b = binding(inp, N * C, 'inp');
    const target = binding(dweight, OC * C, 'dweight');
    const biasTarget = dbias ? binding(dbias, OC, 'dbias') : null;
    const plan = planSplitK(this.tiles, this.limits, OC, C, N, splitK);
    if (plan.splits === 1) {
      const flags = ACCUMULATE | (dbias ? REDUCE_BIAS : 0);
      return this.bindProduct(label, 'backwardWeight', C, OC, {
        dims: [OC, C, N],
        a,
        b,
        out: target,
        bias: biasTarget,
        flags,
      });
    }
    // Partial results [splits][OC·C] and [splits][OC] in the shared scratch, overwritten by the
    // split kernel, then summed into dW and dbias.
    const weightBytes = plan.splits * OC * C * 4;
    const align = this.limits.minStorageBufferOffsetAlignment;
    const biasOffset = Math.ceil(weightBytes / align) * align;
    const lease = this.scratch.acquire(biasOffset + (dbias ? plan.splits * OC * 4 : 0));
    const partials = { buffer: lease.buffer, size: weightBytes };
    const biasPartials = { buffer: lease.buffer, offset: biasOffset, size: plan.splits * OC * 4 };
    const kernels = [
      this.bindProduct(`${label}.split`, 'backwardWeight', C, OC, {
        dims: [OC, C, N],
        a,
        b,
        out: partials,
        bias: biasTarget ? biasPartials : null,
        flags: dbias ? REDUCE_BIAS : 0,
        split: { count: plan.splits, kPerSplit: plan.kPerSplit, outStride: OC * C, biasStride: OC },
      }),
      this.bindReduce(`${label}.reduceWeight`, partials, target, OC * C, plan.splits),
    ];
    if (biasTarget) kernels.push(this.bindReduce(`${label}.reduceBias`, biasPartials, biasTarget, OC, plan.splits));
    const bound = sequence(label, kernels);
    return {
      label,
      dispatch: bound.dispatch,
      destroy() {
        bound.destroy();
        lease.release();
      },
    };
  }

  /**
   * The same pipelines, planning grids as if the device allowed only `limit` workgroups per
   * dimension: tests exercise the folded grids without dispatching 65536 workgroups. Shares
   * this family's buffers, so destroy only the original.
   */
  withGridLimit(limit: number): MatmulKernels {
    const limits = planningLimits(this.limits, limit);
    const { device, tiles, pipelines, reducePipeline, noBias, scratch } = this;
    return new MatmulKernels(device, limits, tiles, pipelines, reducePipeline, noBias, scratch);
  }

  /** Frees the family's buffers (placeholder bias, scratch): its bound kernels stop working. */
  destroy(): void {
    this.noBias.destroy();
    this.scratch.destroy();
  }

  /** Checks and narrows a tensor view, naming it `label.name` in errors. */
  private binder(label: string) {
    return (view: TensorView, floats: number, name: string) =>
      tensorBinding(this.limits, view, floats, `${label}.${name}`);
  }

  private bindProduct(
    label: string,
    product: Product,
    C: number,
    OC: number,
    job: {
      dims: [number, number, number];
      a: TensorView;
      b: TensorView;
      out: TensorView;
      bias: TensorView | null;
      flags: number;
      split?: { count: number; kPerSplit: number; outStride: number; biasStride: number };
    },
  ): BoundKernel {
    const [M, N, K] = job.dims;
    // Every stored row length is C or OC: vec4 access needs both to be multiples of 4.
    const access: Access = C % 4 === 0 && OC % 4 === 0 ? 'vec4' : 'scalar';
    const split = job.split ?? { count: 1, kPerSplit: K, outStride: 0, biasStride: 0 };
    const colTiles = ceilDiv(N, this.tiles.tileN);
    const grid = planGrid(this.limits, ceilDiv(M, this.tiles.tileM), colTiles * split.count);
    const words = [M, N, K, colTiles, split.kPerSplit, split.outStride, split.biasStride, job.flags];
    const bias = job.bias ?? { buffer: this.noBias };
    const tensors = [job.a, job.b, job.out, bias];
    return bindKernel(this.device, label, this.pipelines[`${product}.${access}`], tensors, words, grid);
  }

  private bindReduce(label: string, partials: TensorView, target: TensorView, len: number, splits: number) {
    // One invocation per value; the reduce kernel reads its 2D grid as x + y·width.
    const grid = foldCount(ceilDiv(len, REDUCE_WORKGROUP), this.limits.maxComputeWorkgroupsPerDimension);
    return bindKernel(this.device, label, this.reducePipeline, [partials, target], [len, splits], grid);
  }
}
