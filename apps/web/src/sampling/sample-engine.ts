/**
 * Text from θ_global: export the model to ONNX (@shoal/onnx/export, protobufjs), load it into
 * onnxruntime-web's WebAssembly backend (@shoal/onnx/runner) and sample byte by byte.
 *
 * Heavy (onnxruntime-web's JS, and a 14 MB .wasm it fetches on first use): only the sampling
 * worker (sample.worker.ts) imports this, or the panel through import() where there are no
 * module workers. Never import it statically from the page.
 */
import { mulberry32 } from '@shoal/gpu/random';
import { exportOnnx } from '@shoal/onnx/export';
import { OnnxSampler } from '@shoal/onnx/runner';
import { env } from 'onnxruntime-web';
import {
  ByteTextStream,
  defaultThreads,
  promptTokens,
  type SampleEvent,
  type SampleRequest,
  settingsProblem,
} from './settings.ts';

/** The session of the previous request, kept while its paramsKey may come again. */
let loaded: { key: string; sampler: OnnxSampler } | null = null;
/** onnxruntime-web reads its settings once, when it first initialises WebAssembly. */
let threads: number | null = null;

class StageError extends Error {
  constructor(
    readonly stage: Extract<SampleEvent, { type: 'error' }>['stage'],
    message: string,
  ) {
    super(message);
  }
}

const messageOf = (error: unknown) => (error instanceof Error ? error.message : String(error));

/** Lets the event loop run (progress messages, the page's input in the fallback) without setTimeout's 4 ms clamp. */
function yieldToEventLoop(): Promise<void> {
  return new Promise((resolve) => {
    const channel = new MessageChannel();
    channel.port1.onmessage = () => {
      channel.port1.close();
      resolve();
    };
    channel.port2.postMessage(null);
  });
}

async function samplerFor(request: SampleRequest, emit: (event: SampleEvent) => void) {
  if (loaded && request.paramsKey !== undefined && loaded.key === request.paramsKey)
    return { sampler: loaded.sampler, exportMs: 0, loadMs: 0 };
  await release();

  emit({ type: 'progress', phase: 'export' });
  await yieldToEventLoop();
  const exportStart = performance.now();
  let model: Uint8Array;
  try {
    model = exportOnnx(request.model, request.params);
  } catch (error) {
    throw new StageError('export', `Could not export the model to ONNX: ${messageOf(error)}`);
  }
  const exportMs = performance.now() - exportStart;

  emit({ type: 'progress', phase: 'load' });
  await yieldToEventLoop();
  const loadStart = performance.now();
  threads ??= request.numThreads ?? defaultThreads();
  env.logLevel = 'error';
  let sampler: OnnxSampler;
  try {
    sampler = await OnnxSampler.create(model, {
      shape: { blockSize: request.model.blockSize, vocabSize: request.model.vocabSize },
      numThreads: threads,
    });
  } catch (error) {
    const message = messageOf(error);
    const wasm = /wasm|WebAssembly|fetch|import|instantiate|backend/i.test(message);
    throw new StageError(
      'load',
      wasm
        ? `onnxruntime-web could not load its WebAssembly (ort-wasm-simd-threaded.wasm): ${message}`
        : `onnxruntime-web could not load the model: ${message}`,
    );
  }
  if (request.paramsKey !== undefined) loaded = { key: request.paramsKey, sampler };
  return { sampler, exportMs, loadMs: performance.now() - loadStart };
}

/**
 * Generates `request.maxNewTokens` bytes after the prompt, reporting progress and text as it
 * goes through `emit`, ending with a `done` or an `error` event (it never throws).
 * `cancelled` is checked between tokens.
 */
export async function sample(
  request: SampleRequest,
  emit: (event: SampleEvent) => void,
  cancelled: () => boolean = () => false,
): Promise<void> {
  let sampler: OnnxSampler | null = null;
  try {
    const problem = settingsProblem(request);
    if (problem) throw new StageError('params', problem);
    let prompt: number[];
    try {
      prompt = promptTokens(request.prompt, request.model.vocabSize);
    } catch (error) {
      throw new StageError('params', messageOf(error));
    }
    const ready = await samplerFor(request, emit);
    sampler = ready.sampler;

    const { vocabSize } = request.model;
    const total = request.maxNewTokens;
    const options = {
      temperature: request.temperature,
      topK: request.topK > 0 ? Math.min(request.topK, vocabSize) : vocabSize,
      random: request.seed === undefined ? Math.random : mulberry32(request.seed),
    };
    const text = new ByteTextStream();
    const context = [...prompt];
    const generateStart = performance.now();
    emit({ type: 'progress', phase: 'generate', done: 0, total });
    let done = 0;
    try {
      for (; done < total && !cancelled(); done++) {
        // generate() crops the context to block_size and draws one byte from the top k.
        const [next] = await sampler.generate(context, 1, options);
        if (next === undefined) break;
        context.push(next);
        const piece = text.push([next]);
        if (piece) emit({ type: 'text', text: piece });
        emit({ type: 'progress', phase: 'generate', done: done + 1, total });
        await yieldToEventLoop();
      }
    } catch (error) {
      throw new StageError('generate', `Generation failed after ${done} tokens: ${messageOf(error)}`);
    }
    const rest = text.end();
    if (rest) emit({ type: 'text', text: rest });
    emit({
      type: 'done',
      stats: {
        tokens: done,
        exportMs: ready.exportMs,
        loadMs: ready.loadMs,
        generateMs: performance.now() - generateStart,
        threads: threads ?? 1,
      },
    });
  } catch (error) {
    const stage = error instanceof StageError ? error.stage : 'generate';
    emit({ type: 'error', stage, message: messageOf(error) });
  } finally {
    // A session nobody can ask for again is freed now (a model of the base preset holds ~200 MB).
    if (sampler && loaded?.sampler !== sampler) await sampler.release().catch(() => undefined);
  }
}

/** Frees the cached session. */
export async function release(): Promise<void> {
  const previous = loaded;
  loaded = null;
  if (previous) await previous.sampler.release().catch(() => undefined);
}
