/**
 * GPU vector ops on flat f32 ranges for DiLoCo (see vector.wgsl). Each method binds one op to
 * concrete views and a length; scalars (α, s, the fill value) are baked into the binding's
 * uniform, so bind again to change them.
 */
import { f32Bits } from '../buffers.ts';
import type { BoundKernel, TensorView } from '../kernel.ts';
import { createComputePipeline } from '../shader.ts';
import { bindElementwise } from './launch.ts';
import source from './vector.wgsl?raw';

const OPS = ['difference', 'lerp', 'copy', 'scale', 'fill'] as const;
type Op = (typeof OPS)[number];

// Binding numbers in vector.wgsl.
const DST = 0;
const SRC = 1;
const SRC2 = 2;
const PARAMS = 3;

export interface VectorKernelOptions {
  /** Invocations per workgroup, one element each (≤ 256 for SwiftShader). */
  workgroupSize?: number;
}

export class VectorKernels {
  private constructor(
    private readonly device: GPUDevice,
    private readonly pipelines: Record<Op, GPUComputePipeline>,
    readonly workgroupSize: number,
  ) {}

  static async create(device: GPUDevice, options: VectorKernelOptions = {}): Promise<VectorKernels> {
    const workgroupSize = options.workgroupSize ?? Math.min(256, device.limits.maxComputeInvocationsPerWorkgroup);
    const compiled = await Promise.all(
      OPS.map((op) =>
        createComputePipeline(device, `VectorKernels.${op}`, source, { WORKGROUP_SIZE: workgroupSize }, op),
      ),
    );
    const pipelines = Object.fromEntries(OPS.map((op, i) => [op, compiled[i]])) as Record<Op, GPUComputePipeline>;
    return new VectorKernels(device, pipelines, workgroupSize);
  }

  /** out = a − b over n floats. */
  difference(out: TensorView, a: TensorView, b: TensorView, n: number): BoundKernel {
    return this.bind('difference', n, 0, [
      [DST, out, 'out'],
      [SRC, a, 'a'],
      [SRC2, b, 'b'],
    ]);
  }

  /** a = α·a + (1 − α)·b over n floats, in place. */
  lerp(a: TensorView, b: TensorView, alpha: number, n: number): BoundKernel {
    return this.bind('lerp', n, alpha, [
      [DST, a, 'a'],
      [SRC, b, 'b'],
    ]);
  }

  /** dst = src over n floats (views must not overlap). */
  copy(dst: TensorView, src: TensorView, n: number): BoundKernel {
    return this.bind('copy', n, 0, [
      [DST, dst, 'dst'],
      [SRC, src, 'src'],
    ]);
  }

  /** x = s·x over n floats, in place. */
  scale(x: TensorView, s: number, n: number): BoundKernel {
    return this.bind('scale', n, s, [[DST, x, 'x']]);
  }

  /** x = value over n floats. */
  fill(x: TensorView, value: number, n: number): BoundKernel {
    return this.bind('fill', n, value, [[DST, x, 'x']]);
  }

  private bind(op: Op, n: number, scalar: number, tensors: [number, TensorView, string][]): BoundKernel {
    return bindElementwise(
      this.device,
      `VectorKernels.${op}`,
      this.pipelines[op],
      tensors,
      PARAMS,
      n,
      this.workgroupSize,
      [f32Bits(scalar)],
    );
  }
}
