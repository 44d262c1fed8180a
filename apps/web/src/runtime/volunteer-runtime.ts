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
import { acquireGpu, formatAdapter, type GpuContext } from '@shoal/gpu';
import type { Trainer } from '@shoal/model';
import {
  createWireCodec,
  maxMessageBytesFor,
  type RoomStatus,
  type RosterMessage,
  type RunConfig,
} from '@shoal/protocol';
import { stageFor, trainerFor, VolunteerService } from '@shoal/room/services';
import { Member, runIdFor, wallClock } from '@shoal/swarm';
import { BusyMeter } from './busy-meter.ts';
import { browserCpuThreads, cpuEngineName } from './cpu-threads.ts';
import type { RuntimeControl, RuntimeOut, VolunteerInit, VolunteerStats } from './messages.ts';
import type { PortTransport } from './port-transport.ts';
import { volunteerData } from './volunteer-data.ts';
import { memoryBytesOf, pipelineStatsOf } from './volunteer-figures.ts';

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

/** The device this volunteer trains on (WebGPU's, or the CPU's threads) and its name for the host's table. */
async function engineDevice(init: VolunteerInit) {
  const threads = browserCpuThreads();
  if (init.backend !== 'webgpu') return { gpu: null, threads, adapter: cpuEngineName(threads) };
  const gpu: GpuContext = await acquireGpu();
  return { gpu, threads, adapter: formatAdapter(gpu.report) };
}

/**
 * The whole-model engine for the run, every step timed by `busy`: the page shows how busy the
 * engine is beside the duty cycle asked for.
 */
async function timedTrainer(
  busy: BusyMeter,
  device: GPUDevice | null,
  config: RunConfig,
  params: Float32Array,
  threads: number,
): Promise<Trainer> {
  const engine = await trainerFor(device, config, params, { threads });
  const step = engine.step.bind(engine);
  engine.step = (...args) => busy.time(() => step(...args));
  return engine;
}

export async function startVolunteer(
  init: VolunteerInit,
  transport: PortTransport,
  post: Post,
): Promise<VolunteerRuntime> {
  const { gpu, threads, adapter } = await engineDevice(init);
  const member = new Member(transport, await createWireCodec(), wallClock, runIdFor(init.roomId));
  let dutyCycle = init.dutyCycle;
  const busy = new BusyMeter();
  let hostStatus: RoomStatus = 'waiting';
  let localPause = false;
  let stopped = false;
  const data = volunteerData(init, member);

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
    loadCorpus: data.loadCorpus,
    openDataset: data.openDataset,
    onShard: data.onShard,
    createEngine: (config, params) => timedTrainer(busy, gpu?.device ?? null, config, params, threads),
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
      memoryBytes: memoryBytesOf(worker.config, data.heldBytes),
      config: worker.config,
      dataset: data.info(),
      pipeline: pipelineStatsOf(worker.config, roster, member.self, builtStage),
      shards: data.shards(),
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
