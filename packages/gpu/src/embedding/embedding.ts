/**
 * GPU input embedding, llm.c's encoder (see embedding.wgsl). forward is one dispatch; backward is
 * three: a one-workgroup stable sort of the positions by token into buckets (scratch buffers the
 * binding owns), then dwte from the buckets and dwpe, both in a fixed order (deterministic).
 */
import { createEmptyStorageBuffer } from '../buffers.ts';
import {
  type BoundKernel,
  bindSparse,
  ceilDiv,
  emptyKernel,
  sequence,
  type TensorView,
  workgroupGrid,
} from '../kernel.ts';
import { createComputePipeline } from '../shader.ts';
import { requireElements, requireShape } from '../vector/launch.ts';
import source from './embedding.wgsl?raw';

// Binding numbers in embedding.wgsl.
const TOKENS = 0;
const WTE = 1;
const WPE = 2;
const OUT = 3;
const DOUT = 4;
const DWTE = 5;
const DWPE = 6;
const CURSORS = 7;
const BUCKETS = 8;
const PARAMS = 9;

const ENTRY_POINTS = ['forward', 'bucketTokens', 'backwardTokens', 'backwardPositions'] as const;
type EntryPoint = (typeof ENTRY_POINTS)[number];

export interface EmbeddingKernelOptions {
  /** Invocations per workgroup: a power of two ≤ 256 (SwiftShader's limit). */
  workgroupSize?: number;
}

export class EmbeddingKernels {
  private constructor(
    private readonly device: GPUDevice,
    private readonly pipelines: Record<EntryPoint, GPUComputePipeline>,
    readonly workgroupSize: number,
  ) {}

  static async create(device: GPUDevice, options: EmbeddingKernelOptions = {}): Promise<EmbeddingKernels> {
    const workgroupSize = options.workgroupSize ?? Math.min(256, device.limits.maxComputeInvocationsPerWorkgroup);
    if (
      !Number.isInteger(Math.log2(workgroupSize)) ||
      workgroupSize > device.limits.maxComputeInvocationsPerWorkgroup
    ) {
      throw new RangeError(
        `EmbeddingKernels: workgroup size ${workgroupSize} must be a power of two within the device limit`,
      );
    }
    const constants = { WORKGROUP_SIZE: workgroupSize };
    const compiled = await Promise.all(
      ENTRY_POINTS.map((entry) => createComputePipeline(device, `EmbeddingKernels.${entry}`, source, constants, entry)),
    );
    const pipelines = Object.fromEntries(ENTRY_POINTS.map((entry, i) => [entry, compiled[i]]));
    return new EmbeddingKernels(device, pipelines as Record<EntryPoint, GPUComputePipeline>, workgroupSize);
  }

  /** out[B,T,C] = wte[tokens[b,t], :] + wpe[t, :]; tokens is int32 [B·T]. */
  forward(out: TensorView, tokens: TensorView, wte: TensorView, wpe: TensorView, B: number, T: number, C: number) {
    const label = 'EmbeddingKernels.forward';
    requireShape(label, { B, T, C });
    const size = B * T * C;
    if (size === 0) return emptyKernel(label);
    requireElements(label, 'out', out, size);
    requireElements(label, 'tokens', tokens, B * T);
    requireElements(label, 'wpe', wpe, T * C);
    requireElements(label, 'wte', wte, C); // V·C, but V is not known here
    const tensors = [
      [TOKENS, tokens],
      [WTE, wte],
      [WPE, wpe],
      [OUT, out],
    ] as const;
    const grid = workgroupGrid(this.device, ceilDiv(size, this.workgroupSize));
    return bindSparse(this.device, label, this.pipelines.forward, tensors, [PARAMS, [B, T, C, 0]], grid);
  }

  /** dwte[V,C] += Σ dout over each token's positions; dwpe[T,C] += Σ_b dout[b,t,:]. */
  backward(
    dwte: TensorView,
    dwpe: TensorView,
    dout: TensorView,
    tokens: TensorView,
    B: number,
    T: number,
    C: number,
    V: number,
  ): BoundKernel {
    const label = 'EmbeddingKernels.backward';
    requireShape(label, { B, T, C, V });
    const positions = B * T;
    if (positions * C === 0) return emptyKernel(label);
    if (V < 1) throw new RangeError(`${label}: V = 0 with ${positions} tokens`);
    requireElements(label, 'dwte', dwte, V * C);
    requireElements(label, 'dwpe', dwpe, T * C);
    requireElements(label, 'dout', dout, positions * C);
    requireElements(label, 'tokens', tokens, positions);
    const cursors = createEmptyStorageBuffer(this.device, 'EmbeddingKernels.cursors', V * 4); // V u32
    const buckets = createEmptyStorageBuffer(this.device, 'EmbeddingKernels.buckets', (V + 1 + positions) * 4); // V+1+P u32
    const words = [B, T, C, V];
    const kernels = [
      bindSparse(
        this.device,
        `${label}.bucketTokens`,
        this.pipelines.bucketTokens,
        [
          [TOKENS, tokens],
          [CURSORS, { buffer: cursors }],
          [BUCKETS, { buffer: buckets }],
        ],
        [PARAMS, words],
        [1],
      ),
      bindSparse(
        this.device,
        `${label}.tokens`,
        this.pipelines.backwardTokens,
        [
          [DOUT, dout],
          [DWTE, dwte],
          [BUCKETS, { buffer: buckets }],
        ],
        [PARAMS, words],
        workgroupGrid(this.device, ceilDiv(V * C, this.workgroupSize)),
      ),
      bindSparse(
        this.device,
        `${label}.positions`,
        this.pipelines.backwardPositions,
        [
          [DOUT, dout],
          [DWPE, dwpe],
        ],
        [PARAMS, words],
        workgroupGrid(this.device, ceilDiv(T * C, this.workgroupSize)),
      ),
    ];
    const steps = sequence(label, kernels);
    return {
      label,
      dispatch: (pass) => steps.dispatch(pass),
      destroy() {
        steps.destroy();
        cursors.destroy();
        buckets.destroy();
      },
    };
  }
}
