/**
 * Causal multi-head self-attention on the GPU, flash-attention style (see attention.common.wgsl):
 * forward writes out [B, T, C] and the per-row logsumexp lse [B, NH, T] instead of att
 * [B, NH, T, T]; backward recomputes the probabilities from lse and accumulates into dqkv in two
 * kernels (dQ, then dK/dV), each writing only its own rows: deterministic, with no atomics.
 * The pipelines are compiled for one head size (hs = C / NH), as workgroup arrays are sized by it.
 */
import { createEmptyStorageBuffer, f32Bits } from '../buffers.ts';
import { type BoundKernel, bindKernel, ceilDiv, sequence, type TensorView } from '../kernel.ts';
import { createComputePipeline } from '../shader.ts';
import { isSoftwareDevice } from '../vector/launch.ts';
import backwardKeySource from './attention.backward-key.wgsl?raw';
import backwardQuerySource from './attention.backward-query.wgsl?raw';
import common from './attention.common.wgsl?raw';
import forwardSource from './attention.forward.wgsl?raw';
import rowsBackwardKeySource from './attention.rows.backward-key.wgsl?raw';
import rowsBackwardQuerySource from './attention.rows.backward-query.wgsl?raw';
import rowsCommon from './attention.rows.common.wgsl?raw';
import rowsForwardSource from './attention.rows.forward.wgsl?raw';
import {
  type AttentionTiling,
  BACKWARD_KEY_ARRAYS,
  BACKWARD_QUERY_ARRAYS,
  chooseTiling,
  FORWARD_ARRAYS,
  tilingConstants,
} from './attention.tiling.ts';

export interface AttentionShape {
  B: number;
  T: number;
  C: number;
  NH: number;
}

export interface AttentionForwardViews {
  qkv: TensorView; // [B, T, 3C]
  out: TensorView; // [B, T, C], written
  lse: TensorView; // [B, NH, T], written; kept for backward
}

export interface AttentionBackwardViews {
  qkv: TensorView; // [B, T, 3C]
  out: TensorView; // [B, T, C] from forward
  lse: TensorView; // [B, NH, T] from forward
  dout: TensorView; // [B, T, C]
  dqkv: TensorView; // [B, T, 3C], accumulated into
}

export interface AttentionTilings {
  forward: AttentionTiling;
  backwardQuery: AttentionTiling;
  backwardKey: AttentionTiling;
}

/**
 * `tiled`: flash-style workgroups sharing rows through workgroup memory (GPUs). `rows`: one row
 * per invocation straight from storage, for head sizes up to 32 on CPU implementations of
 * WebGPU, where barriers and workgroup memory cost more than they save (nano, hs 16, B 16,
 * T 64 on lavapipe: backward 200 → 43 ms).
 */
export type AttentionStrategy = 'tiled' | 'rows';

/** Rows per workgroup of the `rows` kernels. */
const ROWS_WORKGROUP = 64;
/** The `rows` kernels keep whole head rows in private arrays (attention.rows.common.wgsl). */
const ROWS_MAX_HEAD_SIZE = 32;

function defaultStrategy(device: GPUDevice, headSize: number): AttentionStrategy {
  return isSoftwareDevice(device) && headSize <= ROWS_MAX_HEAD_SIZE ? 'rows' : 'tiled';
}

/** Portable bounds: SwiftShader's, which are also WebGPU's default limits. */
const MAX_WORKGROUP_BYTES = 16_384;
const MAX_INVOCATIONS = 256;

export class AttentionKernels {
  private constructor(
    private readonly device: GPUDevice,
    readonly headSize: number,
    readonly strategy: AttentionStrategy,
    readonly tilings: AttentionTilings,
    private readonly pipelines: {
      forward: GPUComputePipeline;
      backwardQuery: GPUComputePipeline;
      backwardKey: GPUComputePipeline;
    },
  ) {}

