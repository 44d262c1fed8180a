/**
 * ONNX export of the Shoal GPT, exactly as the engine computes it (packages/model/src/cpu/gpt.ts
 * and the kernels' CPU references in packages/gpu, whose constants are imported here):
 *
 *   x = wte[input_ids] + wpe[0 … T)                                    (B, T, C)
 *   per block:  x += c_proj(attention(c_attn(LN₁(x))));  x += mlp(LN₂(x))
 *     LayerNorm: biased variance, ε = LAYERNORM_EPS (1e-5)
 *     attention: causal, softmax(q·kᵀ / √hs) · v per head, hs = C / n_head
 *     mlp: c_proj(GELU(c_fc(x))), GELU the tanh approximation (GELU_SCALE, GELU_CUBIC)
 *   logits = LN_f(x) · wteᵀ  (tied head, no bias)                        (B, T, V)
 *
 * Input `input_ids` int64 [batch, seq], output `logits` float32 [batch, seq, vocab]; batch and
 * seq are dynamic, seq ≤ block_size. A longer seq makes onnxruntime fail (the positions run past
 * wpe) with a message about broadcasting; OnnxSampler checks first and says it plainly.
 * Runs in the browser and in Node: no I/O, returns the file's bytes.
 *
 * Linear weights are stored transposed, [in, out], named `<nanoGPT name>_t`, so each linear
 * layer is one MatMul + Add, as exporters from PyTorch write it. wte is stored once, as nanoGPT
 * names and shapes it; the head reads it through a Transpose node (runtimes fold it).
 */
import { GELU_CUBIC, GELU_SCALE, LAYERNORM_EPS } from '@shoal/gpu';
import {
  buildLayout,
  configMetadata,
  type GptConfig,
  type ParamLayout,
  type TensorSpec,
  validateConfig,
} from '@shoal/model';
import { type Attribute, float, floatTensor, GraphBuilder, int, ints } from './graph.ts';
import { DataType, encodeModel, type ModelMessage } from './proto.ts';

/** The opsets we write. 17: LayerNormalization exists, GELU from primitives; 20: the Gelu op. */
export const SUPPORTED_OPSETS = [17, 20] as const;
export type Opset = (typeof SUPPORTED_OPSETS)[number];
export const DEFAULT_OPSET: Opset = 17;

/** The IR version that came with each opset (onnx/docs/Versioning.md). */
const IR_VERSION: Record<Opset, number> = { 17: 8, 20: 9 };

/** The most negative float32: masked scores, so exp(score − max) is exactly 0 (as torch.finfo.min). */
const MASKED_SCORE = -3.4028234663852886e38;

export interface ExportOptions {
  /** 17 (default) or 20. */
  opset?: number;
  /** ModelProto.producer_version. */
  producerVersion?: string;
  /** Extra metadata_props, beside the config. */
  metadata?: Record<string, string>;
}

export function isSupportedOpset(opset: number): opset is Opset {
  return (SUPPORTED_OPSETS as readonly number[]).includes(opset);
}

/** The bytes of an .onnx file computing the model's logits. Throws on a bad config, params or opset. */
export function exportOnnx(config: GptConfig, params: Float32Array, options: ExportOptions = {}): Uint8Array {
  return encodeModel(buildModel(config, params, options));
}

