/**
 * Global L2 norm of the gradient and the clip scale, on the GPU, with no readback: a `partial`
 * pass per bindable chunk of each segment (sum of squares per workgroup into a partials buffer),
 * then one `finish` workgroup that sums the partials in a fixed order and writes
 * result[GRAD_NORM_INDEX] = ‖g‖₂ and result[CLIP_SCALE_INDEX] = min(1, maxNorm / (‖g‖₂ + 1e-6)).
 * AdamW binds the result and reads the clip scale (AdamWBuffers.gradScale).
 */
import { createEmptyStorageBuffer, f32Bits } from '../buffers.ts';
import { type BoundKernel, bindKernel, ceilDiv, sequence, type TensorView } from '../kernel.ts';
import { createComputePipeline } from '../shader.ts';
import { chunkRange } from './chunks.ts';
import source from './gradnorm.wgsl?raw';

/** Where the finish pass writes: element 0 the norm, element 1 the clip scale (the view must hold 2 floats). */
export const GRAD_NORM_INDEX = 0;
export const CLIP_SCALE_INDEX = 1;

/** Elements [offset, offset + n) of an f32 buffer that are part of the gradient. */
export interface GradSegment {
  buffer: GPUBuffer;
  offset?: number;
  n: number;
}

export interface PartialPlan {
  groups: number;
  /** Elements per workgroup, a multiple of the workgroup size. */
  itemsPerGroup: number;
}

export class GradNormKernels {
  private constructor(
    private readonly device: GPUDevice,
    private readonly partial: GPUComputePipeline,
    private readonly finish: GPUComputePipeline,
    readonly workgroupSize: number,
  ) {}

  static async create(device: GPUDevice, workgroupSize = 256): Promise<GradNormKernels> {
    if (
      !Number.isInteger(Math.log2(workgroupSize)) ||
      workgroupSize > device.limits.maxComputeInvocationsPerWorkgroup
    ) {
      throw new RangeError(
        `GradNormKernels: workgroup size ${workgroupSize} must be a power of two within the device limit`,
      );
    }
    const constants = { WORKGROUP_SIZE: workgroupSize };
    const [partial, finish] = await Promise.all([
      createComputePipeline(device, 'GradNorm.partial', source, constants, 'partial'),
      createComputePipeline(device, 'GradNorm.finish', source, constants, 'finish'),
    ]);
    return new GradNormKernels(device, partial, finish, workgroupSize);
  }

  /**
   * Workgroups for one chunk of n values: at least 16 values per lane (so the single finish
   * workgroup sums at most n / (16·workgroupSize) partials: 15k for 60M values), and few enough
   * groups for one dispatch dimension.
   */
  plan(n: number): PartialPlan {
    const size = this.workgroupSize;
    const maxGroups = this.device.limits.maxComputeWorkgroupsPerDimension;
    const itemsPerGroup = Math.max(size * 16, ceilDiv(ceilDiv(n, maxGroups), size) * size);
    return { groups: Math.max(1, ceilDiv(n, itemsPerGroup)), itemsPerGroup };
  }

  /**
   * Binds the passes that write ‖segments‖₂ and the clip scale into `result` (2 floats).
   * `maxNorm` ≤ 0 disables clipping (scale 1). `maxBindingBytes` caps each view (default: the
   * device's maxStorageBufferBindingSize). The partials buffer belongs to the returned kernel.
   */
  norm(
    segments: GradSegment[],
    result: TensorView,
    maxNorm: number,
    options: { maxBindingBytes?: number } = {},
  ): BoundKernel {
    if (!Number.isFinite(maxNorm))
      throw new RangeError(`GradNorm: maxNorm must be finite (≤ 0 disables clipping), got ${maxNorm}`);
    const limits = {
      minStorageBufferOffsetAlignment: this.device.limits.minStorageBufferOffsetAlignment,
      maxStorageBufferBindingSize: Math.min(
        options.maxBindingBytes ?? Number.POSITIVE_INFINITY,
        this.device.limits.maxStorageBufferBindingSize,
      ),
    };
    const chunks = segments.flatMap((segment, index) =>
      chunkRange(limits, segment.buffer, segment.offset ?? 0, segment.n, `GradNorm.segment${index}`),
    );
    const plans = chunks.map((chunk) => this.plan(chunk.n));
    const totalPartials = plans.reduce((sum, plan) => sum + plan.groups, 0);
    // An empty gradient still gets one zero partial, so the finish pass writes norm 0.
    const partials = createEmptyStorageBuffer(this.device, 'GradNorm.partials', Math.max(1, totalPartials) * 4);
    const kernels: BoundKernel[] = [];
    let outOffset = 0;
    chunks.forEach((chunk, index) => {
      const plan = plans[index] as PartialPlan;
      kernels.push(
        bindKernel(
          this.device,
          `GradNorm.partial${index}`,
          this.partial,
          [chunk.view, { buffer: partials }],
          [chunk.start, chunk.n, plan.itemsPerGroup, outOffset, 0],
          [plan.groups],
        ),
      );
      outOffset += plan.groups;
    });
    kernels.push(
      bindKernel(
        this.device,
        'GradNorm.finish',
        this.finish,
        [{ buffer: partials, size: Math.max(1, totalPartials) * 4 }, result],
        [0, totalPartials, 0, 0, f32Bits(maxNorm)],
        [1],
      ),
    );
    const all = sequence('GradNorm.norm', kernels);
    return {
      label: all.label,
      dispatch: (pass) => all.dispatch(pass),
      destroy() {
        all.destroy();
        partials.destroy();
      },
    };
  }
}
