/**
 * Benchmark helpers for the TensorFlow.js competitor (no CLI of its own; see bench/tfjs-probe.ts):
 * `measureTfjsStep` times TfjsTrainer's full training step (forward, backward, clip, AdamW, one
 * loss read-back) on TF.js's wasm, webgpu or cpu backend, in Node.
 *
 * Two things TF.js does not do for itself in Node, done here:
 * - Gradients. tfjs-core's Node bundle leaves them out; they exist only as ESM files with
 *   extensionless imports (dist/register_all_gradients.js), which Node's resolver refuses. A small
 *   resolve hook completes those specifiers, and the gradients register into TF.js's global
 *   registry, which every copy of tfjs-core shares.
 * - WebGPU. The webgpu backend looks for `navigator.gpu` (Node 20 has no navigator) and asks it
 *   for an adapter. We acquire the adapter as the engine does (acquireGpu: SHOAL_ADAPTER, else a
 *   real GPU, then lavapipe, then SwiftShader; it holds the Dawn instances alive) and hand TF.js
 *   that device, so both engines are measured on the same kind of adapter.
 */
import { register } from 'node:module';
import * as tf from '@tensorflow/tfjs-core';
import { acquireGpu } from '../packages/gpu/src/device.node.ts';
import { formatAdapter } from '../packages/gpu/src/report.ts';
import type { GpuContext } from '../packages/gpu/src/types.ts';
import type { GptConfig } from '../packages/model/src/config.ts';
import { initParameters } from '../packages/model/src/init.ts';
import { buildLayout } from '../packages/model/src/layout.ts';
import { TfjsTrainer } from '../packages/model/src/tfjs/gpt.ts';
import { defaultTrainConfig } from '../packages/model/src/train-config.ts';
import { benchBatches } from './train-steps.ts';

export type TfjsBackendName = 'wasm' | 'webgpu' | 'cpu';

export interface TfjsStepOptions {
  backend: TfjsBackendName;
  config: GptConfig;
  B: number;
  T: number;
  /** Untimed steps first (shader compilation, buffer pools). */
  warmup: number;
  steps: number;
  /** Parameter init and token seed; 1337 unless given. */
  seed?: number;
  /** Constant learning rate of the timed steps; 1e-3 unless given. */
  lr?: number;
}

export interface TfjsStepResult {
  backend: TfjsBackendName;
  /** What ran it: the WebGPU adapter, or the wasm build (SIMD, threads). */
  device: string;
  msPerStep: number;
  /** B·T / seconds per step. */
  tokensPerSecond: number;
  /** Loss of the first step (fresh init, benchBatches(…)[0]): compare it with a reference. */
  firstLoss: number;
  /** Loss of the last timed step. */
  loss: number;
  /** Every step's loss, warmup included, in order: compare with a reference trainer. */
  losses: number[];
}

// Resolves `./x` and `../dir` inside @tensorflow's ESM dist files as a bundler would (x.js,
// dir/index.js), and loads those files as ESM (their package.json does not say "module").
const TFJS_ESM_HOOK = `
export async function resolve(specifier, context, nextResolve) {
  const fromTfjs = context.parentURL?.includes('/node_modules/@tensorflow/') && specifier.startsWith('.');
  let resolved;
  try {
    resolved = await nextResolve(specifier, context);
  } catch (error) {
    if (!fromTfjs) throw error;
    for (const suffix of ['.js', '/index.js']) {
      try {
        resolved = await nextResolve(specifier + suffix, context);
        break;
      } catch {}
    }
    if (!resolved) throw error;
  }
  if (/\\/@tensorflow\\/tfjs-core\\/dist\\/(?!tf-core)/.test(resolved.url)) return { ...resolved, format: 'module' };
  return resolved;
}`;

let gradientsLoaded: Promise<void> | undefined;

/** Registers TF.js's gradients once per process (a no-op where something already did). */
function loadGradients(): Promise<void> {
  gradientsLoaded ??= (async () => {
    if (tf.getGradient('Sum')) return;
    register(`data:text/javascript,${encodeURIComponent(TFJS_ESM_HOOK)}`);
    await import('@tensorflow/tfjs-core/dist/register_all_gradients.js');
    if (!tf.getGradient('Sum')) throw new Error('TF.js gradients did not register (two engines in this process?)');
  })();
  return gradientsLoaded;
}

/** Held for the life of the process: TF.js keeps using the device after setup returns. */
let webgpuContext: GpuContext | undefined;
/**
 * WebGPU validation errors TF.js triggered. Dawn only prints them, and the step would go on with
 * garbage, so measureTfjsStep fails when there are any.
 */
const webgpuErrors: string[] = [];

