/**
 * The sampling panel's settings, progress and the messages between the page and the sampling
 * worker. Types and pure functions only: the panel imports this statically, so it must stay
 * free of onnxruntime-web and the exporter.
 */
import type { GptConfig } from '@shoal/model';

/** What the user sets. */
export interface SampleSettings {
  prompt: string;
  /** Softmax temperature; 0 is greedy (the most likely byte every time). */
  temperature: number;
  /** Sample among the k most likely bytes; 0 means all of them. */
  topK: number;
  /** Bytes to generate. */
  maxNewTokens: number;
}

export const DEFAULT_SETTINGS: SampleSettings = {
  prompt: 'Call me Ishmael.',
  temperature: 0.8,
  topK: 40,
  maxNewTokens: 200,
};

export const LIMITS = {
  temperature: { min: 0, max: 5 },
  topK: { min: 0, max: 256 },
  /** The model recomputes the whole context for every byte (no KV cache): keep runs short. */
  maxNewTokens: { min: 1, max: 2000 },
  /** Prompt bytes kept: the model sees at most block_size of them anyway. */
  promptBytes: 4096,
} as const;

/** The first setting that is out of range, as a sentence for the panel; null when all are fine. */
export function settingsProblem(settings: SampleSettings): string | null {
  const { temperature, topK, maxNewTokens } = settings;
  if (!(temperature >= LIMITS.temperature.min && temperature <= LIMITS.temperature.max))
    return `Temperature must be between ${LIMITS.temperature.min} and ${LIMITS.temperature.max}.`;
  if (!Number.isInteger(topK) || topK < LIMITS.topK.min || topK > LIMITS.topK.max)
    return `Top-k must be a whole number from ${LIMITS.topK.min} (all) to ${LIMITS.topK.max}.`;
  if (
    !Number.isInteger(maxNewTokens) ||
    maxNewTokens < LIMITS.maxNewTokens.min ||
    maxNewTokens > LIMITS.maxNewTokens.max
  )
    return `Max new tokens must be a whole number from ${LIMITS.maxNewTokens.min} to ${LIMITS.maxNewTokens.max}.`;
  return null;
}

/**
 * The prompt as byte tokens for a model with `vocabSize` tokens: UTF-8, its last
 * LIMITS.promptBytes bytes, and a newline when it is empty (generation needs one token to start
 * from, as nanoGPT's sample.py starts from "\n").
 */
export function promptTokens(prompt: string, vocabSize: number): number[] {
  const bytes = new TextEncoder().encode(prompt);
  const tokens = bytes.length === 0 ? [10] : Array.from(bytes.subarray(Math.max(0, bytes.length - LIMITS.promptBytes)));
  const outside = tokens.find((t) => t >= vocabSize);
  if (outside !== undefined)
    throw new RangeError(`the prompt has byte ${outside}, but this model's vocabulary is 0..${vocabSize - 1}`);
  return tokens;
}

/**
 * Text from a stream of byte tokens: a UTF-8 character cut between two tokens waits for the
 * rest, invalid bytes become U+FFFD (a byte model can emit any byte), nothing throws.
 */
export class ByteTextStream {
  private readonly decoder = new TextDecoder('utf-8', { fatal: false, ignoreBOM: true });

  /** The text the new tokens complete (possibly ''). */
  push(tokens: ArrayLike<number>): string {
    return this.decoder.decode(
      Uint8Array.from(tokens, (t) => t & 0xff),
      { stream: true },
    );
  }

  /** Whatever an unfinished character left over, as U+FFFD. */
  end(): string {
    return this.decoder.decode();
  }
}

/** What the sampler is doing. */
export type SamplePhase = { phase: 'export' } | { phase: 'load' } | { phase: 'generate'; done: number; total: number };

export function progressLabel(progress: SamplePhase): string {
  switch (progress.phase) {
    case 'export':
      return 'exporting model…';
    case 'load':
      return 'loading onnxruntime…';
    case 'generate':
      return `generating ${progress.done}/${progress.total}`;
  }
}

/** What one generation took, for the panel's footer. */
export interface SampleStats {
  tokens: number;
  /** ms spent exporting θ_global to ONNX; 0 when the cached session was reused. */
  exportMs: number;
  /** ms spent loading onnxruntime-web and creating the session; 0 when reused. */
  loadMs: number;
  generateMs: number;
  /** onnxruntime-web's WebAssembly threads. */
  threads: number;
}

/** One generation, as the page sends it to the worker (params travel as a transferred buffer). */
export interface SampleRequest extends SampleSettings {
  params: Float32Array;
  model: GptConfig;
  /**
   * Identifies these params (e.g. the fragments' round hashes): the same key as the previous
   * request reuses its exported model and session. Leave out to export every time.
   */
  paramsKey?: string;
  /** Seeds the sampling (mulberry32) for repeatable text; Math.random when left out. */
  seed?: number;
  /** onnxruntime-web's WebAssembly threads; default 1 unless the page is cross-origin isolated. */
  numThreads?: number;
}

export type SampleEvent =
  | ({ type: 'progress' } & SamplePhase)
  | { type: 'text'; text: string }
  | { type: 'done'; stats: SampleStats }
  | { type: 'error'; message: string; stage: SamplePhase['phase'] | 'params' };

/** Page → worker. */
export interface WorkerRequest {
  id: number;
  request: SampleRequest;
}

/** Worker → page: the events of request `id`. */
export type WorkerEvent = SampleEvent & { id: number };

/**
 * The array to post and the buffers to transfer: the params' own buffer when the array covers
 * all of it, else a copy's (a view into a larger buffer must not take the rest with it). A
 * SharedArrayBuffer is shared, not transferred.
 */
export function transferableParams(params: Float32Array): { params: Float32Array; transfer: ArrayBuffer[] } {
  const buffer = params.buffer;
  if (typeof SharedArrayBuffer !== 'undefined' && buffer instanceof SharedArrayBuffer) return { params, transfer: [] };
  const whole = params.byteOffset === 0 && params.byteLength === buffer.byteLength;
  const array = whole ? params : params.slice();
  return { params: array, transfer: [array.buffer as ArrayBuffer] };
}

/** WebAssembly threads for onnxruntime-web: more than one needs SharedArrayBuffer (cross-origin isolation). */
export function defaultThreads(): number {
  if (!globalThis.crossOriginIsolated) return 1;
  const cores = globalThis.navigator?.hardwareConcurrency ?? 1;
  return Math.max(1, Math.min(4, Math.floor(cores / 2)));
}
