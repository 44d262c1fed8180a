/**
 * The volunteer's training, inside the room worker: the swarm Worker (inner AdamW steps on
 * WebGPU, or WebAssembly on the CPU; contributions, shard ownership, the replica) on the
 * PortTransport. Heartbeats go from here too, so a hidden tab's throttled main-thread timers do
 * not slow the room down (docs/design.md, "Roles"). Pause, the duty-cycle cap and the host's
 * status arrive as messages.
 *
 * In a pipeline-parallel room the engine is one stage of a replica group, built on the same
 * device as a whole-model engine would be (a GpuStageTrainer on WebGPU, a CpuStageTrainer on the
 * CPU); the stats say where the coordinator's roster puts this volunteer and what its group lacks.
 */
import { type Corpus, corpusFromBytes, type Dataset } from '@shoal/data';
import { acquireGpu, formatAdapter, type GpuContext } from '@shoal/gpu';
import { modelMemoryBytes, splitStages } from '@shoal/model';
import {
  corpusLengthOf,
  createWireCodec,
  type DatasetRef,
  maxMessageBytesFor,
  type RoomStatus,
  type RosterMessage,
  type RunConfig,
} from '@shoal/protocol';
import { pipelineGroupsOf, placeOf } from '@shoal/room';
import { stageFor, trainerFor, VolunteerService } from '@shoal/room/services';
import { fetchCorpusFrom, Member, meshDatasetSource, runIdFor, wallClock } from '@shoal/swarm';
import { BusyMeter } from './busy-meter.ts';
import { browserCpuThreads, cpuEngineName } from './cpu-threads.ts';
import { checkCorpus, datasetOf, fetchMobyDick, MOBY_DICK } from './dataset.ts';
import type {
  DatasetInfo,
  RuntimeControl,
  RuntimeOut,
  VolunteerInit,
  VolunteerPipeline,
  VolunteerShards,
  VolunteerStats,
} from './messages.ts';
import { openVolunteerDataset, packedDatasetInfo } from './packed-dataset.ts';
import type { PortTransport } from './port-transport.ts';

type Post = (message: RuntimeOut, transfer?: Transferable[]) => void;

export interface VolunteerRuntime {
  handle(message: RuntimeControl): void;
}

/** The most memory the CPU engine can use: WebAssembly's 32-bit address space. */
const WASM_MEMORY_BYTES = 4 * 2 ** 30;

/**
 * What this browser lends a pipeline room, by its own limits (it tells no total): on WebGPU, four
 * of its largest buffers (parameters, gradients and AdamW's two moments each live in one); on the
 * CPU, half the device memory the browser reports (navigator.deviceMemory, coarse and capped at
 * 8 GiB), within WebAssembly's 4 GiB.
 */
export function lendableMemory(device: GPUDevice | null, deviceMemoryGiB?: number): number {
  if (device) return 4 * device.limits.maxBufferSize;
  const reported = deviceMemoryGiB ? Math.floor((deviceMemoryGiB * 2 ** 30) / 2) : WASM_MEMORY_BYTES;
  return Math.min(WASM_MEMORY_BYTES, reported);
}

