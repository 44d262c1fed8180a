/**
 * `shoal attacks`'s engine: each attack in its own in-memory room on the real engine, beside a
 * clean run of the same room and seed (one per room size, shared by the attacks), and a verdict.
 *
 * - stopped: no wrong aggregate committed (oracle.ts: a shard no aggregator computed, or one that
 *   the attackers moved by more than MAX_INFLUENCE shares each), no state the coordinator never committed
 *   at the host, no crash, no NaN, training went on at no less than half the clean pace (done
 *   within 2× the clean run's time, with at least half as many commits after the attack's start,
 *   counting those that hold the contributions of at least half the honest workers),
 *   and no member held more than the memory budget on the attackers' account.
 * - detected: honest members refused more of the attackers' messages than in the clean run, the
 *   coordinator marked an attacker that it did not mark there, or more rounds aborted.
 * - memory budget: 4× the largest message the run needs: the clean run's largest, or a state
 *   transfer part of the largest fragment (8 bytes a value), whichever is larger.
 */
import { buildFragments } from '@shoal/diloco';
import {
  type Batch,
  buildLayout,
  CpuTrainer,
  type GptConfig,
  presetConfig,
  type TrainConfig,
  type Trainer,
} from '@shoal/model';
import { type PeerId, type RunConfig, STATE_PART_VALUES } from '@shoal/protocol';
import { DEFAULT_DILOCO } from '@shoal/room/run-config';
import { ATTACKS_ELSEWHERE, type AttackElsewhere, selectAttacks } from './catalogue.ts';
import { MAX_INFLUENCE } from './oracle.ts';
import { type RoomRun, type RoomSettings, roomConfig, runRoom } from './room.ts';
import type { Attack, AttackFamily } from './types.ts';

export interface AttackRunOptions {
  preset: string;
  workers: number;
  hostile: number;
  /** Training tokens per run, all workers together. */
  tokens: number;
  seed: number;
  /** Attack names; all when empty or omitted. */
  only?: readonly string[];
  trainTokens: Uint8Array;
  evalBatches: Batch[];
  /** The engine; the CPU one when omitted. */
  createTrainer?(model: GptConfig, train: TrainConfig, params: Float32Array): Promise<Trainer>;
  /** Errors that escaped the swarm (unhandled rejections) since the last call: counted as crashes. */
  drainUnhandled?(): string[];
  onProgress?(progress: { run: string; index: number; total: number; finished?: AttackResult | CleanRun }): void;
}

/** The room every run uses; the same for the clean run and the attack beside it. */
export const ROOM_DEFAULTS = {
  batch: 4,
  seqLen: 64,
  innerSteps: 10,
  fragments: 2,
  computeMsPerStep: 100,
  deadlineMs: 5_000,
} as const;

export interface CleanRun {
  workers: number;
  evalLoss: number | null;
  roundsCommitted: number;
  roundsAborted: number;
  simSeconds: number;
  /** The referee's self-check: on a clean run every checked shard matches, influence ≈ 0. */
  maxInfluence: number;
  madeUpShards: number;
  checkedShards: number;
  wallSeconds: number;
}

export interface AttackResult {
  name: string;
  family: AttackFamily;
  summary: string;
  stopped: boolean;
  detected: boolean;
  evalLoss: number | null;
  cleanEvalLoss: number | null;
  roundsCommitted: number | null;
  roundsAborted: number | null;
  peakBytesHeld: number | null;
  /** 'room', or what a probe ran against instead. */
  scope: string;
  workers: number;
  hostile: PeerId[];
  /** Why it was not stopped (empty when it was). */
  why: string[];
  /** How the room noticed (empty when it did not). */
  signals: string[];
  /** Commits after the attack's start that hold at least half the honest workers' contributions. */
  commitsAfterStart: number | null;
  cleanCommitsAfterStart: number | null;
  /** The most shares the attackers moved a committed shard by (oracle.ts, MAX_INFLUENCE). */
  maxInfluence: number | null;
  amplification: number | null;
  simSeconds: number | null;
  wallSeconds: number;
  /** The attack's own failures to forge (a bug in the attack, not the room). */
  attackErrors: string[];
}

