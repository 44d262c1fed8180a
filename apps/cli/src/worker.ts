/**
 * `shoal worker --server URL --room ID --token T`: a headless volunteer. It joins the room on the
 * signaling server, connects the mesh to every member (the host included), and trains with the
 * swarm Worker on its engine until SIGINT/SIGTERM; then it finishes its step, says leave to every
 * peer and to the server, and closes.
 *
 * It outlives the signaling server: when the server restarts, it rejoins as the same peer (room.ts)
 * and trains on meanwhile; a server that no longer knows it (its member secret refused) gets it
 * back as a new peer, joined again with the join token while the token admits it. It does not
 * outlive its host: once the host has been gone (its mesh
 * link down, and the server not saying it is in the room) for --host-grace seconds, the room has
 * ended, and the worker leaves and exits.
 */
import {
  type Corpus,
  corpusFromBytes,
  type Dataset,
  type DatasetSource,
  loadCorpus,
  urlDatasetSource,
} from '@shoal/data';
import { formatAdapter } from '@shoal/gpu';
import { HOST_GRACE_MS, type WrtcImplementation, watchHost } from '@shoal/mesh';
import { describeMatmul, GpuTrainer, type Trainer } from '@shoal/model';
import {
  type Capabilities,
  type DatasetRef,
  MESH_DATASET_URL,
  maxMessageBytesFor,
  type RunConfig,
  roomSummaryMessageSchema,
} from '@shoal/protocol';
import { stageFor, trainerFor, VolunteerService, type VolunteerServiceOptions } from '@shoal/room/services';
import { memberEntry, type ReconnectingSignal, type ServerMessageOf } from '@shoal/signaling';
import { fetchCorpusFrom, type Member, meshDatasetSource, type ShardStart, type Worker } from '@shoal/swarm';
import { describeDataset, openBudgetedDataset, type ShardCacheOptions } from './datasets.ts';
import { acquireCliGpu } from './grads-webgpu.ts';
import {
  connectSignaling,
  describeReconnect,
  joinMesh,
  loadWrtc,
  type RoomLink,
  reconnecting,
  serverBase,
  untilSignal,
} from './room.ts';
import { UsageError } from './usage.ts';

export interface WorkerCliOptions {
  server: string;
  room: string;
  token: string;
  backend: 'webgpu' | 'cpu';
  /** CPU engine threads (--backend cpu). */
  threads?: number;
  /** The most memory this volunteer lends, bytes: a pipeline room places it in a stage that fits. */
  maxMemory?: number;
  /** The corpus, when the room trains on a file rather than Moby Dick. */
  data?: string;
  /** A dataset room: MiB of shards held at once (default 4 × the largest shard). */
  cacheMib?: number;
  /** A dataset room: where fetched shards are kept; 'none': in memory only. */
  cacheDir?: string;
  /** Seconds to wait for a host that has gone before leaving (default HOST_GRACE_MS). */
  hostGrace?: number;
  /** Steps the GPU keeps queued while round work runs (--backend webgpu). */
  pipelineDepth?: number;
  json?: boolean;
}

export interface RoomWorkerOptions {
  /** The server's base URL (serverBase). */
  server: string;
  room: string;
  token: string;
  wrtc: WrtcImplementation;
  capabilities: Capabilities;
  createEngine(config: RunConfig, params: Float32Array): Promise<Trainer>;
  /** A pipeline room's stage engine (default: the CPU stage). */
  createStage?: VolunteerServiceOptions['createStage'];
  /**
   * The corpus, when the room trains on a file rather than Moby Dick. Without it, such a room's
   * text is fetched from the host over the mesh (hosts that give the text's fingerprint).
   */
  data?: string;
  /** The corpus is loaded: where it came from. */
  onCorpus?: (corpus: Corpus, source: 'moby-dick' | 'file' | 'mesh') => void;
  /** A dataset room: the shard cache (ShardCacheOptions). */
  shardCache?: ShardCacheOptions;
  /** A dataset room's dataset is open: fetched from `url`. */
  onDataset?: (dataset: Dataset, url: string) => void;
  /** A dataset room: it started drawing from a shard. */
  onShard?: (start: ShardStart) => void;
  /** How long the host may be gone before the room counts as ended, ms (default HOST_GRACE_MS). */
  hostGraceMs?: number;
  /** Steps a WebGPU engine keeps queued (WorkerOptions.pipelineDepth). */
  pipelineDepth?: number;
}

