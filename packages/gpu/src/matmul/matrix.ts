/**
 * The subgroup-matrix (tensor-core) kernel of the matmul family: which of an adapter's
 * subgroup-matrix configurations it can use, its tiles, and the WGSL prelude that declares
 * the configuration for matmul.matrix.wgsl, either on the real feature
 * (`chromium-experimental-subgroup-matrix`) or emulated, so the kernel's tiling, staging and
 * edges are tested on adapters without the feature (lavapipe, SwiftShader).
 *
 * Precision: the staged operands are in the configuration's component type (f32, or f16 when
 * the device has `shader-f16`), products are accumulated in f32. With f16 operands a product's
 * relative error is about 1e-3 (two roundings to 11 bits); the start-up gate (gate.ts) measures
 * it on the adapter before the engine uses the kernel.
 */
import { choiceFromEnvironment } from '../environment.ts';
import type { Limits, MatmulTiles } from './plan.ts';

export const SUBGROUP_MATRIX_FEATURE = 'chromium-experimental-subgroup-matrix' as GPUFeatureName;

/**
 * The precision of the matmul operands. 'f32' (default): f32 throughout. 'f16': operands rounded
 * to f16, products accumulated in f32, master weights, gradients' sums and AdamW in f32; on
 * tensor cores where the adapter offers subgroup matrices and their start-up gate passes, else
 * the tiled kernel rounding its operands alike (the same numerics, no speed-up).
 */
export type MatmulPrecision = 'f32' | 'f16';
export const MATMUL_PRECISIONS: readonly MatmulPrecision[] = ['f32', 'f16'];

/** SHOAL_PRECISION in Node (f32 or f16): the default precision, and whether Node asks Dawn for subgroup matrices. */
export function precisionFromEnvironment(): MatmulPrecision | undefined {
  return choiceFromEnvironment('SHOAL_PRECISION', MATMUL_PRECISIONS);
}

/** One of GPUAdapterInfo.subgroupMatrixConfigs (Dawn), as plain data. */
export interface SubgroupMatrixConfig {
  componentType: string;
  resultComponentType: string;
  M: number;
  N: number;
  K: number;
}

/** What the matrix kernel runs: a configuration it supports, and how it is executed. */
export interface MatrixKernelConfig {
  /** The operand type staged and multiplied: 'f32', or 'f16' (needs shader-f16). Accumulation is f32. */
  componentType: 'f32' | 'f16';
  M: number;
  N: number;
  K: number;
  /**
   * Emulate the subgroup-matrix builtins with private arrays (tests on adapters without the
   * feature): the same tiling, staging and numerics, far slower.
   */
  emulate?: boolean;
  /** Result matrices per subgroup along M and N (default: a 32 × 32 block per subgroup, at most 4 × 4). */
  subgroupTiles?: [number, number];
  /** Subgroups per workgroup along N and M (default 2 × 2). */
  subgroups?: [number, number];
}

/** The K depth of one staged slice. */
const TILE_K = 16;

/** A readable name: `f16×f16→f32 8×8×8` (with `, emulated`). */
export function matrixPrecisionName(config: MatrixKernelConfig): string {
  const name = `${config.componentType}×${config.componentType}→f32 ${config.M}×${config.N}×${config.K}`;
  return config.emulate ? `${name}, emulated` : name;
}

/** The adapter's subgroup-matrix configurations (empty where it has none), as plain data. */
export function subgroupMatrixConfigs(info: GPUAdapterInfo): SubgroupMatrixConfig[] {
  const list = (info as GPUAdapterInfo & { subgroupMatrixConfigs?: readonly SubgroupMatrixConfig[] })
    .subgroupMatrixConfigs;
  if (!Array.isArray(list)) return [];
  return list.map((c: SubgroupMatrixConfig) => ({
    componentType: String(c.componentType),
    resultComponentType: String(c.resultComponentType),
    M: Number(c.M),
    N: Number(c.N),
    K: Number(c.K),
  }));
}

/** Why the kernel cannot use a configuration, or null when it can. */
export function matrixConfigProblem(config: SubgroupMatrixConfig, features: ReadonlySet<string>): string | null {
  if (config.resultComponentType !== 'f32') return `result type ${config.resultComponentType} is not f32`;
  if (config.componentType !== 'f32' && config.componentType !== 'f16') {
    return `component type ${config.componentType} is neither f32 nor f16`;
  }
  if (config.componentType === 'f16' && !features.has('shader-f16')) return 'f16 operands need shader-f16';
  if (TILE_K % config.K !== 0) return `K ${config.K} does not divide the slice depth ${TILE_K}`;
  if (32 % config.M !== 0 || 32 % config.N !== 0 || config.N % 4 !== 0) {
    return `M ${config.M} × N ${config.N} does not tile a 32 × 32 block in rows of vec4`;
  }
  return null;
}

