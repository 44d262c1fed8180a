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
import {
  type Batch,
  defaultTrainConfig,
  type GptConfig,
  presetConfig,
  type TrainConfig,
  type Trainer,
} from '@shoal/model';
import type { PeerId, RunConfig } from '@shoal/protocol';
import { createRunConfig } from '@shoal/room/run-config';
import type { Member } from '@shoal/swarm';
import type { OracleFindings } from './oracle.ts';
import { buildRoom, type Room } from './room-build.ts';
import type { Attack, AttackContext } from './types.ts';

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

/**
 * Runs the room until every honest worker has trained its share (or the cap), lets the rounds in
 * flight settle, and reports what was seen; `attack` is installed on each hostile worker.
 */
export async function runRoom(settings: RoomSettings, attack: Attack | null): Promise<RoomRun> {
  const wallStart = performance.now();
  const room = await buildRoom(settings, roomConfig(settings));
  const { clock, workers, honest } = room;
  let finished = false;
  const context = attackContext(room, settings, () => finished);
  for (const h of room.hostile) attack?.install?.(context, h);
  const poller = new MarkPoller(room, settings.startMs);
  const loops = startWorkers(room, settings);
  try {
    await clock.runAsync({
      stopWhen: () => {
        poller.poll();
        return loops.honestDone === honest.length || loops.outOfTime();
      },
    });
    const trainingEndMs = clock.now();
    const timedOut = loops.honestDone < honest.length;
    for (const w of workers) w.worker.stop();
    await settle(room, settings, poller);
    finished = true; // stops every timer an attack keeps going
    poller.poll();
    room.meter.flush();

    const { evalLoss, findings } = await evaluate(room, settings);
    const refusals = refusalsOf(room.honestMembers, room.hostileIds);
    return {
      evalLoss,
      commits: room.commits,
      aborts: room.aborts,
      trainingEndMs,
      timedOut,
      crashes: loops.crashes,
      handlerErrors: refusals.handlerErrors,
      findings,
      refusalsByPeer: refusals.byPeer,
      refusalReasons: refusals.reasons,
      markedPeers: [...poller.marked],
      peakBytesHeld: poller.peakBytesHeld,
      amplification: room.uplinks.amplification(),
      largestMessage: room.referee.largestMessage,
      forgeFailures: room.forger.failures,
      hostile: [...room.hostileIds],
      wallMs: performance.now() - wallStart,
    };
  } finally {
    finished = true;
    for (const w of workers) w.worker.destroy();
  }
}

/** What an attack sees of the room; its timers (`every`) stop once `finished` says so. */
function attackContext(room: Room, settings: RoomSettings, finished: () => boolean): AttackContext {
  const { clock, referee, forger } = room;
  return {
    clock,
    network: room.network,
    codec: room.codec,
    config: room.config,
    fragments: room.fragments,
    hasher: room.hasher,
    coordinator: 'host',
    honest: room.honest.map((w) => w.peer),
    startMs: settings.startMs,
    isActive: () => clock.now() >= settings.startMs,
    roundOpen: (p, round) => referee.roundOpen(p, round),
    latestRound: (p) => referee.latestRound(p),
    rewrite: (peer, kind, change) => forger.rewrite(peer, kind, change),
    forge: (from, to, message) => forger.forge(from, to, message),
    every(ms, tick) {
      const fire = () => {
        if (finished()) return;
        tick();
        clock.schedule(ms, fire);
      };
      clock.scheduleAt(Math.max(clock.now(), settings.startMs), fire);
    },
  };
}

/**
 * Polled before every event: the referee's own poll, the peers the coordinator marked (any status
 * but synced/syncing, a reason, or a member it dropped) and the most bytes an honest member held.
 */
class MarkPoller {
  readonly marked = new Set<PeerId>();
  peakBytesHeld = 0;

  constructor(
    private readonly room: Room,
    private readonly startMs: number,
  ) {}

