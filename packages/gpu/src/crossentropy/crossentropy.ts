/**
 * Fused softmax + cross-entropy on the GPU. forward: per-row losses [N] and, optionally, their
 * mean in a 1-float buffer (a deterministic one-workgroup reduction). backward: dlogits =
 * (softmax − onehot) / N, into a separate buffer or over the logits in place (llm.c style).
 * A workgroup takes `rowsPerWorkgroup` rows with `lanesPerRow` invocations each; V is any size ≥ 2
 * (the lanes stride over it).
 */
import { f32Bits } from '../buffers.ts';
import { type BoundKernel, bindKernel, sequence, type TensorView } from '../kernel.ts';
import { createComputePipeline } from '../shader.ts';
import common from './crossentropy.common.wgsl?raw';
import inplaceSource from './crossentropy.inplace.wgsl?raw';
import meanSource from './crossentropy.mean.wgsl?raw';
import source from './crossentropy.wgsl?raw';

export interface CrossEntropyForwardViews {
  logits: TensorView; // [N, V] f32
  targets: TensorView; // [N] i32, each in [0, V)
  losses: TensorView; // [N] f32, written
  meanLoss?: TensorView; // [1] f32, written with mean(losses) when given
}

export interface CrossEntropyBackwardViews {
  logits: TensorView; // [N, V] f32
  targets: TensorView; // [N] i32
  /** [N, V] f32, overwritten. Omitted (or the very same binding as logits): in place over the logits. */
  dlogits?: TensorView;
}

const MEAN_WORKGROUP_SIZE = 256;

export class CrossEntropyKernels {
  private constructor(
    private readonly device: GPUDevice,
    private readonly pipelines: {
      forward: GPUComputePipeline;
      backward: GPUComputePipeline;
      backwardInPlace: GPUComputePipeline;
      mean: GPUComputePipeline;
    },
    readonly lanesPerRow: number,
    readonly rowsPerWorkgroup: number,
    private readonly maxGroupsPerDimension: number,
  ) {}

  /**
   * `lanesPerRow` (a power of two) invocations reduce each row; `lanesPerRow × rowsPerWorkgroup`
   * ≤ 256. The default 16 × 16 suits V = 256; a 50k vocabulary wants 256 × 1.
   * `maxGroupsPerDimension` (default: the device limit) lets tests reach the 2-D grid cheaply.
   */
  static async create(
    device: GPUDevice,
    lanesPerRow = 16,
    rowsPerWorkgroup = 16,
    maxGroupsPerDimension = device.limits.maxComputeWorkgroupsPerDimension,
  ): Promise<CrossEntropyKernels> {
    const workgroupSize = lanesPerRow * rowsPerWorkgroup;
    if (
      !Number.isInteger(Math.log2(lanesPerRow)) ||
      !Number.isInteger(rowsPerWorkgroup) ||
      rowsPerWorkgroup < 1 ||
      workgroupSize > Math.min(256, device.limits.maxComputeInvocationsPerWorkgroup)
    ) {
      throw new RangeError(
        `CrossEntropyKernels: ${lanesPerRow} lanes (a power of two) × ${rowsPerWorkgroup} rows must fit 256 invocations`,
      );
    }
    const constants = { LANES: lanesPerRow, ROWS: rowsPerWorkgroup, WORKGROUP_SIZE: workgroupSize };
    const [forward, backward, backwardInPlace, mean] = await Promise.all([
      createComputePipeline(device, 'CrossEntropy.forward', `${common}\n${source}`, constants, 'forward'),
      createComputePipeline(device, 'CrossEntropy.backward', `${common}\n${source}`, constants, 'backward'),
      createComputePipeline(
        device,
        'CrossEntropy.backwardInPlace',
        `${common}\n${inplaceSource}`,
        constants,
        'backward',
      ),
      createComputePipeline(device, 'CrossEntropy.mean', meanSource, { WORKGROUP_SIZE: MEAN_WORKGROUP_SIZE }),
    ]);
    return new CrossEntropyKernels(
      device,
      { forward, backward, backwardInPlace, mean },
      lanesPerRow,
      rowsPerWorkgroup,
      Math.min(maxGroupsPerDimension, device.limits.maxComputeWorkgroupsPerDimension),
    );
  }

  /** Writes losses [N] and, when `views.meanLoss` is given, their mean. */
  forward(views: CrossEntropyForwardViews, N: number, V: number): BoundKernel {
    checkShape(N, V);
    const rows = bindKernel(
      this.device,
      'CrossEntropy.forward',
      this.pipelines.forward,
      [views.logits, views.targets, views.losses],
      [N, V, f32Bits(1 / N)],
      this.rowGrid(N),
    );
    if (!views.meanLoss) return rows;
    const mean = bindKernel(
      this.device,
      'CrossEntropy.mean',
      this.pipelines.mean,
      [views.losses, views.meanLoss],
      [N, f32Bits(1 / N)],
      [1],
    );
    return sequence('CrossEntropy.forwardMean', [rows, mean]);
  }

  /**
   * Writes dlogits = (softmax − onehot) · scale; scale defaults to 1/N (the gradient of the mean
   * loss; divide further for gradient accumulation).
   */
  backward(views: CrossEntropyBackwardViews, N: number, V: number, scale = 1 / N): BoundKernel {
    checkShape(N, V);
    const { logits, targets, dlogits } = views;
    const uniform = [N, V, f32Bits(scale)];
    if (
      dlogits === undefined ||
      dlogits === logits ||
      (dlogits.buffer === logits.buffer && (dlogits.offset ?? 0) === (logits.offset ?? 0))
    ) {
      return bindKernel(
        this.device,
        'CrossEntropy.backwardInPlace',
        this.pipelines.backwardInPlace,
        [logits, targets],
        uniform,
        this.rowGrid(N),
      );
    }
    if (dlogits.buffer === logits.buffer) {
      // One buffer bound read-only and writable in one dispatch is a WebGPU validation error.
      throw new RangeError('CrossEntropy.backward: dlogits must be the logits binding itself or another buffer');
    }
    return bindKernel(
      this.device,
      'CrossEntropy.backward',
      this.pipelines.backward,
      [logits, targets, dlogits],
      uniform,
      this.rowGrid(N),
    );
  }

  /** ⌈N / rowsPerWorkgroup⌉ workgroups, as x (+ y past the per-dimension limit; the extra ones find no rows). */
  private rowGrid(N: number): [number, number] {
    const groups = Math.ceil(N / this.rowsPerWorkgroup);
    const x = Math.min(groups, this.maxGroupsPerDimension);
    return [x, Math.ceil(groups / x)];
  }
}

function checkShape(N: number, V: number): void {
  if (!Number.isInteger(N) || !Number.isInteger(V) || N < 1 || V < 2) {
    throw new RangeError(`CrossEntropy: need whole N ≥ 1 and V ≥ 2, got N=${N}, V=${V}`);
  }
}
