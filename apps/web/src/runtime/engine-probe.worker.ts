/// <reference lib="webworker" />
/**
 * One engine of the engine probe (engine-probe.ts), off the main thread: builds the engine the
 * room worker would build for a preset at the room's batch and sequence (the defaults where not
 * known), then trains random tokens step after step, posting each step's time, until the page
 * terminates it. The page decides when it has measured enough; a step that takes too long (a
 * software adapter's) is ended by terminating this worker.
 *
 * The engines are built with the constructors trainerFor (@shoal/room/services) calls, from
 * @shoal/model itself: the services would bring the whole swarm and its schemas into a worker the
 * landing page loads.
 */
import { acquireGpu, formatAdapter, type GpuContext } from '@shoal/gpu';
import {
  buildLayout,
  CpuTrainer,
  createGptKernels,
  defaultTrainConfig,
  GpuTrainer,
  gptLayerShape,
  initParameters,
  presetConfig,
  type Trainer,
} from '@shoal/model';
import { browserCpuThreads, cpuEngineName } from './cpu-threads.ts';
import type { ProbeRequest, ProbeWorkerOut } from './engine-probe.ts';

declare const self: DedicatedWorkerGlobalScope;

const post = (message: ProbeWorkerOut) => self.postMessage(message);

async function measure({ engine, preset, batch, seq }: ProbeRequest): Promise<void> {
  const model = presetConfig(preset);
  const defaults = defaultTrainConfig();
  // the room's batch and sequence where known (a room's defaults are defaultTrainConfig's), within what the model takes
  const train = defaultTrainConfig({
    batchSize: batch ?? defaults.batchSize,
    seqLen: Math.min(seq ?? defaults.seqLen, model.blockSize),
  });
  let gpu: GpuContext | null = null;
  const threads = browserCpuThreads();
  let adapter = cpuEngineName(threads);
  let software = false;
  if (engine === 'webgpu') {
    gpu = await acquireGpu();
    adapter = formatAdapter(gpu.report);
    software = gpu.report.isSoftware;
  }
  post({ type: 'device', adapter, software });
  const params = initParameters(buildLayout(model), train.seed);
  const trainer: Trainer = gpu
    ? await GpuTrainer.create(
        gpu.device,
        model,
        train,
        params,
        await createGptKernels(gpu.device, model.nEmbd / model.nHead, {
          layer: gptLayerShape(model, train.batchSize, train.seqLen),
          sequence: train.seqLen,
        }),
      )
    : new CpuTrainer(model, train, params, { threads });
  if (trainer instanceof CpuTrainer) await trainer.ready();
  const { batchSize, seqLen, maxLr } = train;
  const tokens = batchSize * seqLen;
  // random tokens: the step's cost does not depend on what the text says
  const inputs = new Int32Array(tokens);
  const targets = new Int32Array(tokens);
  for (let i = 0; i < tokens; i++) {
    inputs[i] = Math.floor(Math.random() * model.vocabSize);
    targets[i] = Math.floor(Math.random() * model.vocabSize);
  }
  post({ type: 'ready', tokensPerStep: tokens });
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