/** The ModelProto as a plain object (exportOnnx serialises it). */
export function buildModel(config: GptConfig, params: Float32Array, options: ExportOptions = {}): ModelMessage {
  const opset = options.opset ?? DEFAULT_OPSET;
  if (!isSupportedOpset(opset))
    throw new RangeError(`ONNX opset ${opset} is not supported: choose ${SUPPORTED_OPSETS.join(' or ')}`);
  validateConfig(config);
  const layout = buildLayout(config);
  if (params.length !== layout.size)
    throw new RangeError(`params have ${params.length} values, this config needs ${layout.size}`);
  const { nLayer, nHead, nEmbd: C, blockSize, vocabSize: V } = config;
  const g = new GraphBuilder('shoal_gpt2');
  const weights = new Weights(g, layout, params);
  const model: Model = { g, weights, opset, config };

  const inputIds = g.input('input_ids', DataType.INT64, ['batch', 'seq'], 'token ids in [0, vocab), seq ≤ block_size');
  const { positions, mask } = positionsAndMask(g, inputIds);
  const wte = weights.raw('transformer.wte.weight');
  const tokens = g.node('Gather', [wte, inputIds], { axis: int(0) }, 'wte_lookup'); // (B, T, C)
  const wpe = weights.raw('transformer.wpe.weight');
  const positional = g.node('Gather', [wpe, positions], { axis: int(0) }, 'wpe_lookup'); // (T, C)
  let x = g.node('Add', [tokens, positional], {}, 'embedding'); // (B, T, C)
  for (let l = 0; l < nLayer; l++) {
    const h = `transformer.h.${l}`;
    x = g.node('Add', [x, attention(model, layerNorm(model, x, `${h}.ln_1`), mask, `${h}.attn`)], {}, `${h}.residual2`);
    x = g.node('Add', [x, mlp(model, layerNorm(model, x, `${h}.ln_2`), `${h}.mlp`)], {}, `${h}.residual3`);
  }
  const lnf = layerNorm(model, x, 'transformer.ln_f');
  // Tied head: logits = ln_f · wteᵀ, no bias.
  const head = g.node('Transpose', [wte], { perm: ints([1, 0]) }, 'lm_head'); // (C, V)
  const logits = g.node('MatMul', [lnf, head], {}, 'lm_head.matmul', 'logits');
  g.output(logits, DataType.FLOAT, ['batch', 'seq', V], 'unnormalised next-token scores');

  const metadata = { ...configMetadata(config), ...options.metadata };
  return {
    irVersion: IR_VERSION[opset],
    opsetImport: [{ domain: '', version: opset }],
    producerName: 'shoal',
    producerVersion: options.producerVersion ?? '0.1.0',
    docString: `Shoal GPT-2: ${nLayer} layers, ${nHead} heads, n_embd ${C}, block_size ${blockSize}, vocab ${V}`,
    graph: g.build(),
    metadataProps: Object.entries(metadata).map(([key, value]) => ({ key, value })),
  };
}

/** What the layer builders share. */
interface Model {
  g: GraphBuilder;
  weights: Weights;
  opset: Opset;
  config: GptConfig;
}

/**
 * Positions 0 … T−1 and the additive causal mask (T, T), from the run-time sequence length:
 * 0 where key ≤ query, MASKED_SCORE after it.
 */
function positionsAndMask(g: GraphBuilder, inputIds: string): { positions: string; mask: string } {
  const one = g.int64('one', [1], []);
  const seqLength = g.node('Gather', [g.node('Shape', [inputIds]), one], { axis: int(0) }, 'seq_length');
  const positions = g.node('Range', [g.int64('zero', [0], []), seqLength, one], {}, 'positions');
  const seqVector = g.node('Unsqueeze', [seqLength, g.int64('axes_0', [0])], {}, 'seq_vector');
  const maskShape = g.node('Concat', [seqVector, seqVector], { axis: int(0) }, 'mask_shape');
  const fill = { tensor: floatTensor('masked_score', [1], Float32Array.of(MASKED_SCORE)) };
  const masked = g.node('ConstantOfShape', [maskShape], { value: fill }, 'masked');
  // Trilu(upper, k = 1) keeps the strictly upper triangle (keys after the query), zeroes the rest.
  const mask = g.node('Trilu', [masked, one], { upper: int(1) }, 'causal_mask');
  return { positions, mask };
}

/** Causal self-attention of the block `prefix` (…attn) on x (B, T, C), before the residual add. */
function attention({ g, weights, config }: Model, x: string, mask: string, prefix: string): string {
  const { nHead: NH, nEmbd: C } = config;
  const hs = C / NH;
  const op = (opType: string, inputs: string[], name: string, attrs: Record<string, Attribute> = {}) =>
    g.node(opType, inputs, attrs, `${prefix}.${name}`);
  const qkv = linear(g, weights, x, `${prefix}.c_attn`); // (B, T, 3C)
  const split = g.int64('qkv_split', [C, C, C]);
  const [q, k, v] = g.nodeN('Split', [qkv, split], { axis: int(2) }, `${prefix}.split`, 3) as [string, string, string];
  const headShape = g.int64('head_shape', [0, 0, NH, hs]); // 0 keeps B and T
  const heads = (value: string, name: string, perm: number[]) =>
    op('Transpose', [op('Reshape', [value, headShape], `${name}_heads`)], `${name}_t`, { perm: ints(perm) });
  const qh = heads(q, 'q', [0, 2, 1, 3]); // (B, NH, T, hs)
  const kh = heads(k, 'k', [0, 2, 3, 1]); // (B, NH, hs, T)
  const vh = heads(v, 'v', [0, 2, 1, 3]); // (B, NH, T, hs)
  // As the engine: q·k summed, then scaled by 1/√hs, then the softmax over keys 0 … t.
  const scale = g.scalar('score_scale', 1 / Math.sqrt(hs));
  const scores = op('Add', [op('Mul', [op('MatMul', [qh, kh], 'qk'), scale], 'scaled'), mask], 'masked');
  const probs = op('Softmax', [scores], 'softmax', { axis: int(-1) }); // (B, NH, T, T)
  const y = op('Transpose', [op('MatMul', [probs, vh], 'pv')], 'y_t', { perm: ints([0, 2, 1, 3]) }); // (B, T, NH, hs)
  const merged = op('Reshape', [y, g.int64('merged_shape', [0, 0, C])], 'y'); // (B, T, C)
  return linear(g, weights, merged, `${prefix}.c_proj`);
}

