/**
 * The volunteer as a service: what `shoal worker` and the volunteer page's room worker both run
 * around the swarm Worker. Once the welcome names the run it loads the room's text, draws this
 * volunteer's own batch stream from it and builds the training engine; it joins, trains, keeps
 * the engine under a duty cycle when asked, and leaves cleanly (the step in progress finishes,
 * every peer hears `leave`).
 *
 * It has no I/O of its own: the member (and its transport), the text's loader and the engine
 * come in (trainerFor builds the usual one from a GPU device or none).
 */
import { BatchSampler, type Corpus, type Dataset, fnv1a32 } from '@shoal/data';
import {
  assertGpuFits,
  type CpuBackendOptions,
  CpuStageTrainer,
  CpuTrainer,
  createGptKernels,
  GpuStageTrainer,
  GpuTrainer,
  gptLayerShape,
  type StageSpec,
  type StageTrainer,
  type Trainer,
} from '@shoal/model';
import type { Capabilities, PeerId, RosterMessage, RunConfig } from '@shoal/protocol';
import type { Member } from '@shoal/swarm';
import { DataFeed, type ShardStart, Worker, type WorkerOptions } from '@shoal/swarm';

/** This volunteer's batch stream: from its peer id, so two volunteers of a room draw different batches. */
export function workerIndexFor(peerId: string): number {
  return fnv1a32(new TextEncoder().encode(peerId)) & 0xffff;
}

/**
 * The rest after a step that took `measuredStepMs`, so the engine is busy at most `dutyCycle` of the time:
 * busy / (busy + rest) = dutyCycle (clamped to 5 % … 100 %).
 */
export function restAfterStep(measuredStepMs: number, dutyCycle: number): number {
  const duty = Math.min(1, Math.max(0.05, dutyCycle));
  return duty >= 1 ? 0 : measuredStepMs * (1 / duty - 1);
}

/**
 * The training engine for a run: WebGPU kernels on `device`, or the CPU engine without one (on
 * `cpu.threads` threads, started before it is handed over).
 */
export async function trainerFor(
  device: GPUDevice | null,
  config: RunConfig,
  params: Float32Array,
  cpu: CpuBackendOptions = {},
): Promise<Trainer> {
  if (!device) {
    const trainer = new CpuTrainer(config.model, config.train, params, cpu);
    await trainer.ready();
    return trainer;
  }
  // before a kernel is compiled: a GPU that cannot hold the room's model says so in one line
  assertGpuFits(config.model, config.train.batchSize, config.train.seqLen, device.limits);
  const layer = gptLayerShape(config.model, config.train.batchSize, config.train.seqLen);
  const precision = config.precision ?? 'f32';
  const kernels = await createGptKernels(device, config.model.nEmbd / config.model.nHead, {
    layer,
    precision,
    sequence: config.train.seqLen,
  });
  return GpuTrainer.create(device, config.model, config.train, params, kernels);
}

/** A pipeline-parallel room's stage engine: WebGPU on `device`, else the CPU. */
export async function stageFor(
  device: GPUDevice | null,
  config: RunConfig,
  spec: StageSpec,
  params: Float32Array,
  o: { microBatch: number; slots: number },
): Promise<StageTrainer> {
  if (!device) return new CpuStageTrainer(config.train, spec, params, config.model, o);
  const layer = gptLayerShape(config.model, o.microBatch, config.train.seqLen);
  const precision = config.precision ?? 'f32';
  const kernels = await createGptKernels(device, config.model.nEmbd / config.model.nHead, {
    layer,
    precision,
    sequence: config.train.seqLen,
  });
  return GpuStageTrainer.create(device, config.model, config.train, spec, params, { ...o, kernels });
}

export interface VolunteerServiceOptions {
  member: Member;
  /** The host's peer id. */
  coordinator: PeerId;
  capabilities: Capabilities;
  /** The run is known (the welcome), before anything is loaded: e.g. the mesh's message limit. */
  onRun?(config: RunConfig): void;
  /** The room's text for the run, checked against its fingerprint. */
  loadCorpus(config: RunConfig): Promise<Corpus>;
  /**
   * A dataset room (config.data.dataset): the room's dataset, opened against its manifest hash
   * with this volunteer's shard cache (its budget). Without it the volunteer cannot join one.
   */
  openDataset?(config: RunConfig): Promise<Dataset>;
  /** A dataset room: it started drawing from a shard. */
  onShard?(start: ShardStart): void;
  /** The training engine for the run, on θ_global as the welcome gave it. */
  createEngine(config: RunConfig, params: Float32Array): Promise<Trainer>;
  /** A pipeline-parallel room's stage engine (default: the CPU stage). */
  createStage?: WorkerOptions['createStage'];
  /**
   * The fraction of wall time the engine may be busy, read after every step (restAfterStep).
   * Omitted: flat out, with only a zero-length sleep after each step, which lets the transport,
   * the signaling socket and signals be served between steps that settle without a macrotask.
   */
  dutyCycle?: () => number;
  /** Steps a WebGPU engine keeps queued (WorkerOptions.pipelineDepth). */
  pipelineDepth?: number;
}

