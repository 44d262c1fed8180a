/**
 * GPU layer normalisation (see layernorm.wgsl). forward is one dispatch; backward is three:
 * dinp (a group of lanes per row), then the parameter gradients through a partials buffer
 * [blocks, 2, C] that the binding owns: per-row-block sums, then a fixed-order sum over blocks.
 */
import { createEmptyStorageBuffer } from '../buffers.ts';
import {
  type BoundKernel,
  bindSparse,
  ceilDiv,
  emptyKernel,
  sequence,
  type TensorView,
  workgroupGrid,
} from '../kernel.ts';
import { createComputePipeline } from '../shader.ts';
import { isSoftwareDevice, requireElements, requireShape } from '../vector/launch.ts';
import source from './layernorm.wgsl?raw';

// Binding numbers in layernorm.wgsl.
const INP = 0;
const WEIGHT = 1;
const BIAS = 2;
const OUT = 3;
const MEAN = 4;
const RSTD = 5;
const DOUT = 6;
const DINP = 7;
const PARTIALS = 8;
const DWEIGHT = 9;
const DBIAS = 10;
const PARAMS = 11;

// backwardParamPartial's workgroup: 64 channels × 4 row lanes = 256 invocations.
const COLUMNS = 64;
const ROW_LANES = 4;
// Rows summed into one partial: 32 per lane. N = 16K rows gives 128 blocks, a partials buffer of
// 128 × 2C floats (1 MiB at C = 1024) and 128 adds per gradient in the final pass.
const ROWS_PER_BLOCK = 128;

const ENTRY_POINTS = ['forward', 'backwardInput', 'backwardParamPartial', 'backwardParamReduce'] as const;
type EntryPoint = (typeof ENTRY_POINTS)[number];

// backwardParamReduce's workgroup: one invocation per gradient.
const REDUCE_WORKGROUP = 256;

export interface LayernormKernelOptions {
  /**
   * Lanes sharing one row in forward and backwardInput, and rows per workgroup; lanesPerRow ×
   * rowsPerGroup ≤ 256 (SwiftShader's limit). Default on a GPU: 32 × 8, so a row's reads
   * coalesce. Default on a CPU implementation: 1 × 64, a row per invocation with no cross-lane
   * sums; SwiftShader runs N = 2000, C = 96 forward in 16 ms that way against 220 ms at 32 × 8.
   */
  lanesPerRow?: number;
  rowsPerGroup?: number;
}

export class LayernormKernels {
  private constructor(
    private readonly device: GPUDevice,
    private readonly pipelines: Record<EntryPoint, GPUComputePipeline>,
    readonly lanesPerRow: number,
    readonly rowsPerGroup: number,
  ) {}

  static async create(device: GPUDevice, options: LayernormKernelOptions = {}): Promise<LayernormKernels> {
    const software = isSoftwareDevice(device);
    const { lanesPerRow = software ? 1 : 32, rowsPerGroup = software ? 64 : 8 } = options;
    const invocations = lanesPerRow * rowsPerGroup;
    if (
      !Number.isInteger(invocations) ||
      invocations < 1 ||
      invocations > Math.min(256, device.limits.maxComputeInvocationsPerWorkgroup)
    ) {
      throw new RangeError(`LayernormKernels: ${lanesPerRow} lanes × ${rowsPerGroup} rows is not 1…256 invocations`);
    }
    const constants = {
      LANES_PER_ROW: lanesPerRow,
      ROWS_PER_GROUP: rowsPerGroup,
      COLUMNS,
      ROW_LANES,
      WORKGROUP_SIZE: REDUCE_WORKGROUP,
    };
    const compiled = await Promise.all(
      ENTRY_POINTS.map((entry) => createComputePipeline(device, `LayernormKernels.${entry}`, source, constants, entry)),
    );
    const pipelines = Object.fromEntries(ENTRY_POINTS.map((entry, i) => [entry, compiled[i]]));
    return new LayernormKernels(device, pipelines as Record<EntryPoint, GPUComputePipeline>, lanesPerRow, rowsPerGroup);
  }