export interface AttackReport {
  settings: { preset: string; workers: number; hostile: number; tokens: number; seed: number; startMs: number };
  budgetBytes: number;
  clean: CleanRun[];
  attacks: AttackResult[];
  elsewhere: readonly AttackElsewhere[];
}

/** Clean runs may take this many times the modelled compute before they count as stuck. */
const CLEAN_CAP_FACTOR = 4;
/** An attack run is stopped at this many times the clean run's training time: half the pace. */
const ATTACK_CAP_FACTOR = 2;
/** Training went on if at least this share of the clean run's commits happened after the start. */
const WENT_ON_SHARE = 0.5;
/**
 * An attack may cost the room this much validation loss over the clean run's: 2%, or 4% in a
 * room of two, where only the honest worker's Δ reaches θ_global once its hostile is marked (half
 * the clean run's tokens). The referee judges what reached θ_global against what each sender's
 * code produced; a worker that changes what its code produces (its own Δ ×100) shows only here.
 */
const lossAllowance = (workers: number) => (workers <= 2 ? 1.04 : 1.02);

export async function runAttacks(options: AttackRunOptions): Promise<AttackReport> {
  const attacks = selectAttacks(options.only);
  const createTrainer =
    options.createTrainer ??
    (async (model: GptConfig, train: TrainConfig, params: Float32Array) => new CpuTrainer(model, train, params));
  const startMs = 2.5 * ROOM_DEFAULTS.innerSteps * ROOM_DEFAULTS.computeMsPerStep; // after two rounds of each fragment
  const settingsFor = (workers: number): RoomSettings => ({
    ...ROOM_DEFAULTS,
    preset: options.preset,
    workers,
    hostile: 0,
    hostileAt: 'last',
    tokens: options.tokens,
    seed: options.seed,
    startMs,
    capMs: Number.POSITIVE_INFINITY,
    trainTokens: options.trainTokens,
    evalBatches: options.evalBatches,
    createTrainer,
  });
  const needs = [...new Set(attacks.filter((a) => !a.probe).map((a) => a.workers ?? options.workers))];
  const total = needs.length + attacks.length;
  let index = 0;
  const cleanRuns = new Map<number, RoomRun>();
  const clean: CleanRun[] = [];
  for (const workers of needs) {
    options.onProgress?.({ run: `clean, ${workers} workers`, index: index++, total });
    const settings = settingsFor(workers);
    const steps = Math.ceil(options.tokens / (workers * settings.batch * settings.seqLen));
    const run = await runRoom(
      { ...settings, capMs: CLEAN_CAP_FACTOR * steps * settings.computeMsPerStep + 30_000 },
      null,
    );
    run.crashes.push(...(options.drainUnhandled?.() ?? []));
    cleanRuns.set(workers, run);
    const summary = cleanSummary(workers, run);
    clean.push(summary);
    options.onProgress?.({ run: `clean, ${workers} workers`, index: index - 1, total, finished: summary });
  }
  const budgetBytes = memoryBudget(options.preset, cleanRuns.get(options.workers) ?? [...cleanRuns.values()][0]);

  const results: AttackResult[] = [];
  for (const attack of attacks) {
    options.onProgress?.({ run: attack.name, index: index++, total });
    const result = attack.probe
      ? judgeProbe(
          attack,
          roomConfig(settingsFor(options.workers)),
          budgetBytes,
          clean.find((c) => c.workers === options.workers)?.evalLoss ?? null,
        )
      : await runAttack(attack);
    results.push(result);
    options.onProgress?.({ run: attack.name, index: index - 1, total, finished: result });
  }
  return {
    settings: {
      preset: options.preset,
      workers: options.workers,
      hostile: options.hostile,
      tokens: options.tokens,
      seed: options.seed,
      startMs,
    },
    budgetBytes,
    clean,
    attacks: results,
    elsewhere: ATTACKS_ELSEWHERE,
  };

  async function runAttack(attack: Attack): Promise<AttackResult> {
    const workers = attack.workers ?? options.workers;
    const baseline = cleanRuns.get(workers) as RoomRun;
    const settings: RoomSettings = {
      ...settingsFor(workers),
      hostile: options.hostile,
      hostileAt: attack.hostileAt ?? 'last',
      capMs: ATTACK_CAP_FACTOR * baseline.trainingEndMs,
    };
    const run = await runRoom(settings, attack);
    run.crashes.push(...(options.drainUnhandled?.() ?? []));
    return judge(attack, run, baseline, settings, budgetBytes);
  }
}

