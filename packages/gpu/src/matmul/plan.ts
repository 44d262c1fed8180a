/**
 * Host-side planning for the matmul family, pure functions of the device limits and shapes
 * (so they are tested without a GPU): tile sizes, dispatch grids within the 65535-per-dimension
 * limit, the split-K plan of the weight gradient, and bounds-checked tensor bindings.
 */
import type { TensorView } from '../kernel.ts';

export type Limits = Pick<
  GPUSupportedLimits,
  | 'maxComputeInvocationsPerWorkgroup'
  | 'maxComputeWorkgroupSizeX'
  | 'maxComputeWorkgroupSizeY'
  | 'maxComputeWorkgroupStorageSize'
  | 'maxComputeWorkgroupsPerDimension'
  | 'maxStorageBufferBindingSize'
  | 'minStorageBufferOffsetAlignment'
>;

/** The limits planning reads, as a plain object, the grid limit optionally lowered. */
export function planningLimits(limits: Limits, maxWorkgroupsPerDimension = Number.POSITIVE_INFINITY): Limits {
  return {
    maxComputeInvocationsPerWorkgroup: limits.maxComputeInvocationsPerWorkgroup,
    maxComputeWorkgroupSizeX: limits.maxComputeWorkgroupSizeX,
    maxComputeWorkgroupSizeY: limits.maxComputeWorkgroupSizeY,
    maxComputeWorkgroupStorageSize: limits.maxComputeWorkgroupStorageSize,
    maxComputeWorkgroupsPerDimension: Math.min(limits.maxComputeWorkgroupsPerDimension, maxWorkgroupsPerDimension),
    maxStorageBufferBindingSize: limits.maxStorageBufferBindingSize,
    minStorageBufferOffsetAlignment: limits.minStorageBufferOffsetAlignment,
  };
}

/**
 * The kernels of the family: `tiled` (matmul.wgsl, 8 × 4 outputs per invocation, one staged
 * slice), `register` (matmul.register.wgsl, 8 × 8 outputs, double-buffered slices) and
 * `registerSubgroup` (the same, sharing A fragments within quads of a subgroup; needs the
 * `subgroups` feature).
 */
export type MatmulKernelName = 'tiled' | 'register' | 'registerSubgroup';
export const MATMUL_KERNEL_NAMES: readonly MatmulKernelName[] = ['tiled', 'register', 'registerSubgroup'];

export interface MatmulTiles {
  /** 'matrix': the subgroup-matrix kernel, whose tiles matrix.ts resolves. */
  kernel: MatmulKernelName | 'matrix';
  workgroupX: number;
  workgroupY: number;
  tileK: number;
  /** Result rows per workgroup: 8 per invocation row. */
  tileM: number;
  /** Result columns per workgroup: 4 (tiled) or 8 (register) per invocation column. */
  tileN: number;
  targetWorkgroups: number;
  /** Workgroup memory of the staged tiles, as laid out in the kernel's .wgsl. */
  workgroupStorageBytes: number;
}

/**
 * Tile sizes from the options, checked against the limits. The defaults (16 × 16 invocations,
 * 128 × 64 tiles, K slices of 16) use 256 invocations and 12.5 KiB, within what SwiftShader offers.
 */
export function resolveTiles(
  limits: Limits,
  options: {
    kernel?: MatmulKernelName;
    workgroupX?: number;
    workgroupY?: number;
    tileK?: number;
    targetWorkgroups?: number;
  },
): MatmulTiles {
  const { kernel = 'tiled', targetWorkgroups = 256 } = options;
  if (!MATMUL_KERNEL_NAMES.includes(kernel)) throw new RangeError(`MatmulKernels: unknown kernel "${kernel}"`);
  const tiled = kernel === 'tiled';
  // The register kernels default to 8 × 8 invocations (64 × 64 tiles) and K slices of 8, whose
  // two staged halves fit the portable 16 KiB.
  const { workgroupX = tiled ? 16 : 8, workgroupY = tiled ? 16 : 8, tileK = tiled ? 16 : 8 } = options;
  const positive = (n: number) => Number.isInteger(n) && n >= 1;
  if (!positive(workgroupX) || !positive(workgroupY) || !positive(tileK) || tileK % 4 !== 0) {
    throw new RangeError(
      `MatmulKernels: workgroup ${workgroupX}×${workgroupY} and tileK ${tileK} must be positive integers, tileK a multiple of 4`,
    );
  }
  // The bias gradient gives each of a tile's 8·workgroupY rows to one invocation.
  if (workgroupX < 8) {
    throw new RangeError(`MatmulKernels: workgroupX ${workgroupX} must be at least 8 (one invocation per tile row)`);
  }
  if (
    workgroupX * workgroupY > limits.maxComputeInvocationsPerWorkgroup ||
    workgroupX > limits.maxComputeWorkgroupSizeX ||
    workgroupY > limits.maxComputeWorkgroupSizeY
  ) {
    throw new RangeError(
      `MatmulKernels: workgroup ${workgroupX}×${workgroupY} exceeds the device's ${limits.maxComputeInvocationsPerWorkgroup} invocations`,
    );
  }
  // Quads of consecutive lanes share their rows only when a row of invocations holds whole quads.
  if (kernel === 'registerSubgroup' && workgroupX % 4 !== 0) {
    throw new RangeError(`MatmulKernels: workgroupX ${workgroupX} must be a multiple of 4 for ${kernel}`);
  }
  // tiled: tileA tileK × (2·workgroupY + 1) vec4, tileB tileK × (workgroupX + 1) vec4.
  // register: two halves of tileK × (2·workgroupY + 1) and tileK × (2·workgroupX + 1) vec4.
  const workgroupStorageBytes = tiled
    ? tileK * (2 * workgroupY + 1 + workgroupX + 1) * 16
    : 2 * tileK * (2 * workgroupY + 1 + 2 * workgroupX + 1) * 16;
  if (workgroupStorageBytes > limits.maxComputeWorkgroupStorageSize) {
    throw new RangeError(
      `MatmulKernels: tiles need ${workgroupStorageBytes} bytes of workgroup memory, the device has ${limits.maxComputeWorkgroupStorageSize}`,
    );
  }
  return {
    kernel,
    workgroupX,
    workgroupY,
    tileK,
    tileM: 8 * workgroupY,
    tileN: (tiled ? 4 : 8) * workgroupX,
    targetWorkgroups,
    workgroupStorageBytes,
  };
}

