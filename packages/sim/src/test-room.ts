/**
 * A room for the swarm's tests: a host and CPU workers (nano, batches of 4×64) on the simulated
 * network and a virtual clock, plus spies on what members receive. Workers can be added after
 * the start (late joiners), each with its own step time, engine options and batch stream.
 */
import { BatchSampler, loadMobyDick, splitCorpus, validationBatches } from '@shoal/data';
import { CpuTrainer } from '@shoal/model';
import {
  createWireCodec,
  type Identity,
  type KeyAlgorithm,
  type MessageKind,
  type MessageOf,
  type PeerId,
  PeerKeyRegistry,
  type PipelineConfig,
  type WireCodec,
} from '@shoal/protocol';
import type { RoomCheckpoint } from '@shoal/room';
import { createRunConfig } from '@shoal/room/run-config';
import type { CoordinatorEvent } from '@shoal/swarm';
import { type DilocoSettings, Host, Member, Worker } from '@shoal/swarm';
import { SimKeys, SimNetwork, VirtualClock } from './index.ts';
import { queuedEngine } from './test-queued-engine.ts';

export const RUN = 7;
export const corpus = splitCorpus(loadMobyDick());
const BATCH = { batchSize: 4, seqLen: 64 };

export interface WorkerSpec {
  /** Modelled compute time of one inner step, ms (it sleeps this long after a step). Default 100. */
  computeMsPerStep?: number;
  /** The CPU engine's WebAssembly SIMD kernels (false: the plain JS ones, another summation order). */
  simd?: boolean;
  /** Which batch stream it trains on. Default: its own index. */
  dataWorker?: number;
  /** Its engine poses as a GPU's that queues steps (queuedEngine): the worker pipelines its steps. */
  queued?: boolean;
}

export interface RoomOptions {
  /** Workers created at the start, w0 … w(n−1). */
  workers: number;
  spec?: (i: number) => WorkerSpec;
  /** H. Default 10. */
  innerSteps?: number;
  /** P. Default 2. */
  fragments?: number;
  /** Other DiLoCo settings (the low-rank codec, the one-step delay, …). */
  diloco?: Partial<DilocoSettings>;
  /** Owners give up on a shard after this long; the coordinator on a round after twice that. */
  deadlineMs?: number;
  /** From a crash to the peer-down it causes, ms. */
  detectionMs?: number;
  /** The host's hint after an unreachable member's reason. */
  unreachableHint?: string;
  /** Start the host from a checkpoint (a resumed run). */
  resumeFrom?: RoomCheckpoint;
  /** Also called with each of the coordinator's events (they are kept in `events` too). */
  onEvent?: (event: CoordinatorEvent) => void;
  /**
   * Every member gets a key pair of this algorithm, bound to its peer id in one registry all
   * members read (the signaling server's part): they sign and verify, and refuse what does not
   * verify, as in every real room. Key pairs are made up front for the host, the first workers and
   * IDENTITY_SPARES late joiners. Default: none, and the room's members require no signatures:
   * the one room where signatures are off, for tests of what keys do not touch.
   */
  identities?: KeyAlgorithm;
  /** Pipeline-parallel replicas: each worker holds one stage of a group (docs/pipeline.md). */
  pipeline?: PipelineConfig;
}

/** Late joiners a room with identities has key pairs for (key generation is asynchronous, addWorker is not). */
const IDENTITY_SPARES = 4;

export interface RoomWorker {
  peer: PeerId;
  member: Member;
  worker: Worker;
  /** join() then run(), once started. */
  running: Promise<void> | null;
}

export interface Received<K extends MessageKind> {
  at: number;
  from: PeerId;
  message: MessageOf<K>;
}

export type TestRoom = Awaited<ReturnType<typeof createRoom>>;