  poll(): void {
    const { referee, peers, host, commits, clock, honestMembers, meter, uplinks } = this.room;
    referee.poll();
    for (const peer of peers) {
      const info = host.coordinator.members.get(peer);
      const seen = commits.length > 0 || clock.now() > this.startMs;
      if (
        (!info && seen) ||
        (info && ((info.status !== 'synced' && info.status !== 'syncing') || info.reason !== ''))
      ) {
        this.marked.add(peer);
      }
    }
    for (const member of honestMembers) {
      this.peakBytesHeld = Math.max(this.peakBytesHeld, meter.held(member.self) + uplinks.queued(member.self));
    }
  }
}

interface WorkerLoops {
  /** Honest workers whose loop ended, trained out or thrown. */
  readonly honestDone: number;
  /** The honest loops that threw, and why. */
  readonly crashes: string[];
  /** The run's cap is reached. */
  outOfTime(): boolean;
}

/** Starts every worker's loop: join, then train its share of the tokens or until the cap. */
function startWorkers(room: Room, settings: RoomSettings): WorkerLoops {
  const perWorkerTokens = roomSteps(settings) * settings.batch * settings.seqLen;
  const { clock, hostileIds } = room;
  const loops = {
    honestDone: 0,
    crashes: [] as string[],
    outOfTime: () => clock.now() >= settings.capMs,
  };
  for (const w of room.workers) {
    const loop = w.worker
      .join()
      .then(() => w.worker.run(() => w.worker.metrics.tokens >= perWorkerTokens || loops.outOfTime()));
    if (hostileIds.has(w.peer)) {
      loop.catch(() => {}); // a hostile worker that breaks itself is not the room's failure
      continue;
    }
    loop.then(
      () => loops.honestDone++,
      (error: unknown) => {
        loops.honestDone++;
        loops.crashes.push(`${w.peer}'s loop: ${String((error as Error)?.message ?? error).slice(0, 160)}`);
      },
    );
  }
  return loops;
}

/**
 * Lets the rounds in flight finish (due contributions go out at boundaries), as long as a round
 * may take, polling as the clock runs.
 */
async function settle(room: Room, settings: RoomSettings, poller: MarkPoller): Promise<void> {
  const { clock, fragments, host, honest } = room;
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
      poller.poll();
      return settled;
    },
  });
  await settling;
}

/** The referee's findings, and the validation loss of the host's θ_global (null when not finite). */
async function evaluate(
  room: Room,
  settings: RoomSettings,
): Promise<{ evalLoss: number | null; findings: OracleFindings }> {
  const { config } = room;
  const params = room.host.params();
  let evalLoss: number | null = null;
  const findings = room.referee.report();
  if (params.every(Number.isFinite)) {
    const [first] = settings.evalBatches;
    if (!first) throw new RangeError('no validation batches');
    const evalTrain = { ...config.train, batchSize: first.inputs.length / config.train.seqLen };
    const trainer = await settings.createTrainer(config.model, evalTrain, params);
    try {
      const loss = await trainer.evaluate(settings.evalBatches);
      evalLoss = Number.isFinite(loss) ? loss : null;
    } finally {
      trainer.destroy();
    }
  }
  if (evalLoss === null) findings.nonFinite = true;
  return { evalLoss, findings };
}

/** The refusals honest members counted, by peer refused; why they refused hostile peers; their handler errors. */
function refusalsOf(
  honestMembers: readonly Member[],
  hostileIds: ReadonlySet<PeerId>,
): { byPeer: Record<PeerId, number>; reasons: string[]; handlerErrors: number } {
  const byPeer: Record<PeerId, number> = {};
  const reasons = new Set<string>();
  let handlerErrors = 0;
  for (const member of honestMembers) {
    for (const [peer, n] of Object.entries(member.counters.byPeer())) byPeer[peer] = (byPeer[peer] ?? 0) + n;
    for (const r of member.counters.recent()) if (hostileIds.has(r.from)) reasons.add(r.reason);
    handlerErrors += member.counters.total('handler-error');
  }
  return { byPeer, reasons: [...reasons].sort(), handlerErrors };
}