function cleanSummary(workers: number, run: RoomRun): CleanRun {
  return {
    workers,
    evalLoss: run.evalLoss,
    roundsCommitted: run.commits.length,
    roundsAborted: run.aborts.length,
    simSeconds: run.trainingEndMs / 1000,
    maxInfluence: run.findings.maxInfluence,
    madeUpShards: run.findings.madeUpShards,
    checkedShards: run.findings.checkedShards,
    wallSeconds: run.wallMs / 1000,
  };
}

function memoryBudget(preset: string, clean: RoomRun | undefined): number {
  const fragments = buildFragments(
    buildLayout(presetConfig(preset)),
    ROOM_DEFAULTS.fragments,
    DEFAULT_DILOCO.fragmentMode,
  );
  const largestFragment = Math.max(...fragments.map((f) => f.size));
  const statePart = 8 * Math.min(largestFragment, STATE_PART_VALUES) + 1024; // θ and m, fp32, + header and JSON
  return 4 * Math.max(statePart, clean?.largestMessage ?? 0);
}

export function formatBytes(bytes: number): string {
  if (bytes >= 1024 * 1024) return `${(bytes / (1024 * 1024)).toFixed(1)} MiB`;
  if (bytes >= 1024) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${bytes} B`;
}

function judge(attack: Attack, run: RoomRun, clean: RoomRun, settings: RoomSettings, budget: number): AttackResult {
  const { findings } = run;
  // Training goes on while rounds commit the work of at least half the honest workers.
  const honest = settings.workers - run.hostile.length;
  const afterStart = (commits: RoomRun['commits']) =>
    commits.filter(
      (c) => c.atMs >= settings.startMs && c.contributors.filter((p) => !run.hostile.includes(p)).length >= honest / 2,
    ).length;
  const after = afterStart(run.commits);
  const cleanAfter = afterStart(clean.commits);
  const why: string[] = [];
  if (findings.uncommittedStates > 0) why.push(`the host took ${findings.uncommittedStates} state(s) nobody committed`);
  if (findings.madeUpShards > 0)
    why.push(`wrong aggregate: ${findings.madeUpShards} committed shard(s) no aggregator computed`);
  // each attacker may move a step by up to MAX_INFLUENCE shares; h of them, h times that
  const influenceLimit = MAX_INFLUENCE * Math.max(1, run.hostile.length);
  if (findings.maxInfluence > influenceLimit) {
    const moved = findings.maxInfluence.toPrecision(3);
    why.push(`wrong aggregate: the attack moved a step by ${moved} shares (limit ${influenceLimit})`);
  }
  if (run.crashes.length > 0)
    why.push(`crash: ${run.crashes[0]}${run.crashes.length > 1 ? ` (+${run.crashes.length - 1})` : ''}`);
  if (run.handlerErrors > clean.handlerErrors) why.push(`${run.handlerErrors - clean.handlerErrors} handler error(s)`);
  if (findings.nonFinite) why.push('non-finite θ_global or validation loss');
  if (run.timedOut)
    why.push(
      `training not done after ${(settings.capMs / 1000).toFixed(0)} s (clean: ${(clean.trainingEndMs / 1000).toFixed(0)} s)`,
    );
  else if (after < WENT_ON_SHARE * cleanAfter) {
    why.push(`stalled: ${after} commits of most honest workers after the start, clean ${cleanAfter}`);
  }
  if (run.peakBytesHeld > budget) why.push(`held ${formatBytes(run.peakBytesHeld)} > budget ${formatBytes(budget)}`);
  const allowance = lossAllowance(settings.workers);
  if (run.evalLoss !== null && clean.evalLoss !== null && run.evalLoss > allowance * clean.evalLoss) {
    const over = (100 * (run.evalLoss / clean.evalLoss - 1)).toFixed(1);
    why.push(`eval loss ${over}% above the clean run's (allowed ${(100 * (allowance - 1)).toFixed(0)}%)`);
  }
  // An attack that could not forge its messages proved nothing: it is not counted as stopped.
  if (run.forgeFailures.length > 0) why.push(`the attack failed to forge: ${run.forgeFailures[0]}`);

  const signals: string[] = [];
  for (const peer of run.hostile) {
    const refused = (run.refusalsByPeer[peer] ?? 0) - (clean.refusalsByPeer[peer] ?? 0);
    const reasons = run.refusalReasons.length > 0 ? ` (${run.refusalReasons.join(', ')})` : '';
    if (refused > 0) signals.push(`${refused} refusal(s) of ${peer}${reasons}`);
    if (run.markedPeers.includes(peer) && !clean.markedPeers.includes(peer)) signals.push(`coordinator marked ${peer}`);
  }
  if (run.aborts.length > clean.aborts.length) {
    const reasons = [...new Set(run.aborts.map((a) => a.reason))].join(', ');
    signals.push(`${run.aborts.length - clean.aborts.length} more round(s) aborted (${reasons})`);
  }
  return {
    name: attack.name,
    family: attack.family,
    summary: attack.summary,
    stopped: why.length === 0,
    detected: signals.length > 0,
    evalLoss: run.evalLoss,
    cleanEvalLoss: clean.evalLoss,
    roundsCommitted: run.commits.length,
    roundsAborted: run.aborts.length,
    peakBytesHeld: run.peakBytesHeld,
    scope: 'room',
    workers: settings.workers,
    hostile: run.hostile,
    why,
    signals,
    commitsAfterStart: after,
    cleanCommitsAfterStart: cleanAfter,
    maxInfluence: findings.checkedShards > 0 ? findings.maxInfluence : null,
    amplification: run.amplification,
    simSeconds: run.trainingEndMs / 1000,
    wallSeconds: run.wallMs / 1000,
    attackErrors: run.forgeFailures,
  };
}