/**
 * The configuration the kernel takes on this device: f32 operands first (no precision lost to
 * the operands), then f16; larger matrices first within a type. Null when none fits, with why.
 */
export function chooseMatrixConfig(
  configs: readonly SubgroupMatrixConfig[],
  features: ReadonlySet<string>,
): { config: MatrixKernelConfig | null; refused: string[] } {
  const refused: string[] = [];
  const usable: MatrixKernelConfig[] = [];
  for (const c of configs) {
    const problem = matrixConfigProblem(c, features);
    const name = `${c.componentType}×${c.componentType}→${c.resultComponentType} ${c.M}×${c.N}×${c.K}`;
    if (problem) refused.push(`${name}: ${problem}`);
    else usable.push({ componentType: c.componentType as 'f32' | 'f16', M: c.M, N: c.N, K: c.K });
  }
  usable.sort(
    (a, b) => (a.componentType === 'f32' ? 0 : 1) - (b.componentType === 'f32' ? 0 : 1) || b.M * b.N - a.M * a.N,
  );
  if (configs.length === 0) refused.push('the adapter lists no subgroup-matrix configurations');
  return { config: usable[0] ?? null, refused };
}

/** Tiles of the matrix kernel on a device whose largest subgroup has `subgroupMaxSize` lanes. */
export function resolveMatrixTiles(
  limits: Limits,
  config: MatrixKernelConfig,
  subgroupMaxSize: number,
  targetWorkgroups = 256,
): MatmulTiles & { matrix: Required<Omit<MatrixKernelConfig, 'emulate'>> & { emulate: boolean } } {
  const { M, N, K, componentType } = config;
  if (![M, N, K].every((n) => Number.isInteger(n) && n >= 1)) {
    throw new RangeError(`MatmulKernels: matrix shape ${M}×${N}×${K} must be positive integers`);
  }
  const [subTM, subTN] = config.subgroupTiles ?? [Math.min(4, 32 / M), Math.min(4, 32 / N)];
  const [sgX, sgY] = config.subgroups ?? [2, 2];
  if (![subTM, subTN, sgX, sgY].every((n) => Number.isInteger(n) && n >= 1)) {
    throw new RangeError('MatmulKernels: matrix subgroup tiles and subgroups must be positive integers');
  }
  if (TILE_K % K !== 0 || N % 4 !== 0) {
    throw new RangeError(`MatmulKernels: matrix K ${K} must divide ${TILE_K} and N ${N} be a multiple of 4`);
  }
  const tileM = sgY * subTM * M;
  const tileN = sgX * subTN * N;
  if (tileM % 4 !== 0 || tileN % 4 !== 0) {
    throw new RangeError(`MatmulKernels: matrix tile ${tileM}×${tileN} must be made of whole vec4`);
  }
  const width = Math.max(1, subgroupMaxSize);
  // Every planned subgroup gets a full subgroup, and one invocation per tile row reduces dbias.
  const invocations = Math.ceil(Math.max(sgX * sgY * width, tileM) / width) * width;
  if (invocations > limits.maxComputeInvocationsPerWorkgroup || invocations > limits.maxComputeWorkgroupSizeX) {
    throw new RangeError(
      `MatmulKernels: the matrix kernel needs ${invocations} invocations, the device allows ${limits.maxComputeInvocationsPerWorkgroup}`,
    );
  }
  // Emulated f16 operands may be staged as f32 (matrixPrelude): count them at 4 bytes.
  const bytes = componentType === 'f16' && !config.emulate ? 2 : 4;
  const workgroupStorageBytes = (tileM * TILE_K + TILE_K * tileN) * bytes + sgX * sgY * M * N * 4;
  if (workgroupStorageBytes > limits.maxComputeWorkgroupStorageSize) {
    throw new RangeError(
      `MatmulKernels: matrix tiles need ${workgroupStorageBytes} bytes of workgroup memory, the device has ${limits.maxComputeWorkgroupStorageSize}`,
    );
  }
  return {
    kernel: 'matrix',
    workgroupX: invocations,
    workgroupY: 1,
    tileK: TILE_K,
    tileM,
    tileN,
    targetWorkgroups,
    workgroupStorageBytes,
    matrix: { componentType, M, N, K, subgroupTiles: [subTM, subTN], subgroups: [sgX, sgY], emulate: !!config.emulate },
  };
}