/**
 * The room's text: the file given, the bundled Moby Dick, or the host's copy over the mesh; then
 * checked against the run config's fingerprint when the host gave one.
 */
export async function loadRoomCorpus(
  config: RunConfig,
  member: Member,
  hostId: string,
  data: string | undefined,
): Promise<{ corpus: Corpus; source: 'moby-dick' | 'file' | 'mesh' }> {
  const { corpus: name, fingerprint } = config.data;
  const seqLen = config.train.seqLen;
  let loaded: { corpus: Corpus; source: 'moby-dick' | 'file' | 'mesh' };
  if (data !== undefined) loaded = { corpus: loadCorpus({ data, seqLen }), source: 'file' };
  else if (name === 'moby-dick') loaded = { corpus: loadCorpus({ seqLen }), source: 'moby-dick' };
  else if (fingerprint === undefined) throw new UsageError(`the room trains on ${name}: pass that file with --data`);
  else {
    const bytes = await fetchCorpusFrom(member, hostId, { fingerprint, name });
    loaded = { corpus: corpusFromBytes(bytes, { name, seqLen }), source: 'mesh' };
  }
  if (fingerprint !== undefined && loaded.corpus.fingerprint !== fingerprint) {
    throw new UsageError(
      `the room trains on ${name} (fingerprint ${fingerprint}); ${loaded.corpus.name} is ${loaded.corpus.fingerprint}` +
        (data === undefined ? '' : ': pass the same file with --data, or leave --data out to receive it from the host'),
    );
  }
  return loaded;
}

export interface RoomWorker {
  joined: ServerMessageOf<'joined'>;
  link: RoomLink;
  signal: ReconnectingSignal;
  /** Resolves with why the room has ended for this worker: its host has been gone for the grace period. */
  hostGone: Promise<Error>;
  /** Resolves with why, once the host's relayed summary says the room is stopped (by the host or its schedule). */
  roomEnded: Promise<string>;
  worker: Worker;
  /** join() then run(); settles when the loop ends. */
  running: Promise<void>;
  /** Resolves with the reason the worker cannot train (the engine or the corpus failed). */
  failure: Promise<Error>;
  /** Stops after the step in progress, says leave to every peer and the server, closes. */
  leave(): Promise<void>;
}

/** The room ended as it should (the host stopped it, or its schedule ran out): `shoal worker` exits 0. */
export class RoomEnded {
  constructor(readonly why: string) {}
}

/**
 * The server no longer knows this member (its member secret refused: a server that restarted
 * without its rooms directory, say): `shoal worker` joins again with the join token, as a new peer.
 */
export class Forgotten {
  constructor(readonly why: string) {}
}

/**
 * What ends a worker's run: SIGINT/SIGTERM (the signal's name), or an Error saying why it cannot
 * go on (the engine or the text failed, the loop ended, the server refused it back, the host has
 * been gone too long).
 */
export function untilStopped(room: RoomWorker): Promise<NodeJS.Signals | Error | RoomEnded | Forgotten> {
  const { worker, signal } = room;
  return Promise.race([
    untilSignal(),
    room.roomEnded.then((why) => new RoomEnded(why)),
    room.failure,
    room.hostGone,
    room.running.then(() => new Error(`the training loop ended${worker.stopReason ? `: ${worker.stopReason}` : ''}`)),
    new Promise<Error | Forgotten>((resolve) => {
      // the state comes before the close: a refused secret is told apart from a final refusal
      signal.onState((state) => {
        if (state.kind === 'gave-up' && state.error.code === 'bad-secret') resolve(new Forgotten(state.error.message));
      });
      signal.on('close', ({ reason }) => resolve(new Error(`the signaling server refused us back: ${reason}`)));
    }),
  ]);
}

