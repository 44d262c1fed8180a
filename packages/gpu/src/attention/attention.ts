/**
 * Causal multi-head self-attention on the GPU, flash-attention style (see attention.common.wgsl):
 * forward writes out [B, T, C] and the per-row logsumexp lse [B, NH, T] instead of att
 * [B, NH, T, T]; backward recomputes the probabilities from lse and accumulates into dqkv in two
 * kernels (dQ, then dK/dV), each writing only its own rows: deterministic, with no atomics.
 * The pipelines are compiled for one head size (hs = C / NH), as workgroup arrays are sized by it.
 */
import { createEmptyStorageBuffer, f32Bits } from '../buffers.ts';
import { choiceFromEnvironment } from '../environment.ts';
import { type BoundKernel, bindKernel, ceilDiv, sequence, type TensorView } from '../kernel.ts';
import { createComputePipeline } from '../shader.ts';
import { isSoftwareDevice } from '../vector/launch.ts';
import backwardKeySource from './attention.backward-key.wgsl?raw';
import backwardQuerySource from './attention.backward-query.wgsl?raw';
import common from './attention.common.wgsl?raw';
import forwardSource from './attention.forward.wgsl?raw';
import registerBackwardKeySource from './attention.register.backward-key.wgsl?raw';
import registerBackwardQuerySource from './attention.register.backward-query.wgsl?raw';
import registerCommon from './attention.register.common.wgsl?raw';
import registerForwardSource from './attention.register.forward.wgsl?raw';
import reduceSubgroup from './attention.register.reduce-subgroup.wgsl?raw';
import reduceWorkgroup from './attention.register.reduce-workgroup.wgsl?raw';
import rowsBackwardKeySource from './attention.rows.backward-key.wgsl?raw';
import rowsBackwardQuerySource from './attention.rows.backward-query.wgsl?raw';
import rowsCommon from './attention.rows.common.wgsl?raw';
import rowsForwardSource from './attention.rows.forward.wgsl?raw';
import {
  type AttentionTiling,
  BACKWARD_KEY_ARRAYS,
  BACKWARD_QUERY_ARRAYS,
  chooseRegisterTiling,
  chooseTiling,
  FORWARD_ARRAYS,
  REGISTER_MAX_HEAD_SIZE,
  REGISTER_OWNED,
  type RegisterKernel,
  type RegisterTiling,
  registerConstants,
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
 * `register`: FlashAttention-2's loop with register tiles (attention.register.common.wgsl):
 * each invocation computes 4 owned rows × several streamed rows of scores and 4 rows × 8
 * channels of the accumulators, so a workgroup load feeds 8–16 FMAs; head sizes up to 92 where
 * the device offers 32 KiB of workgroup memory (about 30 KiB at hs 64). The default wherever it
 * fits, except head sizes up to 32 on software adapters.
 * `tiled`: the first flash-style kernels, one lane per (row, streamed row) and a workgroup load
 * per 4 FMAs; any head size within 16 KiB; the default where `register` does not fit.
 * `rows`: one row per invocation straight from storage, for head sizes up to 32 on CPU
 * implementations of WebGPU, where barriers and workgroup memory cost more than they save
 * (nano, hs 16, B 16, T 64 on lavapipe: backward 200 → 43 ms).
 */
export type AttentionStrategy = 'register' | 'tiled' | 'rows';

/** Rows per workgroup of the `rows` kernels. */
const ROWS_WORKGROUP = 64;
/** The `rows` kernels keep whole head rows in private arrays (attention.rows.common.wgsl). */
const ROWS_MAX_HEAD_SIZE = 32;

/**
 * The register kernels' workgroup-memory ceiling: 32 KiB, which most GPUs offer, keeps 7 or more
 * 64-invocation workgroups on an SM with 228 KiB (docs/attention.md); more would widen the
 * backward's steps at the cost of occupancy, a trade not measured yet.
 */
const REGISTER_MAX_WORKGROUP_BYTES = 32_768;

/** The register tilings of the three kernels within the device's workgroup memory, or null. */
function registerTilings(device: GPUDevice, headSize: number): Record<RegisterKernel, RegisterTiling> | null {
  const budgetFloats = Math.min(REGISTER_MAX_WORKGROUP_BYTES, device.limits.maxComputeWorkgroupStorageSize) / 4;
  const forward = chooseRegisterTiling(headSize, 'forward', budgetFloats);
  const backwardQuery = chooseRegisterTiling(headSize, 'backwardQuery', budgetFloats);
  const backwardKey = chooseRegisterTiling(headSize, 'backwardKey', budgetFloats);
  return forward && backwardQuery && backwardKey ? { forward, backwardQuery, backwardKey } : null;
}

/**
 * Whether the register forward may reduce across a row group (8 consecutive invocations) with
 * subgroup shuffles: the device has `subgroups` and says its subgroups hold at least 8.
 */
export function subgroupsOfEight(device: GPUDevice): boolean {
  const info = (device as GPUDevice & { adapterInfo?: GPUAdapterInfo & { subgroupMinSize?: number } }).adapterInfo;
  return device.features.has('subgroups') && (info?.subgroupMinSize ?? 0) >= 8;
}

export interface AttentionOptions {
  /** Register forward only: reduce with subgroup shuffles (default: where subgroupsOfEight). */
  subgroups?: boolean;
}

/** SHOAL_ATTENTION in Node (register, tiled or rows) overrides the default, e.g. to run a model test on another strategy. */
function strategyFromEnvironment(): AttentionStrategy | undefined {
  return choiceFromEnvironment<AttentionStrategy>('SHOAL_ATTENTION', ['register', 'tiled', 'rows']);
}

/** From this sequence length on, a hardware adapter takes tiled attention (see attentionStrategyFor). */
export const TILED_FROM_SEQUENCE = 1024;

/**
 * The strategy for `headSize` on `device`, at sequence length `sequence` where known: SHOAL_ATTENTION
 * first. Software adapters: rows up to hs 32 (cheapest to compile; as fast or faster at hs 16),
 * then register, 2.6–4.8× faster than tiled at hs 64 on lavapipe and SwiftShader. Hardware
 * adapters: register, but tiled from TILED_FROM_SEQUENCE on. On an H200 at hs 64 (docs/attention.md)
 * register made steps 10% faster at T 256 and 18% at T 512, tiled 21% faster at T 1024
 * (forward 2.1 vs 2.6 ms, backward 6.0 vs 10.6 ms at B8 NH12).
 */
export function attentionStrategyFor(device: GPUDevice, headSize: number, sequence?: number): AttentionStrategy {
  const chosen = strategyFromEnvironment();
  if (chosen) return chosen;
  const software = isSoftwareDevice(device);
  if (software && headSize <= ROWS_MAX_HEAD_SIZE) return 'rows';
  if (!software && sequence !== undefined && sequence >= TILED_FROM_SEQUENCE) return 'tiled';
  return registerTilings(device, headSize) ? 'register' : 'tiled';
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
    /** The register kernels' tilings, when the strategy is `register`. */
    readonly registerTilings: Record<RegisterKernel, RegisterTiling> | null,
    /** Whether the register forward reduces with subgroup shuffles. */
    readonly subgroups: boolean,
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
    strategy: AttentionStrategy = attentionStrategyFor(device, headSize),
    options: AttentionOptions = {},
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
      return new AttentionKernels(device, headSize, strategy, tilings, null, false, {
        forward,
        backwardQuery,
        backwardKey,
      });
    }
    if (strategy === 'register') {
      const register = registerTilings(device, headSize);
      if (!register) {
        throw new RangeError(
          `Attention: the register strategy takes head sizes 1…${REGISTER_MAX_HEAD_SIZE} within ` +
            `${device.limits.maxComputeWorkgroupStorageSize} bytes of workgroup memory, got ${headSize}`,
        );
      }
      const subgroups = options.subgroups ?? subgroupsOfEight(device);
      if (subgroups && !device.features.has('subgroups')) {
        throw new RangeError('Attention: subgroups asked for, but the device has no `subgroups` feature');
      }
      const compile = (label: RegisterKernel, source: string) =>
        createComputePipeline(device, `Attention.register.${label}`, source, registerConstants(register[label]));
      // `enable subgroups;` must open the module, so the reductions go first.
      const reduce = subgroups ? reduceSubgroup : reduceWorkgroup;
      const [forward, backwardQuery, backwardKey] = await Promise.all([
        compile('forward', `${reduce}\n${registerCommon}\n${registerForwardSource}`),
        compile('backwardQuery', `${registerCommon}\n${registerBackwardQuerySource}`),
        compile('backwardKey', `${registerCommon}\n${registerBackwardKeySource}`),
      ]);
      return new AttentionKernels(device, headSize, strategy, tilings, register, subgroups, {
        forward,
        backwardQuery,
        backwardKey,
      });
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
    return new AttentionKernels(device, headSize, strategy, tilings, null, false, {
      forward,
      backwardQuery,
      backwardKey,
    });
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
    const rows = { rows: ROWS_WORKGROUP, register: REGISTER_OWNED, tiled: tiling.rows }[this.strategy];
    return [ceilDiv(shape.T, rows), shape.NH, shape.B];
  }
}
