import {
  AttentionKernels,
  attentionStrategyFor,
  CANDIDATES,
  CrossEntropyKernels,
  choiceFromEnvironment,
  chooseMatrixConfig,
  configName,
  EmbeddingKernels,
  GeluKernels,
  gateMatmulPath,
  isSoftwareDevice,
  LayernormKernels,
  type LayerShape,
  type MatmulConfig,
  MatmulKernels,
  type MatmulPrecision,
  matrixPrecisionName,
  precisionFromEnvironment,
  ResidualKernels,
  SUBGROUP_MATRIX_FEATURE,
  subgroupMatrixConfigs,
  type TileCache,
  type TuneOptions,
  tuneMatmul,
  VectorKernels,
} from '@shoal/gpu';
import type { GptConfig } from '../config.ts';

export { MATMUL_PRECISIONS, type MatmulPrecision } from '@shoal/gpu';

/**
 * How the matmul family is chosen: 'tiled' is the fixed kernel; 'search' is the per-adapter tile
 * search (tune.ts), timed at the model's largest matmul and cached per adapter and shape class.
 */
export type MatmulChoice = 'tiled' | 'search';

/** The largest relative error the f16 path may show against the f32 path at start-up. */
export const F16_GATE_TOLERANCE = 1e-2;

export interface GptKernelOptions {
  /** The model's largest matmul (gptLayerShape): the shape the search times. Without it: tiled. */
  layer?: LayerShape;
  /** Default: SHOAL_MATMUL, else 'search' on a hardware adapter given `layer`, else 'tiled'. */
  matmul?: MatmulChoice;
  /** The sequence length it trains at: picks the attention strategy (attentionStrategyFor). */
  sequence?: number;
  /** Default: SHOAL_PRECISION, else 'f32'. */
  precision?: MatmulPrecision;
  /** Where the search keeps its choice (default: tune.ts's, see setDefaultTileCache). */
  tileCache?: TileCache;
  /** The search's budget and candidates (tests: a tiny budget, few candidates). */
  search?: Pick<TuneOptions, 'budgetMs' | 'sampleMs' | 'candidates'>;
}

/** The matmul config a GptKernels runs, and how it came to be: fixed (tiled), or the search's. */
export interface GptMatmulConfig {
  config: MatmulConfig;
  source: 'fixed' | 'cache' | 'search';
  precision: MatmulPrecision;
  /** On tensor cores: the subgroup-matrix configuration, e.g. 'f16×f16→f32 16×16×16'. */
  matrix?: string;
  /** The f16 path: the gate's verdict, or why the tensor cores are not used. */
  note?: string;
}

/** The kernel families a model binds, compiled once per device and head size; shareable between models. */
export interface GptKernels {
  readonly headSize: number;
  /** Which matmul kernel and tile the family runs (describeMatmul prints it). */
  readonly matmulConfig: GptMatmulConfig;
  matmul: MatmulKernels;
  layernorm: LayernormKernels;
  attention: AttentionKernels;
  gelu: GeluKernels;
  residual: ResidualKernels;
  embedding: EmbeddingKernels;
  crossEntropy: CrossEntropyKernels;
  vector: VectorKernels;
}

/** The model's largest matmul for batches of B × T tokens: the MLP's C → 4C, N = B·T rows. */
export function gptLayerShape(config: Pick<GptConfig, 'nEmbd'>, B: number, T: number): LayerShape {
  return { N: B * T, C: config.nEmbd, OC: 4 * config.nEmbd };
}

/** One short phrase for an engine line, e.g. 'matmul register 8x8 k8 (searched)'. */
export function describeMatmul({ config, source, precision, matrix, note }: GptMatmulConfig): string {
  if (matrix) return `matmul on tensor cores, ${matrix}${note ? ` (${note})` : ''}`;
  const how = source === 'search' ? 'searched' : source === 'cache' ? 'cached search' : 'fixed';
  const operands = precision === 'f16' ? `, f16 operands${note ? ` (${note})` : ''}` : '';
  return `matmul ${configName(config)} (${how})${operands}`;
}

/** SHOAL_MATMUL in Node (tiled or search) overrides the default, e.g. to run a model test on the search. */
const choiceOfEnvironment = () => choiceFromEnvironment<MatmulChoice>('SHOAL_MATMUL', ['tiled', 'search']);

/**
 * Software adapters (lavapipe, SwiftShader) keep the fixed tiled kernel: there the search costs
 * a shader compile per candidate, and the register kernels ran within noise of tiled on lavapipe.
 */
function matmulChoice(device: GPUDevice, options: GptKernelOptions): MatmulChoice {
  const chosen = options.matmul ?? choiceOfEnvironment();
  if (chosen) return chosen;
  return options.layer && !isSoftwareDevice(device) ? 'search' : 'tiled';
}

