/** GPU GELU, tanh approximation (see gelu.wgsl): forward out = gelu(inp); backward dinp += gelu′(inp)·dout. */
import type { BoundKernel, TensorView } from '../kernel.ts';
import { createComputePipeline } from '../shader.ts';
import { bindSparse, emptyKernel, requireElements, requireShape, workgroupGrid } from '../vector/launch.ts';
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
    const label = 'GeluKernels.forward';
    if (!this.check(label, n, { out, inp })) return emptyKernel(label);
    const tensors = [[INP, inp] as const, [OUT, out] as const];
    return bindSparse(this.device, label, this.forwardPipeline, tensors, [PARAMS, [n]], this.grid(n));
  }

  /** dinp[n] += gelu′(inp[n])·dout[n]. */
  backward(dinp: TensorView, inp: TensorView, dout: TensorView, n: number): BoundKernel {
    const label = 'GeluKernels.backward';
    if (!this.check(label, n, { dinp, inp, dout })) return emptyKernel(label);
    const tensors = [[INP, inp] as const, [DOUT, dout] as const, [DINP, dinp] as const];
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
