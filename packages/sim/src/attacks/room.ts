/**
 * One run of the in-memory room on the real engine, with an attack or without (the clean run
 * beside it): a host and W CPU workers on the simulated network and a virtual clock, as
 * `shoal simulate` builds them, the referee (oracle.ts) and the meters of what honest members hold
 * on the attackers' account. Everything is watched from outside the swarm:
 * - training: the rounds committed, when, and whose contributions they hold;
 * - crashes: a worker loop that throws, a handler that throws ('handler-error' counters);
 * - detection: refusals that honest members count against a hostile peer, the coordinator marking
 *   it (status other than synced/syncing, a reason, or dropping it), aborted rounds;
 * - bytes held: meters.ts.
 */
import { BatchSampler } from '@shoal/data';
import { buildFragments, createFragmentHasher } from '@shoal/diloco';
import {
  type Batch,
  buildLayout,
  defaultTrainConfig,
  type GptConfig,
  presetConfig,
  type TrainConfig,
  type Trainer,
} from '@shoal/model';
import { createWireCodec, type PeerId, type RunConfig } from '@shoal/protocol';
import { createRunConfig } from '@shoal/room/run-config';
import { Host, Member, Worker } from '@shoal/swarm';
import { SimKeys, SimNetwork, VirtualClock } from '../index.ts';
import { SharedRounds } from '../shared-rounds.ts';
import { SharedVectors } from '../shared-vectors.ts';
import { Forger } from './forge.ts';
import { FutureRoundMeter, UplinkMeter } from './meters.ts';
import { type OracleFindings, RoundOracle } from './oracle.ts';
import type { Attack, AttackContext, HostilePeer } from './types.ts';

export interface RoomSettings {
  preset: string;
  workers: number;
  /** How many workers turn hostile, and which (see Attack.hostileAt). */
  hostile: number;
  hostileAt: 'first' | 'last';
  /** Training tokens of the whole room (every worker stops at its share). */
  tokens: number;
  seed: number;
  /** Sequences per worker per inner step, and their length. */
  batch: number;
  seqLen: number;
  innerSteps: number;
  fragments: number;
  /** Modelled compute time of one inner step, ms (each worker sleeps this long after a step). */
  computeMsPerStep: number;
  /** Owners give up on a shard after this long; the coordinator on a round after twice that. */
  deadlineMs: number;
  /** The virtual time (ms) at which the attack begins. */
  startMs: number;
  /** The virtual time (ms) at which the run is stopped, done or not. */
  capMs: number;
  trainTokens: Uint8Array;
  evalBatches: Batch[];
  createTrainer(model: GptConfig, train: TrainConfig, params: Float32Array): Promise<Trainer>;
}

export interface RoomRun {
  /** Validation loss of the host's θ_global at the end; null when it is not finite. */
  evalLoss: number | null;
  commits: { fragment: number; round: number; atMs: number; contributors: PeerId[] }[];
  aborts: { fragment: number; round: number; reason: string; atMs: number }[];
  /** When every honest worker had trained its tokens (or the cap), virtual ms. */
  trainingEndMs: number;
  timedOut: boolean;
  crashes: string[];
  handlerErrors: number;
  findings: OracleFindings;
  /** Refusals that honest members counted, by the peer refused. */
  refusalsByPeer: Record<PeerId, number>;
  /** Why honest members refused hostile peers, from their latest refusals (each keeps 32). */
  refusalReasons: string[];
  /** Peers the coordinator marked at some point (a status, a reason, or dropped). */
  markedPeers: PeerId[];
  peakBytesHeld: number;
  /** State-transfer bytes honest members sent hostile peers per state-request byte they asked. */
  amplification: number | null;
  largestMessage: number;
  forgeFailures: string[];
  hostile: PeerId[];
  wallMs: number;
}

const RUN_ID = 13;

/** The room's run: `settings.tokens` across its workers, H and P as set, the design's other defaults. */
export function roomConfig(settings: Omit<RoomSettings, 'trainTokens' | 'evalBatches' | 'createTrainer'>): RunConfig {
  const steps = roomSteps(settings);
  return createRunConfig({
    model: presetConfig(settings.preset),
    train: defaultTrainConfig({
      batchSize: settings.batch,
      seqLen: settings.seqLen,
      maxLr: 3e-3,
      warmupSteps: Math.min(100, Math.floor(steps / 10)),
      totalSteps: steps,
      seed: settings.seed,
    }),
    diloco: { innerSteps: settings.innerSteps, fragments: settings.fragments },
    heartbeatMs: 200,
  });
}

/** Inner steps each worker trains. */
function roomSteps(settings: Pick<RoomSettings, 'tokens' | 'workers' | 'batch' | 'seqLen'>): number {
  return Math.max(1, Math.ceil(settings.tokens / (settings.workers * settings.batch * settings.seqLen)));
}