/** c_proj(GELU(c_fc(x))) of the block `prefix` (…mlp). */
function mlp({ g, weights, opset }: Model, x: string, prefix: string): string {
  const fc = linear(g, weights, x, `${prefix}.c_fc`); // (B, T, 4C)
  return linear(g, weights, gelu(g, fc, opset, `${prefix}.gelu`), `${prefix}.c_proj`);
}

/** The checkpoint's tensors as initializers, each added once, on first use. */
class Weights {
  private readonly added = new Map<string, string>();

  constructor(
    private readonly g: GraphBuilder,
    private readonly layout: ParamLayout,
    private readonly params: Float32Array,
  ) {}

  private spec(name: string): TensorSpec {
    const spec = this.layout.byName.get(name);
    if (!spec) throw new Error(`layout has no ${name}`);
    return spec;
  }

  /** The tensor as nanoGPT stores it. */
  raw(name: string): string {
    const known = this.added.get(name);
    if (known) return known;
    const spec = this.spec(name);
    const values = this.params.subarray(spec.offset, spec.offset + spec.size);
    return this.remember(name, this.g.initializer(floatTensor(name, spec.shape, values)));
  }

  /** A linear weight [out, in] stored as [in, out] for MatMul. */
  transposed(name: string): string {
    const key = `${name}_t`;
    const known = this.added.get(key);
    if (known) return known;
    const { shape, offset } = this.spec(name);
    const [out, inp] = shape as [number, number];
    const values = new Float32Array(out * inp);
    for (let o = 0; o < out; o++) {
      for (let i = 0; i < inp; i++) values[i * out + o] = this.params[offset + o * inp + i] as number;
    }
    const doc = `${name} transposed to [in, out]`;
    return this.remember(key, this.g.initializer(floatTensor(key, [inp, out], values, doc)));
  }

  private remember(key: string, name: string): string {
    this.added.set(key, name);
    return name;
  }
}

/** x · Wᵀ + b for the nanoGPT linear layer `prefix` (weight [out, in], bias [out]). */
function linear(g: GraphBuilder, weights: Weights, x: string, prefix: string): string {
  const product = g.node('MatMul', [x, weights.transposed(`${prefix}.weight`)], {}, `${prefix}.matmul`);
  return g.node('Add', [product, weights.raw(`${prefix}.bias`)], {}, prefix);
}

/** LayerNormalization over channels, ε as the engine's. */
function layerNorm({ g, weights }: Model, x: string, prefix: string): string {
  const inputs = [x, weights.raw(`${prefix}.weight`), weights.raw(`${prefix}.bias`)];
  return g.node('LayerNormalization', inputs, { axis: int(-1), epsilon: float(LAYERNORM_EPS) }, prefix);
}

/** GPT-2's tanh GELU, ½·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))): the Gelu op from opset 20. */
function gelu(g: GraphBuilder, x: string, opset: Opset, prefix: string): string {
  if (opset >= 20) return g.node('Gelu', [x], { approximate: { string: 'tanh' } }, prefix);
  const op = (opType: string, inputs: string[], name: string) => g.node(opType, inputs, {}, `${prefix}.${name}`);
  const cube = op('Mul', [op('Mul', [x, x], 'square'), x], 'cube');
  const inner = op('Add', [x, op('Mul', [cube, g.scalar('gelu_cubic', GELU_CUBIC)], 'cubic')], 'inner');
  const tanh = op('Tanh', [op('Mul', [inner, g.scalar('gelu_scale', GELU_SCALE)], 'scaled')], 'tanh');
  const half = op('Mul', [x, g.scalar('half', 0.5)], 'half');
  return g.node('Mul', [half, op('Add', [tanh, g.scalar('one_f', 1)], 'one_plus')], {}, prefix);
}
