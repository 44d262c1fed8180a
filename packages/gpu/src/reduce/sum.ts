import { createEmptyStorageBuffer, createStorageBuffer, createUniformBuffer, readFloat32 } from '../buffers.ts';
import { createComputePipeline } from '../shader.ts';
import source from './sum.wgsl?raw';

/** CPU reference: the sum in float64, which an f32 GPU tree sum is compared against. */
export function sumReference(values: ArrayLike<number>): number {
  let total = 0;
  for (let i = 0; i < values.length; i++) total += values[i] as number;
  return total;
}

/** An error bound for an f32 tree sum: a few ulps of the sum of magnitudes per tree level. */
export function sumTolerance(values: ArrayLike<number>): number {
  let magnitude = 0;
  for (let i = 0; i < values.length; i++) magnitude += Math.abs(values[i] as number);
  const levels = Math.ceil(Math.log2(Math.max(2, values.length)));
  return 1e-7 + magnitude * 2 ** -23 * levels * 2;
}

interface Pass {
  n: number;
  groups: number;
  itemsPerGroup: number;
}

/**
 * Sums an f32 buffer on the GPU in ⌈log_{items}(n)⌉ passes recorded into one command buffer.
 * The workgroup size is a pipeline override; it must be a power of two within the device limits.
 */
export class SumKernel {
  private constructor(
    private readonly device: GPUDevice,
    private readonly pipeline: GPUComputePipeline,
    readonly workgroupSize: number,
  ) {}

  static async create(
    device: GPUDevice,
    workgroupSize = Math.min(256, device.limits.maxComputeInvocationsPerWorkgroup),
  ) {
    if (
      !Number.isInteger(Math.log2(workgroupSize)) ||
      workgroupSize > device.limits.maxComputeInvocationsPerWorkgroup
    ) {
      throw new RangeError(
        `SumKernel: workgroup size ${workgroupSize} must be a power of two ≤ ${device.limits.maxComputeInvocationsPerWorkgroup}`,
      );
    }
    const pipeline = await createComputePipeline(device, 'SumKernel.pipeline', source, {
      WORKGROUP_SIZE: workgroupSize,
    });
    return new SumKernel(device, pipeline, workgroupSize);
  }

  /** The passes for n values: each reduces by itemsPerGroup, within the per-dimension dispatch limit. */
  plan(n: number): Pass[] {
    const maxGroups = this.device.limits.maxComputeWorkgroupsPerDimension;
    const passes: Pass[] = [];
    let remaining = n;
    do {
      // At least 4 values per lane, and few enough groups to dispatch in one dimension.
      const minItems = Math.ceil(remaining / maxGroups);
      const itemsPerGroup = Math.max(
        this.workgroupSize * 4,
        Math.ceil(minItems / this.workgroupSize) * this.workgroupSize,
      );
      const groups = Math.ceil(remaining / itemsPerGroup);
      passes.push({ n: remaining, groups, itemsPerGroup });
      remaining = groups;
    } while (remaining > 1);
    return passes;
  }

  /**
   * Records the passes that sum `n` f32 values of `input` into `output[0]`. Returns the
   * temporary buffers, which the caller destroys once the work is done.
   */
  encode(encoder: GPUCommandEncoder, input: GPUBuffer, n: number, output: GPUBuffer): GPUBuffer[] {
    if (n < 1) throw new RangeError('SumKernel: nothing to sum (n = 0)');
    const temporaries: GPUBuffer[] = [];
    const passes = this.plan(n);
    let source = input;
    passes.forEach((pass, index) => {
      const last = index === passes.length - 1;
      const target = last
        ? output
        : createEmptyStorageBuffer(this.device, `SumKernel.partials${index}`, pass.groups * 4);
      const params = createUniformBuffer(this.device, `SumKernel.params${index}`, [pass.n, pass.itemsPerGroup]);
      if (!last) temporaries.push(target);
      temporaries.push(params);
      const bindGroup = this.device.createBindGroup({
        label: `SumKernel.bindGroup${index}`,
        layout: this.pipeline.getBindGroupLayout(0),
        entries: [
          { binding: 0, resource: { buffer: source } },
          { binding: 1, resource: { buffer: target } },
          { binding: 2, resource: { buffer: params } },
        ],
      });
      const computePass = encoder.beginComputePass({ label: `SumKernel.pass${index}` });
      computePass.setPipeline(this.pipeline);
      computePass.setBindGroup(0, bindGroup);
      computePass.dispatchWorkgroups(pass.groups);
      computePass.end();
      source = target;
    });
    return temporaries;
  }

  /** Uploads `values`, sums them on the GPU and reads the result back. */
  async sum(values: Float32Array): Promise<number> {
    const input = createStorageBuffer(this.device, 'SumKernel.input', values);
    const output = createEmptyStorageBuffer(this.device, 'SumKernel.output', 4);
    const encoder = this.device.createCommandEncoder({ label: 'SumKernel.encoder' });
    const temporaries = this.encode(encoder, input, values.length, output);
    this.device.queue.submit([encoder.finish()]);
    const [result] = await readFloat32(this.device, output, 1);
    for (const buffer of [input, output, ...temporaries]) buffer.destroy();
    return result as number;
  }
}
