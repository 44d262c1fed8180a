// The WGSL kernel families (TS wrappers), each with its CPU reference in cpu.ts.
export * from './adamw/adamw.ts';
export * from './attention/attention.ts';
export * from './crossentropy/crossentropy.ts';
export * from './embedding/embedding.ts';
export { choiceFromEnvironment } from './environment.ts';
export * from './gelu/gelu.ts';
export * from './gradnorm/gradnorm.ts';
export * from './layernorm/layernorm.ts';
export { gateMatmulPath } from './matmul/gate.ts';
export * from './matmul/matmul.ts';
export {
  chooseMatrixConfig,
  MATMUL_PRECISIONS,
  type MatmulPrecision,
  type MatrixKernelConfig,
  matrixPrecisionName,
  precisionFromEnvironment,
  SUBGROUP_MATRIX_FEATURE,
  subgroupMatrixConfigs,
} from './matmul/matrix.ts';
export {
  CANDIDATES,
  configName,
  type LayerShape,
  type MatmulConfig,
  memoryTileCache,
  setDefaultTileCache,
  type TileCache,
  type TuneOptions,
  type TuneResult,
  tuneMatmul,
} from './matmul/tune.ts';
export * from './residual/residual.ts';
export { isSoftwareDevice } from './vector/launch.ts';
export * from './vector/vector.ts';
