/**
 * GPU residual connection (see residual.wgsl): forward out = a + b; backward da += dout,
 * db += dout; accumulate dst += src for any gradient that fans in.
 */
import type { BoundKernel, TensorView } from '../kernel.ts';
import { createComputePipeline } from '../shader.ts';
import { bindElementwise } from '../vector/launch.ts';
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
    const tensors = [
      [OUT, out, 'out'],
      [X, a, 'a'],
      [Y, b, 'b'],
    ] as const;
    return bindElementwise(
      this.device,
      'ResidualKernels.forward',
      this.forwardPipeline,
      tensors,
      PARAMS,
      n,
      this.workgroupSize,
    );
  }

  /** dst[n] += src[n]. */
  accumulate(dst: TensorView, src: TensorView, n: number): BoundKernel {
    const tensors = [
      [OUT, dst, 'dst'],
      [X, src, 'src'],
    ] as const;
    return bindElementwise(
      this.device,
      'ResidualKernels.accumulate',
      this.accumulatePipeline,
      tensors,
      PARAMS,
      n,
      this.workgroupSize,
    );
  }

  /** da[n] += dout[n], db[n] += dout[n] (one pass over dout; da and db must not overlap). */
  backward(da: TensorView, db: TensorView, dout: TensorView, n: number): BoundKernel {
    const tensors = [
      [OUT, da, 'da'],
      [X, dout, 'dout'],
      [Y, db, 'db'],
    ] as const;
    return bindElementwise(
      this.device,
      'ResidualKernels.backward',
      this.backwardPipeline,
      tensors,
      PARAMS,
      n,
      this.workgroupSize,
    );
  }
}
