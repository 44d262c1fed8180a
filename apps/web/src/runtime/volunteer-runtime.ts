/**
 * The volunteer's training, inside the room worker: the swarm Worker (inner AdamW steps on
 * WebGPU, or WebAssembly on the CPU; contributions, shard ownership, the replica) on the
 * PortTransport. Heartbeats go from here too, so a hidden tab's throttled main-thread timers do
 * not slow the room down (docs/design.md, "Roles"). Pause, the duty-cycle cap and the host's
 * status arrive as messages.
 */
import { type Corpus, corpusFromBytes } from '@shoal/data';
import { acquireGpu, formatAdapter, type GpuContext } from '@shoal/gpu';
import { corpusLengthOf, createWireCodec, maxMessageBytesFor, type RoomStatus, type RunConfig } from '@shoal/protocol';
import { fetchCorpusFrom, Member, runIdFor, wallClock } from '@shoal/swarm';
import { trainerFor, VolunteerService } from '@shoal/swarm/services';
import { checkCorpus, datasetOf, fetchMobyDick, MOBY_DICK } from './dataset.ts';
import type { DatasetInfo, RuntimeControl, RuntimeOut, VolunteerInit, VolunteerStats } from './messages.ts';
import type { PortTransport } from './port-transport.ts';

type Post = (message: RuntimeOut, transfer?: Transferable[]) => void;

export interface VolunteerRuntime {
  handle(message: RuntimeControl): void;
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
  let hostStatus: RoomStatus = 'waiting';
  let localPause = false;
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
    if (!volunteer.welcomed) return 'connecting';
    if (hostStatus === 'waiting') return 'waiting';
    return localPause || hostStatus === 'paused' ? 'paused' : 'training';
  };

  const volunteer = new VolunteerService({
    member,
    coordinator: init.coordinator,
    capabilities: { backend: init.backend, adapter, tokensPerSecond: 0 },
    onRun: (config) => post({ type: 'message-limit', bytes: maxMessageBytesFor(config) }),
    loadCorpus,
    createEngine: (config, params) => trainerFor(gpu?.device ?? null, config, params),
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