/** The figures of a room run, for an attack that ran without one (a probe, an attack on the server). */
export function noRoomRun(): Pick<
  AttackResult,
  | 'roundsCommitted'
  | 'roundsAborted'
  | 'workers'
  | 'hostile'
  | 'commitsAfterStart'
  | 'cleanCommitsAfterStart'
  | 'maxInfluence'
  | 'amplification'
  | 'simSeconds'
> {
  return {
    roundsCommitted: null,
    roundsAborted: null,
    workers: 0,
    hostile: [],
    commitsAfterStart: null,
    cleanCommitsAfterStart: null,
    maxInfluence: null,
    amplification: null,
    simSeconds: null,
  };
}

function judgeProbe(attack: Attack, config: RunConfig, budget: number, cleanEvalLoss: number | null): AttackResult {
  const started = performance.now();
  const outcome = (attack.probe as NonNullable<Attack['probe']>)(config);
  const why =
    outcome.bytesHeld > budget ? [`held ${formatBytes(outcome.bytesHeld)} > budget ${formatBytes(budget)}`] : [];
  return {
    name: attack.name,
    family: attack.family,
    summary: attack.summary,
    stopped: why.length === 0,
    detected: outcome.refusals > 0,
    ...noRoomRun(),
    evalLoss: null,
    cleanEvalLoss,
    peakBytesHeld: outcome.bytesHeld,
    scope: outcome.scope,
    why,
    signals: outcome.refusals > 0 ? [`${outcome.refusals} input(s) refused`] : [],
    wallSeconds: (performance.now() - started) / 1000,
    attackErrors: [],
  };
}