/** [width, height] with width ≤ limit and width·height ≥ count, for grids past 65535. */
export function foldCount(count: number, limit: number): [number, number] {
  const height = Math.ceil(count / limit);
  return [Math.ceil(count / height), height];
}

/**
 * The grid for `columns` workgroups along x (column tiles × splits) and `rowTiles` along y,
 * folded into z past the limit (matmul.wgsl reads row tile y + z·height and skips the spares).
 */
export function planGrid(limits: Limits, rowTiles: number, columns: number): [number, number, number] {
  const limit = limits.maxComputeWorkgroupsPerDimension;
  if (columns > limit) throw new RangeError(`MatmulKernels: ${columns} column workgroups exceed ${limit}`);
  const [y, z] = foldCount(rowTiles, limit);
  return [columns, y, z];
}

export interface SplitPlan {
  splits: number;
  /** K per split, a multiple of tileK; the last split may be shorter. */
  kPerSplit: number;
}

/** Each split reduces at least this much of K, so partial results cost ≤ 1/64 of the traffic. */
const MIN_K_PER_SPLIT = 256;
/** Partial results of one weight gradient stay under this. */
export const MAX_PARTIAL_BYTES = 64 * 2 ** 20;

/**
 * How to split K for an M × N result that reduces over a long K (the weight gradient, K = B·T):
 * enough splits for about targetWorkgroups workgroups, each split at least MIN_K_PER_SPLIT long,
 * partials within MAX_PARTIAL_BYTES. `requested` overrides the count (still clamped to K).
 */
export function planSplitK(tiles: MatmulTiles, limits: Limits, M: number, N: number, K: number, requested?: number) {
  const tilesPerSplit = Math.ceil(M / tiles.tileM) * Math.ceil(N / tiles.tileN);
  const partialBytes = (M * N + M) * 4;
  const bytesLimit = Math.min(MAX_PARTIAL_BYTES, limits.maxStorageBufferBindingSize);
  let splits =
    requested ??
    Math.min(
      Math.ceil(tiles.targetWorkgroups / tilesPerSplit),
      Math.floor(K / MIN_K_PER_SPLIT),
      Math.floor(bytesLimit / partialBytes),
    );
  const maxColumns = Math.floor(limits.maxComputeWorkgroupsPerDimension / Math.ceil(N / tiles.tileN));
  splits = Math.max(1, Math.min(splits, Math.ceil(K / tiles.tileK), maxColumns));
  const kPerSplit = Math.ceil(Math.ceil(K / splits) / tiles.tileK) * tiles.tileK;
  return { splits: Math.ceil(K / kPerSplit), kPerSplit } satisfies SplitPlan;
}

/**
 * A view narrowed to exactly `floats` f32 values, after checking it holds them and is aligned.
 * Narrowing keeps two views of one buffer from overlapping in WebGPU's aliasing check when the
 * caller left their sizes open.
 */
export function tensorBinding(limits: Limits, view: TensorView, floats: number, label: string): GPUBufferBinding {
  if (!Number.isInteger(floats) || floats < 1) throw new RangeError(`${label}: shape gives ${floats} values`);
  const offset = view.offset ?? 0;
  const bytes = floats * 4;
  const available = view.size ?? view.buffer.size - offset;
  if (offset % limits.minStorageBufferOffsetAlignment !== 0) {
    throw new RangeError(`${label}: offset ${offset} is not a multiple of ${limits.minStorageBufferOffsetAlignment}`);
  }
  if (available < bytes) {
    throw new RangeError(`${label}: view of ${available} bytes is smaller than ${floats} f32 (${bytes} bytes)`);
  }
  return { buffer: view.buffer, offset, size: bytes };
}