export async function createRoom(options: RoomOptions) {
  const clock = new VirtualClock();
  const network = new SimNetwork(clock, { latencyMs: 20, upMbps: 50, downMbps: 50, detectionMs: options.detectionMs });
  const codec: WireCodec = await createWireCodec();
  const config = createRunConfig({
    preset: 'nano',
    train: { ...BATCH, maxLr: 3e-3, warmupSteps: 10, totalSteps: 400, seed: 1 },
    diloco: { innerSteps: options.innerSteps ?? 10, fragments: options.fragments ?? 2, ...options.diloco },
    heartbeatMs: 200,
  });
  if (options.pipeline) config.pipeline = options.pipeline;
  const events: CoordinatorEvent[] = [];
  // the server's bindings: each member's key, bound when it joins
  const keys = options.identities
    ? await SimKeys.create(1 + options.workers + IDENTITY_SPARES, options.identities)
    : null;
  /** The Member for `peer`: with its own key pair, bound, when the room has identities. */
  const memberFor = (peer: PeerId): Member =>
    new Member(network.join(peer), codec, clock, RUN, keys ? keys.memberOptions(peer) : { requireSignatures: false });
  const hostMember = memberFor('host');
  const host = await Host.create({
    member: hostMember,
    config,
    deadlineMs: options.deadlineMs ?? 5_000,
    onEvent: (event) => {
      events.push(event);
      options.onEvent?.(event);
    },
    unreachableHint: options.unreachableHint,
    ...(options.resumeFrom && {
      params: options.resumeFrom.params,
      momentum: options.resumeFrom.momentum,
      resume: options.resumeFrom.state,
    }),
  });
  const workers: RoomWorker[] = [];

  /** A new worker on the network (seen by the others from now on), not yet started. */
  const addWorker = (spec: WorkerSpec = {}): RoomWorker => {
    const index = workers.length;
    const peer = `w${index}`;
    const member = memberFor(peer);
    const sampler = new BatchSampler(corpus.train, { ...BATCH, seed: 1, worker: spec.dataWorker ?? index });
    const worker = new Worker({
      member,
      coordinator: 'host',
      capabilities: { backend: 'cpu', adapter: 'test', tokensPerSecond: 1000 },
      createTrainer: async (run, params) => {
        const cpu = new CpuTrainer(run.model, run.train, params, spec.simd === undefined ? {} : { simd: spec.simd });
        return spec.queued ? queuedEngine(cpu, clock) : cpu;
      },
      nextBatch: () => sampler.next(),
      sleepAfterStepMs: () => spec.computeMsPerStep ?? 100,
    });
    const entry: RoomWorker = { peer, member, worker, running: null };
    workers.push(entry);
    return entry;
  };
  for (let i = 0; i < options.workers; i++) addWorker(options.spec?.(i));

  /** Joins and runs `w` until it is stopped or `until()` says so. */
  const start = (w: RoomWorker, until?: () => boolean) => {
    w.running = w.worker.join().then(() => w.worker.run(until));
  };

  /** Runs the clock to `atMs`, stops every worker, lets the last messages land and waits for the loops. */
  const finish = async (atMs: number) => {
    await clock.runAsync({ until: atMs });
    for (const w of workers) w.worker.stop();
    await clock.runAsync({ until: atMs + 1_000 });
    await Promise.all(workers.map((w) => w.running));
  };

  return {
    clock,
    network,
    codec,
    config,
    host,
    hostMember,
    events,
    /** A Member on the network as the room makes its own (a host coming back after a crash). */
    memberFor,
    /** With identities: each member's key pair, and the bindings every member verifies against. */
    identities: keys?.identities ?? new Map<PeerId, Identity>(),
    peerKeys: keys?.peerKeys ?? new PeerKeyRegistry(),
    workers,
    addWorker,
    start,
    startAll: () => {
      for (const w of workers) start(w);
    },
    finish,
    /** Every message of `kind` that `member` receives from now on (after the handlers registered before). */
    spy<K extends MessageKind>(member: Member, kind: K): Received<K>[] {
      const log: Received<K>[] = [];
      member.on(kind, (from, message) => log.push({ at: clock.now(), from, message }));
      return log;
    },
    /** The aggregates a member receives: shard results with a payload (owners' and the host's), not checks. */
    spyResults(member: Member): Received<'shard-result'>[] {
      const log: Received<'shard-result'>[] = [];
      member.on('shard-result', (from, message) => {
        if (!message.check) log.push({ at: clock.now(), from, message });
      });
      return log;
    },
    /** θ_local of a worker (its engine's read is tracked work: the clock must hand it back). */
    async localParams(w: RoomWorker): Promise<Float32Array> {
      const params = w.worker.params();
      await clock.settle();
      return params;
    },
    committed: () => events.filter((e) => e.event === 'round-committed'),
    aborted: () => events.filter((e) => e.event === 'round-aborted'),
  };
}

/** `value`, or an error that names what is missing (the tests' non-null assertion). */
export function must<T>(value: T | null | undefined, what = 'a value'): T {
  if (value === null || value === undefined) throw new Error(`expected ${what}`);
  return value;
}

/** The committed round and hash of every fragment a worker's replica holds. */
export function replicaStates(worker: Worker): { fragment: number; round: number; hash: string }[] | undefined {
  return worker.replica?.state.fragments.map((f, fragment) => ({ fragment, round: f.round, hash: f.hash }));
}

/** Validation loss of `params` on 8 fixed batches. */
export async function evaluate(config: ReturnType<typeof createRunConfig>, params: Float32Array): Promise<number> {
  const trainer = new CpuTrainer(config.model, config.train, params);
  return trainer.evaluate(validationBatches(corpus.validation, { ...BATCH, count: 8 }));
}