export class VolunteerService {
  readonly worker: Worker;
  /** A dataset room's batches (null until the welcome, and in one-text rooms). */
  feed: DataFeed | null = null;
  /** The welcome came and the training loop started. */
  welcomed = false;
  /** Join, then the training loop (start()): settles when the loop ends, rejects when it cannot train. */
  running: Promise<void> = Promise.resolve();
  /** Resolves with the reason the volunteer cannot train (its text or its engine failed). */
  readonly failure: Promise<Error>;
  /** The training loop alone (resolved until the welcome). */
  private loop: Promise<void> = Promise.resolve();
  private leaving: Promise<void> | null = null;

  /** Builds the Worker; start() joins. */
  constructor(private readonly options: VolunteerServiceOptions) {
    const { member } = options;
    let sampler: BatchSampler | null = null;
    let feed: DataFeed | null = null;
    // The coordinator's latest roster: a dataset's feed starts from it (it comes while the dataset opens).
    let roster: RosterMessage | null = null;
    member.on('roster', (from, message) => {
      if (from === options.coordinator && message.epoch > (roster?.epoch ?? -1)) roster = message;
    });
    let failed: (error: Error) => void = () => {};
    this.failure = new Promise<Error>((resolve) => {
      failed = resolve;
    });
    const { dutyCycle } = options;
    const prepare = async (config: RunConfig) => {
      try {
        options.onRun?.(config);
        if (config.data.dataset) {
          if (feed) return;
          if (!options.openDataset) throw new Error('this volunteer cannot train on a packed dataset');
          const dataset = await options.openDataset(config);
          feed = new DataFeed(dataset, config, member, options.coordinator, roster, options.onShard);
          this.feed = feed;
          return;
        }
        const corpus = await options.loadCorpus(config);
        sampler = new BatchSampler(corpus.train, {
          batchSize: config.train.batchSize,
          seqLen: config.train.seqLen,
          seed: config.data.seed,
          worker: workerIndexFor(member.self),
        });
      } catch (error) {
        failed(error as Error);
        throw error;
      }
    };
    this.worker = new Worker({
      member,
      coordinator: options.coordinator,
      capabilities: options.capabilities,
      prepare,
      createStage: options.createStage,
      createTrainer: async (config, params) => {
        await prepare(config);
        try {
          // the engine itself: the worker sets θ into it at every merge, and reads Δ out of it
          return await options.createEngine(config, params);
        } catch (error) {
          failed(error as Error);
          throw error;
        }
      },
      nextBatch: () => {
        if (feed) return feed.next();
        if (!sampler) throw new Error('a batch before the welcome');
        return sampler.next();
      },
      dataPositions: () => feed?.heartbeatPositions(),
      sleepAfterStepMs: (measuredStepMs) => (dutyCycle ? restAfterStep(measuredStepMs, dutyCycle()) : 0),
      pipelineDepth: options.pipelineDepth,
    });
  }

  /** Says hello, waits for the welcome, trains until stopped: `running`. */
  start(): Promise<void> {
    this.running = this.worker.join().then(() => {
      this.welcomed = true;
      this.loop = this.worker.run();
      return this.loop;
    });
    // a run that cannot start rejects `running` and resolves `failure`: the shells watch failure
    this.running.catch(() => {});
    return this.running;
  }

  /**
   * Stops after the step in progress (waiting at most `graceMs` for it), then says leave to every
   * peer. The caller closes its transport and destroy()s. Idempotent.
   */
  leave(reason: string, graceMs: number): Promise<void> {
    this.leaving ??= (async () => {
      const { member } = this.options;
      this.worker.stop();
      let cancel = () => {};
      const waited = new Promise<void>((resolve) => {
        cancel = member.clock.setTimer(graceMs, resolve);
      });
      await Promise.race([this.loop.catch(() => {}), waited]);
      cancel();
      await member.broadcast(member.transport.peers(), { kind: 'leave', reason });
    })();
    return this.leaving;
  }

  /** Frees the engine. */
  destroy(): void {
    this.feed?.stop();
    this.worker.destroy();
  }
}