/** Joins the room, connects the mesh and starts training (what `shoal worker` is, minus the process). */
export async function joinRoomAsWorker(options: RoomWorkerOptions): Promise<RoomWorker> {
  const client = await connectSignaling(options.server);
  let joined: ServerMessageOf<'joined'>;
  try {
    joined = await client.join(options.room, options.token);
  } catch (error) {
    client.close();
    throw new UsageError(`cannot join room ${options.room}: ${(error as Error).message}`);
  }
  const signal = reconnecting(client, options.server, memberEntry(joined));
  const link = await joinMesh(signal, joined, [joined.hostId, ...joined.peers], options.wrtc);
  const graceMs = options.hostGraceMs ?? HOST_GRACE_MS;
  let stopWatchingHost = () => {};
  const hostGone = new Promise<Error>((resolve) => {
    stopWatchingHost = watchHost(signal, link.mesh, joined, graceMs, () =>
      resolve(new Error(`the host has been gone for ${formatDuration(graceMs)}, so this room has ended`)),
    );
  });
  // the host's summary of its room view (a claim of the host's only): a stopped room releases us
  const roomEnded = new Promise<string>((resolve) => {
    signal.on('relay', ({ from, data }) => {
      if (from !== joined.hostId) return;
      const summary = roomSummaryMessageSchema.safeParse(data);
      if (!summary.success || summary.data.status !== 'stopped') return;
      resolve(summary.data.endedBy === 'schedule' ? 'its schedule is done' : 'the host stopped it');
    });
  });
  const { member } = link;
  const volunteer = new VolunteerService({
    member,
    coordinator: joined.hostId,
    capabilities: options.capabilities,
    // now that the run is known, no peer may make this worker hold more than its largest message
    onRun: (config) => link.mesh.setMessageLimit(maxMessageBytesFor(config)),
    loadCorpus: async (config) => {
      const { corpus, source } = await loadRoomCorpus(config, member, joined.hostId, options.data);
      options.onCorpus?.(corpus, source);
      return corpus;
    },
    openDataset: async (config) => {
      const room = config.data.dataset as DatasetRef;
      // the room's URL first (a 'mesh:' room has none), then the host over the mesh: a file the
      // URL does not give comes from there, checked against the manifest all the same
      const mesh = meshDatasetSource(member, joined.hostId, { manifest: room.manifest });
      const sources: DatasetSource[] = [mesh];
      let url = mesh.where;
      if (room.url !== MESH_DATASET_URL) {
        url = room.url.startsWith('/') ? `${options.server}${room.url}` : room.url;
        sources.unshift(urlDatasetSource(url));
      }
      const dataset = await openBudgetedDataset(sources, { ...options.shardCache, expectHash: room.manifest });
      options.onDataset?.(dataset, url);
      return dataset;
    },
    onShard: options.onShard,
    createEngine: options.createEngine,
    createStage: options.createStage,
    pipelineDepth: options.pipelineDepth,
  });

  // Hello only once the mesh reaches every member already in the room: the coordinator names a
  // worker in rounds as soon as it says hello, and does not yet check who can reach whom.
  const announced = [joined.hostId, ...joined.peers].filter((peer) => peer !== member.self);
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    Promise.all(announced.map((peer) => member.waitForPeer(peer))),
    new Promise((resolve) => {
      timer = setTimeout(resolve, 20_000);
    }),
  ]);
  clearTimeout(timer);
  const running = volunteer.start();
  const { worker, failure } = volunteer;
  let leaving: Promise<void> | null = null;
  const leave = () => {
    leaving ??= (async () => {
      // the step in progress finishes (a bounded wait), every peer hears leave
      stopWatchingHost();
      await volunteer.leave('stopped', 5_000);
      await link.close();
      volunteer.destroy();
    })();
    return leaving;
  };
  return { joined, link, signal, hostGone, roomEnded, worker, running, failure, leave };
}

/** 120000 → '2 minutes', 90000 → '90 s'. */
function formatDuration(ms: number): string {
  const seconds = Math.round(ms / 1000);
  if (seconds >= 60 && seconds % 60 === 0) return `${seconds / 60} minute${seconds === 60 ? '' : 's'}`;
  return `${seconds} s`;
}

