/**
 * Runs an exported model in onnxruntime-web (its WebAssembly backend, in the browser and in
 * Node) for logits and text sampling. Inputs are checked here, so a bad one gets a plain error
 * instead of onnxruntime's message from deep inside a kernel.
 *
 * Node: the `onnxruntime-web/wasm` entry finds its .wasm beside itself in node_modules and runs
 * single-threaded there (no cross-origin isolation); nothing needs configuring. Browser: bundlers
 * emit the .wasm as an asset; pass `wasmPaths` when it is served from elsewhere.
 */
import * as ort from 'onnxruntime-web';
import { readModelMetadata } from './proto.ts';

/** What a sampler needs to know about the model it runs. */
export interface ModelShape {
  blockSize: number;
  vocabSize: number;
}

export interface SamplerOptions {
  /** The model's block_size and vocab_size; read from the file's metadata when left out. */
  shape?: ModelShape;
  /** onnxruntime-web's WebAssembly threads (ort.env.wasm.numThreads); left as it is when unset. */
  numThreads?: number;
  /** Where onnxruntime-web's .wasm files are served (ort.env.wasm.wasmPaths); left as it is when unset. */
  wasmPaths?: string;
}

export interface GenerateOptions {
  /** Softmax temperature; 0 picks the most likely token (greedy). Default 1. */
  temperature?: number;
  /** Sample among the k most likely tokens only. Default: all. */
  topK?: number;
  /** Uniform numbers in [0, 1); default Math.random. Pass a seeded one for repeatable text. */
  random?: () => number;
}

/** block_size and vocab_size from an exported model's metadata_props. */
export function modelShapeOf(model: Uint8Array): ModelShape {
  const metadata = readModelMetadata(model);
  const field = (key: string) => {
    const value = Number(metadata[key]);
    if (!Number.isInteger(value) || value < 1)
      throw new Error(`ONNX model has no ${key} in its metadata: pass the model's shape`);
    return value;
  };
  return { blockSize: field('block_size'), vocabSize: field('vocab_size') };
}

export class OnnxSampler {
  private constructor(
    private readonly session: ort.InferenceSession,
    readonly shape: ModelShape,
  ) {}

  /** Loads an exported model (the bytes exportOnnx returned) into an InferenceSession. */
  static async create(model: Uint8Array, options: SamplerOptions = {}): Promise<OnnxSampler> {
    const shape = options.shape ?? modelShapeOf(model);
    if (options.numThreads !== undefined) ort.env.wasm.numThreads = options.numThreads;
    if (options.wasmPaths !== undefined) ort.env.wasm.wasmPaths = options.wasmPaths;
    const session = await ort.InferenceSession.create(model, { executionProviders: ['wasm'] });
    if (!session.inputNames.includes('input_ids') || !session.outputNames.includes('logits'))
      throw new Error(
        `ONNX model has inputs [${session.inputNames}] and outputs [${session.outputNames}], expected input_ids and logits`,
      );
    return new OnnxSampler(session, shape);
  }

  /**
   * Logits, (batch, T, vocab) row-major, for `batch` rows of T tokens each (tokens.length =
   * batch·T). Throws a RangeError naming the problem when T > block_size or a token is outside
   * [0, vocab).
   */
  async logits(tokens: ArrayLike<number>, batch = 1): Promise<Float32Array> {
    const { blockSize, vocabSize } = this.shape;
    if (!Number.isInteger(batch) || batch < 1) throw new RangeError(`batch must be a positive integer, got ${batch}`);
    const T = tokens.length / batch;
    if (!Number.isInteger(T) || T < 1)
      throw new RangeError(`${tokens.length} tokens do not make ${batch} rows of at least one token`);
    if (T > blockSize) throw new RangeError(`sequence length ${T} exceeds the model's block_size ${blockSize}`);
    const ids = new BigInt64Array(tokens.length);
    for (let i = 0; i < tokens.length; i++) {
      const token = tokens[i] as number;
      if (!Number.isInteger(token) || token < 0 || token >= vocabSize)
        throw new RangeError(`token ${token} at position ${i} is outside [0, ${vocabSize})`);
      ids[i] = BigInt(token);
    }
    const input = new ort.Tensor('int64', ids, [batch, T]);
    const outputs = await this.session.run({ input_ids: input });
    const logits = outputs.logits as ort.Tensor;
    try {
      return new Float32Array(logits.data as Float32Array);
    } finally {
      logits.dispose();
    }
  }

  /**
   * Continues `prompt` by `count` tokens, as nanoGPT's generate: the context is cropped to the
   * last block_size tokens, and each token is drawn from softmax(logits / temperature) over the
   * top k. Returns the new tokens only.
   */
  async generate(prompt: readonly number[], count: number, options: GenerateOptions = {}): Promise<number[]> {
    if (prompt.length === 0) throw new RangeError('generate needs a prompt of at least one token');
    const { temperature = 1, topK = this.shape.vocabSize, random = Math.random } = options;
    if (!(temperature >= 0)) throw new RangeError(`temperature must be ≥ 0, got ${temperature}`);
    const context = [...prompt];
    const generated: number[] = [];
    for (let i = 0; i < count; i++) {
      const window = context.slice(-this.shape.blockSize);
      const logits = await this.logits(window);
      const last = logits.subarray((window.length - 1) * this.shape.vocabSize);
      const next = temperature === 0 ? argmax(last) : sampleTopK(last, temperature, topK, random);
      context.push(next);
      generated.push(next);
    }
    return generated;
  }

  async release(): Promise<void> {
    await this.session.release();
  }
}

/** One-shot: load, compute the logits of `batch` rows of tokens, release. */
export async function runLogits(
  model: Uint8Array,
  tokens: ArrayLike<number>,
  batch = 1,
  options: SamplerOptions = {},
): Promise<Float32Array> {
  const sampler = await OnnxSampler.create(model, options);
  try {
    return await sampler.logits(tokens, batch);
  } finally {
    await sampler.release();
  }
}

export function argmax(values: ArrayLike<number>): number {
  let best = 0;
  for (let i = 1; i < values.length; i++) if ((values[i] as number) > (values[best] as number)) best = i;
  return best;
}

/** Draws an index from softmax(logits / temperature) restricted to the k largest logits. */
export function sampleTopK(logits: ArrayLike<number>, temperature: number, k: number, random: () => number): number {
  const order = Array.from({ length: logits.length }, (_, i) => i);
  order.sort((a, b) => (logits[b] as number) - (logits[a] as number));
  const kept = order.slice(0, Math.max(1, Math.min(k, order.length)));
  const top = logits[kept[0] as number] as number;
  const weights = kept.map((i) => Math.exp(((logits[i] as number) - top) / temperature));
  let u = random() * weights.reduce((a, b) => a + b, 0);
  for (let j = 0; j < kept.length; j++) {
    u -= weights[j] as number;
    if (u < 0) return kept[j] as number;
  }
  return kept[kept.length - 1] as number;
}