export async function runRoom(settings: RoomSettings, attack: Attack | null): Promise<RoomRun> {
  const wallStart = performance.now();
  const config = roomConfig(settings);
  const model = config.model;
  const tokensPerStep = settings.batch * settings.seqLen;
  const steps = roomSteps(settings);
  const clock = new VirtualClock();
  const network = new SimNetwork(clock, { latencyMs: 20, upMbps: 50, downMbps: 50 });
  const codec = await createWireCodec();
  const fragments = buildFragments(buildLayout(model), config.diloco.fragments, config.diloco.fragmentMode);
  const hasher = await createFragmentHasher(config.diloco.hashAlgorithm);
  const peers = Array.from({ length: settings.workers }, (_, i) => `w${i}`);
  const hostileCount = Math.min(settings.hostile, settings.workers - 1);
  const hostileIds = new Set(
    settings.hostileAt === 'first' ? peers.slice(0, hostileCount) : peers.slice(settings.workers - hostileCount),
  );
  // Every member has a key pair, bound to its id as the signaling server binds them, and the
  // room refuses unsigned contributions, results and hash reports, as every room does: a hostile
  // peer signs its own.
  const keys = await SimKeys.create(1 + settings.workers);
  const memberOf = (peer: PeerId) => new Member(network.join(peer), codec, clock, RUN_ID, keys.memberOptions(peer));
  for (const peer of ['host', ...peers]) keys.memberOptions(peer);
  const forger = new Forger(
    network,
    codec,
    RUN_ID,
    () => clock.now() >= settings.startMs,
    keys.identities,
    (work) => clock.track(work),
  );
  const commits: RoomRun['commits'] = [];
  const aborts: RoomRun['aborts'] = [];
  let oracle: RoundOracle | null = null;
  const meter = new FutureRoundMeter(hostileIds, (p) => oracle?.latestRound(p) ?? 0);

  // Its replicas share what they agree on as `shoal simulate`'s do (round-memo.ts): each result
  // under its exact inputs, so what a hostile peer sends one member is never what another computes from.
  const vectors = new SharedVectors();
  const memo = new SharedRounds();
  const hostMember = memberOf('host');
  meter.watch(hostMember);
  // the host may aggregate too (a referee of disputed shards): what it had, before its handlers
  hostMember.on('contribution', (from, message) => oracle?.arrival('host', from, message));
  const host = await Host.create({
    member: hostMember,
    config,
    params: memo.seededInit(model, config.train.seed),
    vectors,
    memo,
    deadlineMs: settings.deadlineMs,
    onEvent: (event) => {
      if (event.event === 'round-committed') {
        oracle?.committedRound(event.fragment, event.round, event.hash);
        commits.push({
          fragment: event.fragment,
          round: event.round,
          atMs: clock.now(),
          contributors: event.contributors,
        });
      } else if (event.event === 'round-aborted') {
        aborts.push({ fragment: event.fragment, round: event.round, reason: event.reason, atMs: clock.now() });
      }
    },
  });
  const referee = new RoundOracle(config, codec, forger.forged, host.replica.state, 'host');
  oracle = referee;
  network.onSend('host', referee.sendHook('host'));

  const perWorkerTokens = steps * tokensPerStep;
  const workers = peers.map((peer, i) => {
    const member = memberOf(peer);
    network.onSend(peer, referee.sendHook(peer));
    // before the Worker's own handler: what the owner had when it aggregated
    member.on('contribution', (from, message) => referee.arrival(peer, from, message));
    if (!hostileIds.has(peer)) meter.watch(member);
    const sampler = new BatchSampler(settings.trainTokens, {
      batchSize: settings.batch,
      seqLen: settings.seqLen,
      seed: settings.seed,
      worker: i,
    });
    const worker = new Worker({
      member,
      coordinator: 'host',
      capabilities: { backend: 'cpu', adapter: 'attacks', tokensPerSecond: 0 },
      createTrainer: (run, params) => settings.createTrainer(run.model, run.train, params),
      nextBatch: () => sampler.next(),
      sleepAfterStepMs: () => settings.computeMsPerStep,
      vectors,
      memo,
      initialParams: (run) => memo.seededInit(run.model, run.train.seed),
    });
    return { peer, member, worker };
  });
  const hostile: HostilePeer[] = workers.filter((w) => hostileIds.has(w.peer));
  const honest = workers.filter((w) => !hostileIds.has(w.peer));
  const honestMembers = [hostMember, ...honest.map((w) => w.member)];

  const uplinks = new UplinkMeter(network, hostile, honestMembers);

  let finished = false;
  const context: AttackContext = {
    clock,
    network,
    codec,
    config,
    fragments,
    hasher,
    coordinator: 'host',
    honest: honest.map((w) => w.peer),
    startMs: settings.startMs,
    isActive: () => clock.now() >= settings.startMs,
    roundOpen: (p, round) => referee.roundOpen(p, round),
    latestRound: (p) => referee.latestRound(p),
    rewrite: (peer, kind, change) => forger.rewrite(peer, kind, change),
    forge: (from, to, message) => forger.forge(from, to, message),
    every(ms, tick) {
      const fire = () => {
        if (finished) return;
        tick();
        clock.schedule(ms, fire);
      };
      clock.scheduleAt(Math.max(clock.now(), settings.startMs), fire);
    },
  };
  for (const h of hostile) attack?.install?.(context, h);

  // The coordinator's marks: any status but synced/syncing, a reason, or a member it dropped.
  const marked = new Set<PeerId>();
  let peakBytesHeld = 0;
  const poll = () => {
    referee.poll();
    for (const peer of peers) {
      const info = host.coordinator.members.get(peer);
      const seen = commits.length > 0 || clock.now() > settings.startMs;
      if (
        (!info && seen) ||
        (info && ((info.status !== 'synced' && info.status !== 'syncing') || info.reason !== ''))
      ) {
        marked.add(peer);
      }
    }
    for (const member of honestMembers) {
      peakBytesHeld = Math.max(peakBytesHeld, meter.held(member.self) + uplinks.queued(member.self));
    }
  };

  const crashes: string[] = [];
  let honestDone = 0;
  const outOfTime = () => clock.now() >= settings.capMs;
  for (const w of workers) {
    const loop = w.worker
      .join()
      .then(() => w.worker.run(() => w.worker.metrics.tokens >= perWorkerTokens || outOfTime()));
    if (hostileIds.has(w.peer)) {
      loop.catch(() => {}); // a hostile worker that breaks itself is not the room's failure
      continue;
    }
    loop.then(
      () => honestDone++,
      (error: unknown) => {
        honestDone++;
        crashes.push(`${w.peer}'s loop: ${String((error as Error)?.message ?? error).slice(0, 160)}`);
      },
    );
  }
  try {
    await clock.runAsync({
      stopWhen: () => {
        poll();
        return honestDone === honest.length || outOfTime();
      },
    });
    const trainingEndMs = clock.now();
    const timedOut = honestDone < honest.length;
    for (const w of workers) w.worker.stop();

    // Let the rounds in flight finish (due contributions go out at boundaries), as long as a
    // round may take, then stop every timer an attack keeps going.
    const settleUntil = clock.now() + 2 * settings.deadlineMs + 1_000;
    let settled = false;
    const settling = (async () => {
      while (clock.now() < settleUntil && fragments.some((f) => host.coordinator.isInFlight(f.index))) {
        for (const w of honest) await w.worker.boundary().catch(() => false);
        await clock.sleep(10);
      }
      settled = true;
    })();
    await clock.runAsync({
      stopWhen: () => {
        poll();
        return settled;
      },
    });
    await settling;
    finished = true;
    poll();
    meter.flush();

    const params = host.params();
    let evalLoss: number | null = null;
    const findings = referee.report();
    if (params.every(Number.isFinite)) {
      const [first] = settings.evalBatches;
      if (!first) throw new RangeError('no validation batches');
      const evalTrain = { ...config.train, batchSize: first.inputs.length / config.train.seqLen };
      const trainer = await settings.createTrainer(model, evalTrain, params);
      try {
        const loss = await trainer.evaluate(settings.evalBatches);
        evalLoss = Number.isFinite(loss) ? loss : null;
      } finally {
        trainer.destroy();
      }
    }
    if (evalLoss === null) findings.nonFinite = true;

    const refusalsByPeer: Record<PeerId, number> = {};
    const refusalReasons = new Set<string>();
    let handlerErrors = 0;
    for (const member of honestMembers) {
      for (const [peer, n] of Object.entries(member.counters.byPeer()))
        refusalsByPeer[peer] = (refusalsByPeer[peer] ?? 0) + n;
      for (const r of member.counters.recent()) if (hostileIds.has(r.from)) refusalReasons.add(r.reason);
      handlerErrors += member.counters.total('handler-error');
    }
    return {
      evalLoss,
      commits,
      aborts,
      trainingEndMs,
      timedOut,
      crashes,
      handlerErrors,
      findings,
      refusalsByPeer,
      refusalReasons: [...refusalReasons].sort(),
      markedPeers: [...marked],
      peakBytesHeld,
      amplification: uplinks.amplification(),
      largestMessage: referee.largestMessage,
      forgeFailures: forger.failures,
      hostile: [...hostileIds],
      wallMs: performance.now() - wallStart,
    };
  } finally {
    finished = true;
    for (const w of workers) w.worker.destroy();
  }
}