export async function workerCommand(options: WorkerCliOptions): Promise<void> {
  const server = serverBase(options.server);
  const wrtc = await loadWrtc();
  let release = () => {};
  const threads = options.threads ?? 1;
  let capabilities: Capabilities = {
    backend: 'cpu',
    adapter: `CPU (WebAssembly SIMD, ${threads} thread${threads === 1 ? '' : 's'})`,
    tokensPerSecond: 0,
  };
  let device: GPUDevice | null = null;
  if (options.backend === 'webgpu') {
    const gpu = await acquireCliGpu();
    device = gpu.device;
    release = () => gpu.destroy();
    capabilities = { backend: 'webgpu', adapter: formatAdapter(gpu.report), tokensPerSecond: 0 };
  }
  if (options.maxMemory !== undefined) capabilities = { ...capabilities, memoryBytes: options.maxMemory };

  const log = (event: object, text: string) => {
    if (options.json) process.stdout.write(`${JSON.stringify(event)}\n`);
    else console.error(text);
  };
  const join = () =>
    joinRoomAsWorker({
      server,
      room: options.room,
      token: options.token,
      wrtc,
      capabilities,
      createEngine: async (config, params) => {
        const engine = await trainerFor(device, config, params, { threads: options.threads });
        if (engine instanceof GpuTrainer) {
          const matmul = describeMatmul(engine.model.kernels.matmulConfig);
          log({ event: 'engine', matmul }, `engine: ${capabilities.adapter}; ${matmul}`);
        }
        return engine;
      },
      createStage: (config, spec, params, o) => stageFor(device, config, spec, params, o),
      data: options.data,
      hostGraceMs: options.hostGrace === undefined ? undefined : options.hostGrace * 1000,
      pipelineDepth: options.pipelineDepth,
      shardCache: {
        cacheMib: options.cacheMib,
        cacheDir: options.cacheDir === 'none' ? undefined : options.cacheDir,
      },
      onDataset: (dataset, url) => {
        const { name } = dataset.loaded.manifest;
        log(
          { event: 'dataset', name, manifest: dataset.hash, url, cacheBytes: dataset.cache?.budgetBytes ?? null },
          describeDataset(dataset, url),
        );
      },
      onShard: (start) =>
        log(
          { event: 'shard', ...start },
          `shard ${start.shard} of epoch ${start.epoch}${start.from > 0 ? ` from batch ${start.from}` : ''} ` +
            `(${(start.heldBytes / 2 ** 20).toFixed(2)} of ${(start.budgetBytes / 2 ** 20).toFixed(2)} MiB held)`,
        ),
      onCorpus: (corpus, source) =>
        log(
          { event: 'corpus', name: corpus.name, bytes: corpus.bytes.length, fingerprint: corpus.fingerprint, source },
          `training on ${corpus.name} (${corpus.bytes.length} bytes, ${source === 'mesh' ? 'received from the host' : source === 'file' ? 'from --data' : 'bundled'})`,
        ),
    });
  let stoppedBy: Awaited<ReturnType<typeof untilStopped>>;
  for (;;) {
    const room = await join();
    const { joined, worker } = room;
    log(
      { event: 'joined', roomId: joined.roomId, peer: joined.peerId, host: joined.hostId },
      `joined as ${joined.peerId}`,
    );
    void worker.welcomed.then(() => log({ event: 'training', peer: joined.peerId }, 'welcomed: training'));
    room.signal.onState((state) => log({ event: 'signaling', state: state.kind }, describeReconnect(state)));
    stoppedBy = await untilStopped(room);
    if (stoppedBy instanceof RoomEnded)
      log({ event: 'room-ended', why: stoppedBy.why }, `the room has ended: ${stoppedBy.why}`);
    await room.leave();
    const queue = worker.queue;
    log(
      { event: 'left', peer: joined.peerId, metrics: worker.metrics, ...(queue ? { queue } : {}) },
      `left after ${worker.metrics.innerStep} steps` +
        (queue ? ` (a step queued on the GPU ${(100 * queue.fraction).toFixed(1)}% of the time)` : ''),
    );
    if (!(stoppedBy instanceof Forgotten)) break;
    log(
      { event: 'rejoining', peer: joined.peerId, why: stoppedBy.why },
      `the server no longer knows ${joined.peerId} (${stoppedBy.why}): joining again with the join token`,
    );
  }
  release();
  if (stoppedBy instanceof Error) throw stoppedBy;
}