  /** out[N,C] = layernorm(inp[N,C])·weight[C] + bias[C]; saves mean[N] and rstd[N]. */
  forward(
    out: TensorView,
    mean: TensorView,
    rstd: TensorView,
    inp: TensorView,
    weight: TensorView,
    bias: TensorView,
    N: number,
    C: number,
  ): BoundKernel {
    const label = 'LayernormKernels.forward';
    if (!this.check(label, N, C, { out, inp }, { mean, rstd }, { weight, bias })) return emptyKernel(label);
    const tensors = [
      [INP, inp],
      [WEIGHT, weight],
      [BIAS, bias],
      [OUT, out],
      [MEAN, mean],
      [RSTD, rstd],
    ] as const;
    return bindSparse(
      this.device,
      label,
      this.pipelines.forward,
      tensors,
      [PARAMS, [N, C, 0, 0]],
      workgroupGrid(this.device, ceilDiv(N, this.rowsPerGroup)),
    );
  }

  /** dinp[N,C] += ∂/∂inp, dweight[C] += Σ dout·norm, dbias[C] += Σ dout, from forward's mean and rstd. */
  backward(
    dinp: TensorView,
    dweight: TensorView,
    dbias: TensorView,
    dout: TensorView,
    inp: TensorView,
    weight: TensorView,
    mean: TensorView,
    rstd: TensorView,
    N: number,
    C: number,
  ): BoundKernel {
    const label = 'LayernormKernels.backward';
    if (!this.check(label, N, C, { dinp, dout, inp }, { mean, rstd }, { weight, dweight, dbias })) {
      return emptyKernel(label);
    }
    // Enough rows per block that the block count fits one grid dimension.
    const rowsPerBlock = Math.max(ROWS_PER_BLOCK, ceilDiv(N, this.device.limits.maxComputeWorkgroupsPerDimension));
    const blocks = ceilDiv(N, rowsPerBlock);
    const partials = createEmptyStorageBuffer(this.device, 'LayernormKernels.partials', blocks * 2 * C * 4);
    const words = [N, C, rowsPerBlock, blocks];
    const kernels = [
      bindSparse(
        this.device,
        `${label}.input`,
        this.pipelines.backwardInput,
        [
          [INP, inp],
          [WEIGHT, weight],
          [MEAN, mean],
          [RSTD, rstd],
          [DOUT, dout],
          [DINP, dinp],
        ],
        [PARAMS, words],
        workgroupGrid(this.device, ceilDiv(N, this.rowsPerGroup)),
      ),
      bindSparse(
        this.device,
        `${label}.paramPartial`,
        this.pipelines.backwardParamPartial,
        [
          [INP, inp],
          [MEAN, mean],
          [RSTD, rstd],
          [DOUT, dout],
          [PARTIALS, { buffer: partials }],
        ],
        [PARAMS, words],
        [ceilDiv(C, COLUMNS), blocks],
      ),
      bindSparse(
        this.device,
        `${label}.paramReduce`,
        this.pipelines.backwardParamReduce,
        [
          [PARTIALS, { buffer: partials }],
          [DWEIGHT, dweight],
          [DBIAS, dbias],
        ],
        [PARAMS, words],
        [ceilDiv(2 * C, REDUCE_WORKGROUP)],
      ),
    ];
    const steps = sequence(label, kernels);
    return {
      label,
      dispatch: (pass) => steps.dispatch(pass),
      destroy() {
        steps.destroy();
        partials.destroy();
      },
    };
  }

  /** False when there is nothing to do; throws on a bad shape or a view too small. */
  private check(
    label: string,
    N: number,
    C: number,
    rowsByChannels: Record<string, TensorView>,
    perRow: Record<string, TensorView>,
    perChannel: Record<string, TensorView>,
  ): boolean {
    requireShape(label, { N, C });
    for (const [name, view] of Object.entries(rowsByChannels)) requireElements(label, name, view, N * C);
    for (const [name, view] of Object.entries(perRow)) requireElements(label, name, view, N);
    for (const [name, view] of Object.entries(perChannel)) requireElements(label, name, view, C);
    return N > 0 && C > 0;
  }
}
