/**
 * The volunteer's training, inside the room worker: the swarm Worker (inner AdamW steps on
 * WebGPU, or WebAssembly on the CPU; contributions, shard ownership, the replica) on the
 * PortTransport. Heartbeats go from here too, so a hidden tab's throttled main-thread timers do
 * not slow the room down (ARCHITECTURE.md, roles). Pause, the duty-cycle cap and the host's
 * status arrive as messages.
 */
import { BatchSampler, type Corpus, corpusFromBytes, fnv1a32 } from '@shoal/data';
import { acquireGpu, formatAdapter, type GpuContext } from '@shoal/gpu';
import { CpuTrainer, createGptKernels, GpuTrainer, type Trainer } from '@shoal/model';
import { corpusLengthOf, createWireCodec, maxMessageBytesFor, type RoomStatus, type RunConfig } from '@shoal/protocol';
import { fetchCorpusFrom, Member, runIdFor, Worker as SwarmWorker, wallClock } from '@shoal/swarm';
import { checkCorpus, datasetOf, fetchMobyDick, MOBY_DICK } from './dataset.ts';
import type { DatasetInfo, RuntimeControl, RuntimeOut, VolunteerInit, VolunteerStats } from './messages.ts';
import type { PortTransport } from './port-transport.ts';

type Post = (message: RuntimeOut, transfer?: Transferable[]) => void;

export interface VolunteerRuntime {
  handle(message: RuntimeControl): void;
}

/** This volunteer's batch stream: from its peer id, so two volunteers draw different batches. */
export function workerIndexFor(peerId: string): number {
  return fnv1a32(new TextEncoder().encode(peerId)) & 0xffff;
}

/**
 * The rest after a step of `stepMs` so the engine is busy at most `dutyCycle` of the time:
 * busy / (busy + rest) = dutyCycle.
 */
export function restAfterStep(stepMs: number, dutyCycle: number): number {
  const duty = Math.min(1, Math.max(0.05, dutyCycle));
  return duty >= 1 ? 0 : stepMs * (1 / duty - 1);
}

export async function startVolunteer(
  init: VolunteerInit,
  transport: PortTransport,
  post: Post,
): Promise<VolunteerRuntime> {
  let gpu: GpuContext | null = null;
  let adapter = 'CPU (WebAssembly)';
  if (init.backend === 'webgpu') {
    gpu = await acquireGpu();
    adapter = formatAdapter(gpu.report);
  }
  const member = new Member(transport, await createWireCodec(), wallClock, runIdFor(init.roomId));
  let dutyCycle = init.dutyCycle;
  let lastStepMs = 0;
  let sampler: BatchSampler | null = null;
  let hostStatus: RoomStatus = 'waiting';
  let localPause = false;
  let welcomed = false;
  let stopped = false;
  let dataset: DatasetInfo | null = null;

  /** The room's text: Moby Dick from the server, or the host's own text over the mesh. */
  const loadCorpus = async (config: RunConfig): Promise<Corpus> => {
    const { corpus: name, fingerprint } = config.data;
    if (name === MOBY_DICK) {
      const corpus = await fetchMobyDick(init.corpusUrl, config);
      dataset = datasetOf(corpus, 'server');
      return corpus;
    }
    if (fingerprint === undefined) throw new Error(`the room trains on ${name}, and its host does not share it`);
    const info: DatasetInfo = { name, bytes: corpusLengthOf(fingerprint), fingerprint, source: 'host', received: 0 };
    dataset = info;
    const bytes = await fetchCorpusFrom(member, init.coordinator, {
      fingerprint,
      name,
      onProgress: (received) => {
        info.received = received;
      },
    });
    return checkCorpus(corpusFromBytes(bytes, { name, seqLen: config.train.seqLen }), config);
  };
  const phase = (): VolunteerStats['phase'] => {
    if (stopped || hostStatus === 'stopped') return 'stopped';
    if (!welcomed) return 'connecting';
    if (hostStatus === 'waiting') return 'waiting';
    return localPause || hostStatus === 'paused' ? 'paused' : 'training';
  };

  /** Times each step, for the duty-cycle rest. */
  const timed = (trainer: Trainer): Trainer =>
    Object.assign(Object.create(trainer) as Trainer, {
      step: async (...args: Parameters<Trainer['step']>) => {
        const started = performance.now();
        const loss = await trainer.step(...args);
        lastStepMs = performance.now() - started;
        return loss;
      },
    });

  const worker = new SwarmWorker({
    member,
    coordinator: init.coordinator,
    capabilities: { backend: init.backend, adapter, tokensPerSecond: 0 },
    createTrainer: async (config, params) => {
      post({ type: 'message-limit', bytes: maxMessageBytesFor(config) });
      const corpus = await loadCorpus(config);
      sampler = new BatchSampler(corpus.train, {
        batchSize: config.train.batchSize,
        seqLen: config.train.seqLen,
        seed: config.data.seed,
        worker: workerIndexFor(member.self),
      });
      const trainer: Trainer = gpu
        ? await GpuTrainer.create(
            gpu.device,
            config.model,
            config.train,
            params,
            await createGptKernels(gpu.device, config.model.nEmbd / config.model.nHead),
          )
        : new CpuTrainer(config.model, config.train, params);
      return timed(trainer);
    },
    nextBatch: () => {
      if (!sampler) throw new Error('a batch before the welcome');
      return sampler.next();
    },
    stepMs: () => restAfterStep(lastStepMs, dutyCycle),
  });

  const applyPause = () => {
    const paused = localPause || hostStatus !== 'running';
    if (paused) worker.pause();
    else worker.resume();
  };
  applyPause();
  transport.start();

  const stats = (): VolunteerStats => {
    const { metrics } = worker;
    return {
      backend: init.backend,
      adapter,
      phase: phase(),
      innerStep: metrics.innerStep,
      tokens: metrics.tokens,
      loss: metrics.loss,
      tokensPerSecond: worker.isPaused ? 0 : metrics.tokensPerSecond,
      contributions: metrics.contributions,
      merges: metrics.merges,
      roundsCommitted: worker.replica?.state.fragments.reduce((sum, f) => sum + f.round, 0) ?? 0,
      bytesSent: member.bytesSent,
      bytesReceived: member.bytesReceived,
      config: worker.config,
      dataset: dataset && { ...dataset },
    };
  };
  const statsTimer = setInterval(() => post({ type: 'stats', stats: stats() }), init.statsEveryMs);

  let running: Promise<void> = Promise.resolve();
  void worker
    .join()
    .then(() => {
      welcomed = true;
      running = worker.run();
      return running;
    })
    .catch((error: unknown) =>
      post({ type: 'error', message: String((error as Error)?.message ?? error), fatal: true }),
    );

  let leaving = false;
  return {
    handle(message) {
      switch (message.type) {
        case 'status':
          hostStatus = message.status;
          applyPause();
          return;
        case 'pause':
          localPause = message.paused;
          applyPause();
          return;
        case 'duty-cycle':
          dutyCycle = message.dutyCycle;
          return;
        case 'leave':
          if (leaving) return;
          leaving = true;
          worker.stop();
          void (async () => {
            await Promise.race([running.catch(() => {}), new Promise((resolve) => setTimeout(resolve, 3_000))]);
            await member.broadcast(transport.peers(), { kind: 'leave', reason: 'left the page' });
            clearInterval(statsTimer);
            stopped = true;
            post({ type: 'stats', stats: stats() });
            worker.destroy();
            gpu?.destroy();
            post({ type: 'left' });
          })();
          return;
        default:
          return;
      }
    },
  };
}