export async function startVolunteer(
  init: VolunteerInit,
  transport: PortTransport,
  post: Post,
): Promise<VolunteerRuntime> {
  let gpu: GpuContext | null = null;
  const threads = browserCpuThreads();
  let adapter = cpuEngineName(threads);
  if (init.backend === 'webgpu') {
    gpu = await acquireGpu();
    adapter = formatAdapter(gpu.report);
  }
  const member = new Member(transport, await createWireCodec(), wallClock, runIdFor(init.roomId));
  let dutyCycle = init.dutyCycle;
  const busy = new BusyMeter();
  let hostStatus: RoomStatus = 'waiting';
  let localPause = false;
  let stopped = false;
  let dataset: DatasetInfo | null = null;
  // a dataset room: the opened dataset (its counters and cache) and the shard drawn from
  let packed: Dataset | null = null;
  let shardStart: { epoch: number; shard: number; from: number; heldBytes: number } | null = null;

  /** The room's packed dataset: this volunteer's training shards, from its URL, in a cache of its budget. */
  const openRoomDataset = async (config: RunConfig): Promise<Dataset> => {
    const manifest = (config.data.dataset as DatasetRef).manifest;
    const host = meshDatasetSource(member, init.coordinator, { manifest });
    const opened = await openVolunteerDataset(config, init.origin, init.shardBudgetMib, host);
    dataset = packedDatasetInfo(config.data.dataset as DatasetRef, opened.dataset);
    packed = opened.dataset;
    return opened.dataset;
  };
  const shardStats = (): VolunteerShards | null => {
    if (!packed) return null;
    const { counters, cache } = packed;
    return {
      current: shardStart && { epoch: shardStart.epoch, shard: shardStart.shard, from: shardStart.from },
      heldBytes: shardStart?.heldBytes ?? 0,
      budgetBytes: cache?.budgetBytes ?? 0,
      fetched: counters.fetched,
      refused: counters.refused,
      cacheHits: counters.cacheHits,
    };
  };

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
    if (!volunteer.welcomed) return 'connecting';
    if (hostStatus === 'waiting') return 'waiting';
    return localPause || hostStatus === 'paused' ? 'paused' : 'training';
  };

  // The coordinator's latest roster: why it leaves this volunteer out of rounds, if it does; in a
  // pipeline room also where it placed it and who holds the other stages of its group. And the
  // stage whose engine was built last.
  let roster: RosterMessage | null = null;
  member.on('roster', (from, message) => {
    if (from === init.coordinator && message.epoch > (roster?.epoch ?? -1)) roster = message;
  });
  let builtStage: number | null = null;

  const volunteer = new VolunteerService({
    member,
    coordinator: init.coordinator,
    capabilities: {
      backend: init.backend,
      adapter,
      tokensPerSecond: 0,
      memoryBytes: lendableMemory(
        gpu?.device ?? null,
        (globalThis.navigator as Navigator & { deviceMemory?: number }).deviceMemory,
      ),
    },
    onRun: (config) => post({ type: 'message-limit', bytes: maxMessageBytesFor(config) }),
    loadCorpus,
    openDataset: openRoomDataset,
    onShard: ({ epoch, shard, from, heldBytes }) => {
      shardStart = { epoch, shard, from, heldBytes };
    },
    createEngine: async (config, params) => {
      const engine = await trainerFor(gpu?.device ?? null, config, params, { threads });
      // every step timed: the page shows how busy the engine is beside the duty cycle asked for
      const step = engine.step.bind(engine);
      engine.step = (...args) => busy.time(() => step(...args));
      return engine;
    },
    // on the device the whole-model engine would use: WebGPU, or the CPU without one
    createStage: async (config, spec, params, o) => {
      const stage = await stageFor(gpu?.device ?? null, config, spec, params, o);
      builtStage = spec.index;
      return stage;
    },
    dutyCycle: () => dutyCycle,
  });
  const { worker } = volunteer;

  const applyPause = () => {
    const paused = localPause || hostStatus !== 'running';
    if (paused) worker.pause();
    else worker.resume();
  };
  applyPause();
  transport.start();

  const pipelineStats = (config: RunConfig | null): VolunteerPipeline | null => {
    if (!config?.pipeline) return null;
    const { stages } = config.pipeline;
    const members = roster?.members ?? [];
    const slot = members.find((m) => m.peer === member.self)?.pipeline ?? null;
    if (!slot) return { stages, place: null, group: null, starting: false };
    return {
      stages,
      place: placeOf(slot, splitStages(config.model.nLayer, stages)),
      group: pipelineGroupsOf(members, stages).find((g) => g.id === slot.group) ?? null,
      starting: builtStage !== slot.stage,
    };
  };

  /** What Shoal holds for the room: the model's training state and the text or shards. */
  const memoryBytes = (config: RunConfig | null): number | null => {
    if (!config || config.pipeline) return null;
    const model = modelMemoryBytes(config.model, config.train.batchSize, config.train.seqLen);
    const text = shardStart?.heldBytes ?? (dataset?.source === 'url' ? 0 : (dataset?.bytes ?? 0));
    return model + text;
  };

  const stats = (): VolunteerStats => {
    const { metrics } = worker;
    return {
      peer: member.self,
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
      dutyCycle,
      busyFraction: worker.config?.pipeline ? null : busy.fraction(),
      memoryBytes: memoryBytes(worker.config),
      config: worker.config,
      dataset: dataset && { ...dataset },
      pipeline: pipelineStats(worker.config),
      shards: shardStats(),
      leftOut: roster?.members.find((m) => m.peer === member.self)?.reason ?? '',
    };
  };
  const statsTimer = setInterval(() => post({ type: 'stats', stats: stats() }), init.statsEveryMs);

  // a failure before training (the dataset unreachable, a budget below one shard) ends it here, said
  void volunteer.failure.then((error) => post({ type: 'error', message: error.message, fatal: true }));
  volunteer
    .start()
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
          void (async () => {
            await volunteer.leave('left the page', 3_000);
            clearInterval(statsTimer);
            stopped = true;
            post({ type: 'stats', stats: stats() });
            volunteer.destroy();
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