async function registerWebgpu(): Promise<void> {
  const gpu = await acquireGpu();
  webgpuContext = gpu;
  gpu.device.addEventListener('uncapturederror', (event) => {
    webgpuErrors.push((event as GPUUncapturedErrorEvent).error.message);
  });
  // isWebGPUSupported() in the backend checks globalThis.navigator.gpu, at import and in the
  // WebGPUBackend constructor. Nothing else in TF.js reads it once our factory replaces theirs.
  const shim = {
    requestAdapter: () => Promise.reject(new Error('TF.js webgpu in Node uses the device from acquireGpu()')),
    getPreferredCanvasFormat: () => 'rgba8unorm',
    wgslLanguageFeatures: new Set<string>(),
  };
  const global = globalThis as { navigator?: { gpu?: unknown } };
  if (!global.navigator) Object.defineProperty(globalThis, 'navigator', { value: {}, configurable: true });
  const nav = global.navigator as { gpu?: unknown };
  if (!nav.gpu) Object.defineProperty(nav, 'gpu', { value: shim, configurable: true });
  const { WebGPUBackend } = await import('@tensorflow/tfjs-backend-webgpu');
  if (tf.findBackendFactory('webgpu')) tf.removeBackend('webgpu');
  tf.registerBackend('webgpu', () => new WebGPUBackend(gpu.device, gpu.adapter.info));
}

const registered = new Map<TfjsBackendName, Promise<void>>();

/**
 * Makes `backend` TF.js's active backend (registering it on first use) and returns the tf module
 * and a description of what runs it. Throws when the backend cannot start.
 */
export async function useTfjsBackend(backend: TfjsBackendName): Promise<{ tf: typeof tf; device: string }> {
  tf.enableProdMode(); // no "install tfjs-node" advert; affects warnings only
  await loadGradients();
  if (!registered.has(backend)) {
    registered.set(
      backend,
      backend === 'webgpu'
        ? registerWebgpu()
        : backend === 'wasm'
          ? import('@tensorflow/tfjs-backend-wasm').then(() => undefined)
          : import('@tensorflow/tfjs-backend-cpu').then(() => undefined),
    );
  }
  await registered.get(backend);
  if (!(await tf.setBackend(backend)) || tf.getBackend() !== backend) {
    throw new Error(`TF.js backend '${backend}' did not initialise (see the warning above)`);
  }
  let device = 'TF.js cpu backend (plain JavaScript, 1 thread)';
  if (backend === 'webgpu' && webgpuContext) device = formatAdapter(webgpuContext.report);
  if (backend === 'wasm') {
    const simd = await tf.env().getAsync('WASM_HAS_SIMD_SUPPORT');
    const threads = await tf.env().getAsync('WASM_HAS_MULTITHREAD_SUPPORT');
    device = `TF.js wasm backend (SIMD ${simd ? 'on' : 'off'}, ${threads ? 'multithreaded' : '1 thread'})`;
  }
  return { tf, device };
}

/** The token batches measureTfjsStep trains on (bench/train-steps.ts). */
export { benchBatches };

/** Milliseconds per TfjsTrainer step on `backend`, from GPT-2 init (initParameters(seed)). */
export async function measureTfjsStep(options: TfjsStepOptions): Promise<TfjsStepResult> {
  const { backend, config, B, T, warmup, steps, seed = 1337, lr = 1e-3 } = options;
  if (!(steps >= 1 && warmup >= 0)) throw new RangeError(`need steps ≥ 1 and warmup ≥ 0, got ${steps}, ${warmup}`);
  const { device } = await useTfjsBackend(backend);
  const params = initParameters(buildLayout(config), seed);
  const batches = benchBatches(config, B, T, warmup + steps, seed);
  const trainer = new TfjsTrainer(tf, config, params, defaultTrainConfig({ batchSize: B, seqLen: T }));
  const errorsBefore = webgpuErrors.length;
  try {
    const losses: number[] = [];
    let start = performance.now();
    for (const [i, batch] of batches.entries()) {
      if (i === warmup) start = performance.now();
      losses.push(await trainer.step(batch.inputs, batch.targets, lr));
    }
    const msPerStep = (performance.now() - start) / steps;
    const errors = webgpuErrors.slice(errorsBefore);
    if (errors.length > 0)
      throw new Error(`TF.js webgpu raised ${errors.length} WebGPU errors; the first:\n${errors[0]}`);
    const [firstLoss = Number.NaN] = losses;
    const loss = losses.at(-1) ?? Number.NaN;
    return { backend, device, msPerStep, tokensPerSecond: (B * T * 1000) / msPerStep, firstLoss, loss, losses };
  } finally {
    trainer.dispose();
  }
}
