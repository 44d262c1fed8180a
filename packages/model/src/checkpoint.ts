/**
 * Checkpoints as two files (design: "Checkpoint"):
 * - weights, `NAME.safetensors`: F32 tensors with nanoGPT names and [out, in] shapes, the config
 *   in `__metadata__` as strings. Loads anywhere nanoGPT-shaped weights load.
 * - run state, `NAME.state.safetensors`: AdamW moments (and, in a room, the outer momentum) as
 *   flat logical vectors, plus a JSON `state` entry in `__metadata__` with the counters, data
 *   position and run config. Weights + state resume a run exactly.
 */
import { type GptConfig, validateConfig } from './config.ts';
import { buildLayout, type ParamLayout } from './layout.ts';
import { CheckpointError, readSafetensors, writeSafetensors } from './safetensors.ts';

const WTE = 'transformer.wte.weight';
const WPE = 'transformer.wpe.weight';

export function configMetadata(config: GptConfig): Record<string, string> {
  return {
    n_layer: String(config.nLayer),
    n_head: String(config.nHead),
    n_embd: String(config.nEmbd),
    block_size: String(config.blockSize),
    vocab_size: String(config.vocabSize),
    format: 'shoal-gpt2',
  };
}

export function encodeWeights(layout: ParamLayout, params: Float32Array): Uint8Array {
  if (params.length !== layout.size)
    throw new CheckpointError(`params have ${params.length} values, layout needs ${layout.size}`);
  const tensors = layout.tensors.map((t) => ({
    name: t.name,
    shape: t.shape,
    data: params.subarray(t.offset, t.offset + t.size),
  }));
  return writeSafetensors(tensors, configMetadata(layout.config));
}

/** nanoGPT's causal-mask buffers are not parameters. */
const isMaskBuffer = (name: string) => /^transformer\.h\.\d+\.attn\.bias$/.test(name);

function metadataInt(metadata: Record<string, string>, key: string): number | undefined {
  const raw = metadata[key];
  if (raw === undefined) return undefined;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 1)
    throw new CheckpointError(`__metadata__.${key} = "${raw}" is not a positive integer`);
  return value;
}

/**
 * Reads weights written by Shoal or by another tool with nanoGPT names. The config comes from
 * `__metadata__`; where a key is missing it is inferred from shapes (n_head cannot be: pass it).
 */
export function decodeWeights(
  bytes: Uint8Array,
  options: { nHead?: number } = {},
): { config: GptConfig; params: Float32Array } {
  const { tensors, metadata } = readSafetensors(bytes, isMaskBuffer);
  const wte = tensors.get(WTE);
  const wpe = tensors.get(WPE);
  if (wte?.shape.length !== 2) throw new CheckpointError(`missing tensor ${WTE} [vocab_size, n_embd]`);
  if (wpe?.shape.length !== 2) throw new CheckpointError(`missing tensor ${WPE} [block_size, n_embd]`);
  let layers = 0;
  while (tensors.has(`transformer.h.${layers}.ln_1.weight`)) layers++;
  const nHead = metadataInt(metadata, 'n_head') ?? options.nHead;
  if (nHead === undefined)
    throw new CheckpointError('__metadata__ has no n_head and none was given (it cannot be inferred from shapes)');
  const config = {
    nLayer: metadataInt(metadata, 'n_layer') ?? layers,
    nHead,
    nEmbd: metadataInt(metadata, 'n_embd') ?? (wte.shape[1] as number),
    blockSize: metadataInt(metadata, 'block_size') ?? (wpe.shape[0] as number),
    vocabSize: metadataInt(metadata, 'vocab_size') ?? (wte.shape[0] as number),
  };
  try {
    validateConfig(config);
  } catch (error) {
    throw new CheckpointError((error as Error).message);
  }
  const layout = buildLayout(config);
  const params = new Float32Array(layout.size);
  for (const t of layout.tensors) {
    const entry = tensors.get(t.name);
    if (!entry) throw new CheckpointError(`missing tensor ${t.name} [${t.shape}]`);
    if (entry.shape.join(',') !== t.shape.join(',')) {
      throw new CheckpointError(`${t.name} has shape [${entry.shape}], expected [${t.shape}] for this config`);
    }
    params.set(entry.data, t.offset);
  }
  const head = tensors.get('lm_head.weight');
  if (head) {
    const w = params.subarray(0, layout.tensors[0]?.size);
    if (head.data.length !== w.length || head.data.some((x, i) => x !== w[i])) {
      throw new CheckpointError('lm_head.weight differs from transformer.wte.weight: only tied heads are supported');
    }
  }
  const extra = [...tensors.keys()].filter((name) => !layout.byName.has(name) && name !== 'lm_head.weight');
  if (extra.length > 0)
    throw new CheckpointError(
      `unexpected tensor ${extra[0]}${extra.length > 1 ? ` (and ${extra.length - 1} more)` : ''}`,
    );
  return { config, params };
}

/** Counters, data position and run config: whatever the trainer needs to continue exactly. */
export type RunState = Record<string, unknown>;

export function encodeState(layout: ParamLayout, vectors: Record<string, Float32Array>, state: RunState): Uint8Array {
  const tensors = Object.entries(vectors).map(([name, data]) => {
    if (data.length !== layout.size)
      throw new CheckpointError(`state vector ${name} has ${data.length} values, layout needs ${layout.size}`);
    return { name, shape: [data.length], data };
  });
  return writeSafetensors(tensors, { ...configMetadata(layout.config), state: JSON.stringify(state) });
}

export function decodeState(
  bytes: Uint8Array,
  layout: ParamLayout,
  required: string[],
): { vectors: Record<string, Float32Array>; state: RunState } {
  const { tensors, metadata } = readSafetensors(bytes);
  const expected = configMetadata(layout.config);
  for (const key of ['n_layer', 'n_head', 'n_embd', 'block_size', 'vocab_size']) {
    if (metadata[key] !== expected[key]) {
      throw new CheckpointError(`run state was written for ${key}=${metadata[key]}, the weights have ${expected[key]}`);
    }
  }
  const vectors: Record<string, Float32Array> = {};
  for (const name of required) {
    const entry = tensors.get(name);
    if (!entry) throw new CheckpointError(`run state has no ${name}`);
    if (entry.data.length !== layout.size)
      throw new CheckpointError(`run state ${name} has ${entry.data.length} values, expected ${layout.size}`);
    vectors[name] = entry.data;
  }
  let state: unknown;
  try {
    state = JSON.parse(metadata.state ?? '');
  } catch {
    throw new CheckpointError('run state has no readable `state` entry in __metadata__');
  }
  if (typeof state !== 'object' || state === null || Array.isArray(state))
    throw new CheckpointError('run state `state` is not an object');
  return { vectors, state: state as RunState };
}
