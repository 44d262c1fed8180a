/**
 * GPU residual connection (see residual.wgsl): forward out = a + b; backward da += dout,
 * db += dout; accumulate dst += src for any gradient that fans in.
 */
import type { BoundKernel, TensorView } from '../kernel.ts';
import { createComputePipeline } from '../shader.ts';
import { bindSparse, emptyKernel, requireElements, requireShape, workgroupGrid } from '../vector/launch.ts';
import source from './residual.wgsl?raw';

// Binding numbers in residual.wgsl.
const OUT = 0;
const X = 1;
const Y = 2;
const PARAMS = 3;

export interface ResidualKernelOptions {
  /** Invocations per workgroup, one element each (≤ 256 for SwiftShader). */
  workgroupSize?: number;
}

export class ResidualKernels {
  private constructor(
    private readonly device: GPUDevice,
    private readonly forwardPipeline: GPUComputePipeline,
    private readonly backwardPipeline: GPUComputePipeline,
    private readonly accumulatePipeline: GPUComputePipeline,
    readonly workgroupSize: number,
  ) {}

  static async create(device: GPUDevice, options: ResidualKernelOptions = {}): Promise<ResidualKernels> {
    const workgroupSize = options.workgroupSize ?? Math.min(256, device.limits.maxComputeInvocationsPerWorkgroup);
    const constants = { WORKGROUP_SIZE: workgroupSize };
    const [forward, backward, accumulate] = await Promise.all(
      (['forward', 'backward', 'accumulate'] as const).map((entry) =>
        createComputePipeline(device, `ResidualKernels.${entry}`, source, constants, entry),
      ),
    );
    return new ResidualKernels(
      device,
      forward as GPUComputePipeline,
      backward as GPUComputePipeline,
      accumulate as GPUComputePipeline,
      workgroupSize,
    );
  }

  /** out[n] = a[n] + b[n]. */
  forward(out: TensorView, a: TensorView, b: TensorView, n: number): BoundKernel {
    const label = 'ResidualKernels.forward';
    if (!this.check(label, n, { out, a, b })) return emptyKernel(label);
    const tensors = [[OUT, out] as const, [X, a] as const, [Y, b] as const];
    return bindSparse(this.device, label, this.forwardPipeline, tensors, [PARAMS, [n]], this.grid(n));
  }

  /** dst[n] += src[n]. */
  accumulate(dst: TensorView, src: TensorView, n: number): BoundKernel {
    const label = 'ResidualKernels.accumulate';
    if (!this.check(label, n, { dst, src })) return emptyKernel(label);
    const tensors = [[OUT, dst] as const, [X, src] as const];
    return bindSparse(this.device, label, this.accumulatePipeline, tensors, [PARAMS, [n]], this.grid(n));
  }

  /** da[n] += dout[n], db[n] += dout[n] (one pass over dout; da and db must not overlap). */
  backward(da: TensorView, db: TensorView, dout: TensorView, n: number): BoundKernel {
    const label = 'ResidualKernels.backward';
    if (!this.check(label, n, { da, db, dout })) return emptyKernel(label);
    const tensors = [[OUT, da] as const, [X, dout] as const, [Y, db] as const];
    return bindSparse(this.device, label, this.backwardPipeline, tensors, [PARAMS, [n]], this.grid(n));
  }

  /** False when there is nothing to do; throws on a bad size or a view too small. */
  private check(label: string, n: number, views: Record<string, TensorView>): boolean {
    requireShape(label, { n });
    for (const [name, view] of Object.entries(views)) requireElements(label, name, view, n);
    return n > 0;
  }

  private grid(n: number) {
    return workgroupGrid(this.device, Math.ceil(n / this.workgroupSize));
  }
}
