/**
 * The model's shape. GPT-2 as in nanoGPT / llm.c: learned position embeddings, pre-LayerNorm
 * blocks, tanh GELU, biases everywhere, weights tied between wte and the LM head.
 */
export interface GptConfig {
  nLayer: number;
  nHead: number;
  /** Channels C; a multiple of nHead. */
  nEmbd: number;
  /** Longest sequence T the position embedding covers. */
  blockSize: number;
  /** 256: byte-level tokens. */
  vocabSize: number;
}

const BYTE_VOCAB = 256;

/**
 * Named presets (the names are part of the CLI and room interface). Head size 16–88; sizes picked
 * for the parameter counts in their names, with C a multiple of 64 where it matters for tiles.
 */
export const PRESETS = {
  /** ≈0.12M parameters: unit tests and CI convergence runs on a software adapter. */
  nano: { nLayer: 2, nHead: 4, nEmbd: 64, blockSize: 64, vocabSize: BYTE_VOCAB },
  /** ≈0.84M. */
  tiny: { nLayer: 4, nHead: 4, nEmbd: 128, blockSize: 128, vocabSize: BYTE_VOCAB },
  /** ≈10.8M. */
  small: { nLayer: 6, nHead: 6, nEmbd: 384, blockSize: 256, vocabSize: BYTE_VOCAB },
  /** ≈48M; head size 88. */
  base: { nLayer: 8, nHead: 8, nEmbd: 704, blockSize: 512, vocabSize: BYTE_VOCAB },
  /**
   * ≈86M: GPT-2 small's shape (12 layers, 12 heads, 768 wide, 1,024 tokens of context) on bytes,
   * for volunteers with a real GPU; the WebGPU engine needs ≈6.3 GiB for it at batch 8 × 1,024
   * (gpu/memory.ts), checked against the adapter's limits before a volunteer trains.
   */
  gpt2: { nLayer: 12, nHead: 12, nEmbd: 768, blockSize: 1024, vocabSize: BYTE_VOCAB },
} as const satisfies Record<string, GptConfig>;

export type PresetName = keyof typeof PRESETS;

function isPresetName(name: string): name is PresetName {
  return Object.hasOwn(PRESETS, name);
}

export function presetConfig(name: string): GptConfig {
  if (!isPresetName(name)) {
    throw new Error(`Unknown preset "${name}": choose one of ${Object.keys(PRESETS).join(', ')}`);
  }
  return { ...PRESETS[name] };
}

/** Throws a one-line error naming the first field that makes no sense. */
export function validateConfig(config: GptConfig): GptConfig {
  for (const key of ['nLayer', 'nHead', 'nEmbd', 'blockSize', 'vocabSize'] as const) {
    const value = config[key];
    if (!Number.isInteger(value) || value < 1)
      throw new Error(`Model config: ${key} must be a positive integer, got ${value}`);
  }
  if (config.nEmbd % config.nHead !== 0) {
    throw new Error(`Model config: n_embd ${config.nEmbd} is not divisible by n_head ${config.nHead}`);
  }
  return config;
}

/**
 * FLOPs of one training step (forward + backward) on B×T tokens: 6 per parameter per token for
 * the matmuls (wpe and LayerNorms excluded, the tied head included), plus causal attention
 * (QKᵀ and PV over the lower triangle, 2 FLOPs per multiply-add, ×3 for forward + backward).
 */
export function trainingStepFlops(config: GptConfig, B: number, T: number): number {
  const { nLayer: L, nEmbd: C, vocabSize: V } = config;
  const matmulParams = L * 12 * C * C + V * C;
  const attention = L * 2 * B * C * T * (T + 1);
  return 6 * matmulParams * B * T + 3 * attention;
}
