/// <reference lib="webworker" />
/**
 * One engine of the engine probe (engine-probe.ts), off the main thread: builds the engine the
 * room worker would build (trainerFor: WebGPU kernels, or the CPU's WebAssembly SIMD) for a
 * room's default run of a preset, then trains random tokens step after step, posting each step's
 * time, until the page terminates it. The page decides when it has measured enough; a step that
 * takes too long (a software adapter's) is ended by terminating this worker.
 */
import { acquireGpu, formatAdapter, type GpuContext } from '@shoal/gpu';
import { buildLayout, initParameters } from '@shoal/model';
import { RUN_OPTION_DEFAULTS, runConfigOf } from '@shoal/swarm/run-options';
import { trainerFor } from '@shoal/swarm/services';
import type { ProbeRequest, ProbeWorkerOut } from './engine-probe.ts';

declare const self: DedicatedWorkerGlobalScope;

const post = (message: ProbeWorkerOut) => self.postMessage(message);

async function measure({ engine, preset, batch, seq }: ProbeRequest): Promise<void> {
  const defaults = { ...RUN_OPTION_DEFAULTS, preset };
  const model = runConfigOf(defaults).model;
  // the room's batch and sequence where known, within what the model takes
  const config = runConfigOf({
    ...defaults,
    batch: batch ?? defaults.batch,
    seq: Math.min(seq ?? defaults.seq, model.blockSize),
  });
  let gpu: GpuContext | null = null;
  let adapter = 'CPU (WebAssembly)';
  let software = false;
  if (engine === 'webgpu') {
    gpu = await acquireGpu();
    adapter = formatAdapter(gpu.report);
    software = gpu.report.isSoftware;
  }
  const params = initParameters(buildLayout(config.model), config.train.seed);
  const trainer = await trainerFor(gpu?.device ?? null, config, params);
  const { batchSize, seqLen, maxLr } = config.train;
  const tokens = batchSize * seqLen;
  // random tokens: the step's cost does not depend on what the text says
  const inputs = new Int32Array(tokens);
  const targets = new Int32Array(tokens);
  for (let i = 0; i < tokens; i++) {
    inputs[i] = Math.floor(Math.random() * config.model.vocabSize);
    targets[i] = Math.floor(Math.random() * config.model.vocabSize);
  }
  post({ type: 'ready', tokensPerStep: tokens, adapter, software });
  for (;;) {
    const started = performance.now();
    // readLoss waits for the GPU, so the time is the step's own, not the time to queue it
    await trainer.step({ inputs, targets }, maxLr, { readLoss: true });
    post({ type: 'step', ms: performance.now() - started });
  }
}

self.addEventListener('message', (event: MessageEvent<ProbeRequest>) => {
  measure(event.data).catch((error: unknown) =>
    post({ type: 'error', message: error instanceof Error ? error.message : String(error) }),
  );
});