  /** Compiles the three kernels for one head size; the strategy defaults by adapter and head size. */
  static async create(
    device: GPUDevice,
    headSize: number,
    strategy: AttentionStrategy = defaultStrategy(device, headSize),
  ): Promise<AttentionKernels> {
    const budgetFloats = Math.min(MAX_WORKGROUP_BYTES, device.limits.maxComputeWorkgroupStorageSize) / 4;
    const invocations = Math.min(MAX_INVOCATIONS, device.limits.maxComputeInvocationsPerWorkgroup);
    const tilings: AttentionTilings = {
      forward: chooseTiling(headSize, FORWARD_ARRAYS, budgetFloats, invocations),
      backwardQuery: chooseTiling(headSize, BACKWARD_QUERY_ARRAYS, budgetFloats, invocations),
      backwardKey: chooseTiling(headSize, BACKWARD_KEY_ARRAYS, budgetFloats, invocations),
    };
    if (strategy === 'rows') {
      if (!Number.isInteger(headSize) || headSize < 1 || headSize > ROWS_MAX_HEAD_SIZE) {
        throw new RangeError(`Attention: the rows strategy takes head sizes 1…${ROWS_MAX_HEAD_SIZE}, got ${headSize}`);
      }
      const constants = { HEAD_SIZE: headSize, HEAD_VECS: Math.ceil(headSize / 4), WORKGROUP_SIZE: ROWS_WORKGROUP };
      const compile = (label: string, source: string) =>
        createComputePipeline(device, `Attention.rows.${label}`, `${rowsCommon}\n${source}`, constants);
      const [forward, backwardQuery, backwardKey] = await Promise.all([
        compile('forward', rowsForwardSource),
        compile('backwardQuery', rowsBackwardQuerySource),
        compile('backwardKey', rowsBackwardKeySource),
      ]);
      return new AttentionKernels(device, headSize, strategy, tilings, { forward, backwardQuery, backwardKey });
    }
    const [forward, backwardQuery, backwardKey] = await Promise.all([
      createComputePipeline(
        device,
        'Attention.forward',
        `${common}\n${forwardSource}`,
        tilingConstants(tilings.forward),
      ),
      createComputePipeline(
        device,
        'Attention.backwardQuery',
        `${common}\n${backwardQuerySource}`,
        tilingConstants(tilings.backwardQuery),
      ),
      createComputePipeline(
        device,
        'Attention.backwardKey',
        `${common}\n${backwardKeySource}`,
        tilingConstants(tilings.backwardKey),
      ),
    ]);
    return new AttentionKernels(device, headSize, strategy, tilings, { forward, backwardQuery, backwardKey });
  }

  forward(views: AttentionForwardViews, shape: AttentionShape): BoundKernel {
    const uniform = this.uniform(shape);
    return bindKernel(
      this.device,
      'Attention.forward',
      this.pipelines.forward,
      [views.qkv, views.out, views.lse],
      uniform,
      this.grid(shape, this.tilings.forward),
    );
  }

  /** Accumulates into dqkv. Owns a delta scratch buffer [B, NH, T], freed by destroy(). */
  backward(views: AttentionBackwardViews, shape: AttentionShape): BoundKernel {
    const uniform = this.uniform(shape);
    const { B, T, NH } = shape;
    const delta = createEmptyStorageBuffer(this.device, 'Attention.delta', B * NH * T * 4); // B·NH·T floats
    const all = sequence('Attention.backward', [
      bindKernel(
        this.device,
        'Attention.backwardQuery',
        this.pipelines.backwardQuery,
        [views.qkv, views.out, views.dout, views.lse, { buffer: delta }, views.dqkv],
        uniform,
        this.grid(shape, this.tilings.backwardQuery),
      ),
      bindKernel(
        this.device,
        'Attention.backwardKey',
        this.pipelines.backwardKey,
        [views.qkv, views.dout, views.lse, { buffer: delta }, views.dqkv],
        uniform,
        this.grid(shape, this.tilings.backwardKey),
      ),
    ]);
    return {
      label: all.label,
      dispatch: (pass) => all.dispatch(pass),
      destroy() {
        all.destroy();
        delta.destroy();
      },
    };
  }

  private uniform(shape: AttentionShape): number[] {
    const { B, T, C, NH } = shape;
    if (![B, T, C, NH].every((n) => Number.isInteger(n) && n >= 1) || C !== NH * this.headSize) {
      throw new RangeError(
        `Attention: shape B=${B} T=${T} C=${C} NH=${NH} does not have head size ${this.headSize} (C = NH·hs)`,
      );
    }
    return [T, C, NH, f32Bits(1 / Math.sqrt(this.headSize))];
  }

  /** One workgroup per (row block, head, batch). */
  private grid(shape: AttentionShape, tiling: AttentionTiling): [number, number, number] {
    const rows = this.strategy === 'rows' ? ROWS_WORKGROUP : tiling.rows;
    return [ceilDiv(shape.T, rows), shape.NH, shape.B];
  }
}