/** The prelude of matmul.matrix.wgsl for resolved tiles (see the list at the top of that file). */
export function matrixPrelude(
  tiles: ReturnType<typeof resolveMatrixTiles>,
  subgroupMaxSize: number,
  shaderF16: boolean,
): string {
  const { componentType, M, N, K, subgroupTiles, subgroups, emulate } = tiles.matrix;
  // Emulated without shader-f16, f16 operands are staged as f32 values rounded to f16 (roundF16,
  // matmul.round-f16.wgsl): the same numbers, in a wider type.
  const widened = emulate && componentType === 'f16' && !shaderF16;
  const T = widened ? 'f32' : componentType;
  const toT = widened
    ? 'fn toT(x: f32) -> T { return roundF16(x); }'
    : T === 'f16'
      ? 'fn toT(x: f32) -> T { return T(clamp(x, -65504.0, 65504.0)); }' // saturating, as roundF16
      : 'fn toT(x: f32) -> T { return x; }';
  const constants = [
    `const SM_M: u32 = ${M}u;`,
    `const SM_N: u32 = ${N}u;`,
    `const SM_K: u32 = ${K}u;`,
    `const SUB_TM: u32 = ${subgroupTiles[0]}u;`,
    `const SUB_TN: u32 = ${subgroupTiles[1]}u;`,
    `const SG_X: u32 = ${subgroups[0]}u;`,
    `const SG_Y: u32 = ${subgroups[1]}u;`,
    `const TILE_M: u32 = ${tiles.tileM}u;`,
    `const TILE_N: u32 = ${tiles.tileN}u;`,
    `const TILE_K: u32 = ${tiles.tileK}u;`,
    `const WG_SIZE: u32 = ${tiles.workgroupX}u;`,
    `alias T = ${T};`,
    toT,
  ].join('\n');
  const f16 = T === 'f16' ? 'enable f16;\n' : '';
  if (emulate) {
    return `${f16}${constants}
const SG_WIDTH: u32 = ${Math.max(1, subgroupMaxSize)}u; // the emulated subgroup's lanes
struct Left { v: array<f32, SM_M * SM_K> }   // [row][k]
struct Right { v: array<f32, SM_K * SM_N> }  // [k][column]
struct Result { v: array<f32, SM_M * SM_N> } // [row][column]
fn loadLeft(offset: u32) -> Left {
  var m: Left;
  for (var r = 0u; r < SM_M; r++) {
    for (var c = 0u; c < SM_K; c++) {
      m.v[r * SM_K + c] = f32(tileA[offset + r * TILE_K + c]);
    }
  }
  return m;
}
fn loadRight(offset: u32) -> Right {
  var m: Right;
  for (var r = 0u; r < SM_K; r++) {
    for (var c = 0u; c < SM_N; c++) {
      m.v[r * SM_N + c] = f32(tileB[offset + r * TILE_N + c]);
    }
  }
  return m;
}
fn mma(a: Left, b: Right, c: Result) -> Result {
  var d = c;
  for (var r = 0u; r < SM_M; r++) {
    for (var n = 0u; n < SM_N; n++) {
      var s = d.v[r * SM_N + n];
      for (var k = 0u; k < SM_K; k++) {
        s += a.v[r * SM_K + k] * b.v[k * SM_N + n];
      }
      d.v[r * SM_N + n] = s;
    }
  }
  return d;
}
fn storeResult(offset: u32, lane: u32, c: Result) {
  if (lane == 0u) {
    for (var i = 0u; i < SM_M * SM_N; i++) {
      scratch[offset + i] = c.v[i];
    }
  }
}
`;
  }
  return `enable chromium_experimental_subgroup_matrix;
enable subgroups;
${f16}diagnostic(off, chromium_experimental.subgroup_matrix_uniformity);
${constants}
alias Left = subgroup_matrix_left<T, ${K}, ${M}>;
alias Right = subgroup_matrix_right<T, ${N}, ${K}>;
alias Result = subgroup_matrix_result<f32, ${N}, ${M}>;
fn loadLeft(offset: u32) -> Left {
  return subgroupMatrixLoad<Left>(&tileA, offset, false, TILE_K);
}
fn loadRight(offset: u32) -> Right {
  return subgroupMatrixLoad<Right>(&tileB, offset, false, TILE_N);
}
fn mma(a: Left, b: Right, c: Result) -> Result {
  return subgroupMatrixMultiplyAccumulate(a, b, c);
}
fn storeResult(offset: u32, lane: u32, c: Result) {
  subgroupMatrixStore(&scratch, offset, c, false, SM_N);
}
`;
}

/** matmul.matrix.wgsl with the subgroup size taken from the builtin, or fixed when emulated. */
export function matrixCore(core: string, emulate: boolean): string {
  return emulate
    ? core.replace('/*SUBGROUP_SIZE_PARAM*/', '').replace('/*SUBGROUP_SIZE_LET*/', 'let sgSize = SG_WIDTH;')
    : core
        .replace('/*SUBGROUP_SIZE_PARAM*/', '@builtin(subgroup_size) sgSize: u32,')
        .replace('/*SUBGROUP_SIZE_LET*/', '');
}
