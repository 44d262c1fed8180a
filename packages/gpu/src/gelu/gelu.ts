/** GPU GELU, tanh approximation (see gelu.wgsl): forward out = gelu(inp); backward dinp += gelu′(inp)·dout. */
import type { BoundKernel, TensorView } from '../kernel.ts';
import { createComputePipeline } from '../shader.ts';
import { bindElementwise } from '../vector/launch.ts';
import source from './gelu.wgsl?raw';

// Binding numbers in gelu.wgsl.
const INP = 0;
const OUT = 1;
const DOUT = 2;
const DINP = 3;
const PARAMS = 4;

export interface GeluKernelOptions {
  /** Invocations per workgroup, one element each (≤ 256 for SwiftShader). */
  workgroupSize?: number;
}

export class GeluKernels {
  private constructor(
    private readonly device: GPUDevice,
    private readonly forwardPipeline: GPUComputePipeline,
    private readonly backwardPipeline: GPUComputePipeline,
    readonly workgroupSize: number,
  ) {}

  static async create(device: GPUDevice, options: GeluKernelOptions = {}): Promise<GeluKernels> {
    const workgroupSize = options.workgroupSize ?? Math.min(256, device.limits.maxComputeInvocationsPerWorkgroup);
    const constants = { WORKGROUP_SIZE: workgroupSize };
    const [forward, backward] = await Promise.all([
      createComputePipeline(device, 'GeluKernels.forward', source, constants, 'forward'),
      createComputePipeline(device, 'GeluKernels.backward', source, constants, 'backward'),
    ]);
    return new GeluKernels(device, forward, backward, workgroupSize);
  }

  /** out[n] = gelu(inp[n]). */
  forward(out: TensorView, inp: TensorView, n: number): BoundKernel {
    const tensors = [
      [INP, inp, 'inp'],
      [OUT, out, 'out'],
    ] as const;
    return bindElementwise(
      this.device,
      'GeluKernels.forward',
      this.forwardPipeline,
      tensors,
      PARAMS,
      n,
      this.workgroupSize,
    );
  }

  /** dinp[n] += gelu′(inp[n])·dout[n]. */
  backward(dinp: TensorView, inp: TensorView, dout: TensorView, n: number): BoundKernel {
    const tensors = [
      [INP, inp, 'inp'],
      [DOUT, dout, 'dout'],
      [DINP, dinp, 'dinp'],
    ] as const;
    return bindElementwise(
      this.device,
      'GeluKernels.backward',
      this.backwardPipeline,
      tensors,
      PARAMS,
      n,
      this.workgroupSize,
    );
  }
}