// Where a browser lacks GPUDevice.adapterInfo the search still runs; its cache key names no adapter.
const UNKNOWN_ADAPTER = { vendor: '', architecture: '', device: '', description: '' } as GPUAdapterInfo;

type Chosen = { matmul: MatmulKernels; matmulConfig: GptMatmulConfig };

/** The fixed kernel, tiled 16×16 k16 (MatmulKernels' default and the search's fallback). */
async function fixedMatmul(device: GPUDevice): Promise<Chosen> {
  const config = CANDIDATES[0] as MatmulConfig;
  return {
    matmul: await MatmulKernels.create(device, config),
    matmulConfig: { config, source: 'fixed', precision: 'f32' },
  };
}

/**
 * f16 operands: the subgroup-matrix kernel where the device has the feature, a usable
 * configuration, and the kernel passes the gate against the f32 path on this device; else the
 * tiled kernel rounding its operands to f16, with the reason.
 */
async function f16Matmul(device: GPUDevice): Promise<Chosen> {
  const config = CANDIDATES[0] as MatmulConfig;
  let note: string;
  if (!device.features.has(SUBGROUP_MATRIX_FEATURE)) {
    note = `no tensor cores: the device lacks ${SUBGROUP_MATRIX_FEATURE}`;
  } else {
    const info = (device as GPUDevice & { adapterInfo?: GPUAdapterInfo }).adapterInfo;
    const chosen = chooseMatrixConfig(info ? subgroupMatrixConfigs(info) : [], device.features);
    if (!chosen.config) {
      note = `no tensor cores: ${chosen.refused.join('; ')}`;
    } else {
      const [candidate, reference] = await Promise.all([
        MatmulKernels.create(device, { matrix: chosen.config }).catch((error: unknown) => error as Error),
        MatmulKernels.create(device, config),
      ]);
      try {
        if (candidate instanceof Error) {
          note = `no tensor cores: ${candidate.message.split('\n')[0]}`;
        } else {
          const gate = await gateMatmulPath(device, candidate, reference, { tolerance: F16_GATE_TOLERANCE });
          if (gate.accepted) {
            const matrix = matrixPrecisionName(chosen.config);
            return {
              matmul: candidate,
              matmulConfig: { config, source: 'fixed', precision: 'f16', matrix, note: `gate ${gate.message}` },
            };
          }
          candidate.destroy();
          note = `no tensor cores: the start-up gate ${gate.message}`;
        }
      } finally {
        reference.destroy();
      }
    }
  }
  const matmul = await MatmulKernels.create(device, { ...config, roundOperands: 'f16' });
  return { matmul, matmulConfig: { config, source: 'fixed', precision: 'f16', note } };
}

async function searchedMatmul(device: GPUDevice, layer: LayerShape, options: GptKernelOptions): Promise<Chosen> {
  const info = (device as GPUDevice & { adapterInfo?: GPUAdapterInfo }).adapterInfo ?? UNKNOWN_ADAPTER;
  const result = await tuneMatmul(device, info, { ...options.search, shape: layer, cache: options.tileCache });
  const source = result.source === 'search' ? 'search' : 'cache';
  return { matmul: result.kernels, matmulConfig: { config: result.config, source, precision: 'f32' } };
}

/**
 * Compiles the families for `headSize`. The matmul family is the fixed tiled kernel or, on a
 * hardware adapter given the model's layer shape, the tile search's pick (matmulChoice).
 */
export async function createGptKernels(
  device: GPUDevice,
  headSize: number,
  options: GptKernelOptions = {},
): Promise<GptKernels> {
  const { layer } = options;
  const precision = options.precision ?? precisionFromEnvironment() ?? 'f32';
  const choice = matmulChoice(device, options);
  if (choice === 'search' && !layer && options.matmul === 'search') {
    throw new RangeError('createGptKernels: the matmul search needs a layer shape (gptLayerShape)');
  }
  // The search runs alone, before the other families compile: their compilation would skew its timings.
  // SHOAL_MATMUL=search without a layer shape (a caller that does not know B·T) stays tiled.
  // The f16 path's gate runs alone too (its comparison does not time anything, but stays simple).
  const searched =
    precision === 'f16'
      ? await f16Matmul(device)
      : choice === 'search' && layer
        ? await searchedMatmul(device, layer, options)
        : null;
  const [{ matmul, matmulConfig }, layernorm, attention, gelu, residual, embedding, crossEntropy, vector] =
    await Promise.all([
      searched ?? fixedMatmul(device),
      LayernormKernels.create(device),
      AttentionKernels.create(device, headSize, attentionStrategyFor(device, headSize, options.sequence)),
      GeluKernels.create(device),
      ResidualKernels.create(device),
      EmbeddingKernels.create(device),
      CrossEntropyKernels.create(device),
      VectorKernels.create(device),
    ]);
  return { headSize, matmulConfig, matmul, layernorm, attention, gelu, residual, embedding, crossEntropy, vector };
}
