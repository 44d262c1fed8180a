/**
 * The chaos run's figures, from what its processes printed and the checkpoints it loaded (pure:
 * harness.ts collects, this counts; figure-parts.ts counts each part). The criteria:
 *
 * - ≥ 90% of opened rounds commit. Round numbers are handed out in order per fragment by each
 *   life of the host (a resumed host goes on from its checkpoint's round), so a life opened every
 *   round from its first up to the highest any process saw it open, commit or abort. A round still
 *   open when that life was killed counts as opened and not committed; one still open when the
 *   measurement ends is left out.
 * - 0 NaN: the host's validation loss (`shoal host` prints null once it is not finite), the
 *   witnesses' training losses and θ_local recoveries, and every checkpoint loaded.
 * - every replica's committed hashes equal: each state a witness's replica held (fragment, round,
 *   hash) against what the host life of that moment committed, checkpointed or resumed; within a
 *   life the host names one hash per round, and a resumed life starts from a hash the life before
 *   it had committed.
 * - the host's checkpoint always loads: after every SIGKILL of the host, and at the end.
 *
 * Beside them: the room never goes more than MAX_COMMIT_GAP_S without a commit (training goes
 * on), and no process exits by itself.
 */
import type { CheckpointCheck } from './checkpoint.ts';
import {
  checkpointFigures,
  hashFigures,
  hostNames,
  livenessFigures,
  nanFigures,
  processFigures,
  roundFigures,
} from './figure-parts.ts';
import type { Line } from './processes.ts';

export type Ending = 'running' | 'killed' | 'stopped' | 'crashed';

export interface HostLife {
  startedAt: number;
  endedAt: number | null;
  ending: Ending;
  lines: Line[];
  /** The last lines of its stderr, for a host that crashed. */
  stderrTail: string;
}

export type WorkerKind = 'cli' | 'witness' | 'hostile';

export interface WorkerLife {
  name: string;
  kind: WorkerKind;
  startedAt: number;
  endedAt: number | null;
  ending: Ending;
  lines: Line[];
  /** The last lines of its stderr, for a worker that crashed. */
  stderrTail: string;
}

export interface CheckpointLoad {
  at: number;
  when: 'host-killed' | 'end';
  /** The host life that wrote it (index into hosts). */
  life: number;
  check: CheckpointCheck;
}

export interface ChaosRecord {
  minutes: number;
  seed: number;
  workers: number;
  hosts: HostLife[];
  workerLives: WorkerLife[];
  checkpoints: CheckpointLoad[];
  actions: {
    workerKills: number;
    workerRestarts: number;
    hostKills: number;
    hostRestarts: number;
    hostileRejoins: number;
  };
  /** Host restarts that got the same signaling room back. */
  reclaimed: number;
  /** Processes that needed a SIGKILL at the end (SIGINT did not stop them in time). */
  stopProblems: string[];
  /** Rounds resolved after this (the harness is stopping the room) are not measured. */
  measuredUntil: number;
  elapsedMs: number;
}

export interface ChaosFigures {
  minutes: number;
  seed: number;
  workers: number;
  elapsedS: number;
  rounds: {
    opened: number;
    committed: number;
    aborted: number;
    /** Open when a host life was killed: opened, never committed. */
    lostInHostKills: number;
    /** Open when the measurement ended: not counted as opened. */
    inFlightAtEnd: number;
    commitRatio: number;
    abortReasons: Record<string, number>;
    /** Rounds opened, per host life. */
    perLife: { opened: number; committed: number; aborted: number }[];
    /** The longest time without a commit, and when it began (s into the run). */
    longestCommitGap: { seconds: number; fromS: number };
    /** Gaps of 30 s or more without a commit, longest first, with the roster a few seconds in. */
    stalls: { seconds: number; fromS: number; roster: string[] }[];
  };
  nan: {
    count: number;
    hostEvalLoss: number;
    workerTrainLoss: number;
    workerRecoveries: number;
    checkpoints: number;
  };
  hashes: {
    /** (fragment, round, hash) states that witnesses' replicas held and the host had named. */
    checked: number;
    agreed: number;
    mismatched: number;
    /** States whose round no host life named (nothing to compare with). */
    unmatched: number;
    /** Rounds for which one host life named two hashes. */
    hostConflicts: number;
    /** Resumed lives whose starting hashes the life before had not committed. */
    resumeMismatches: number;
    witnesses: number;
    /** The hostile worker's own replica (not a criterion: it is hostile). */
    hostile: { agreed: number; mismatched: number };
    mismatches: string[];
    /** The first few states no host life named. */
    unmatchedSamples: string[];
  };
  checkpoints: { loads: number; failed: number; errors: string[]; evalLoss: number | null; roundsLostMax: number };
  chaos: ChaosRecord['actions'] & {
    reclaimed: number;
    unexpectedExits: number;
    exits: string[];
    stopProblems: string[];
  };
  hostile: { lives: number; tampered: Record<string, number>; benched: number };
  evalLoss: { first: number | null; last: number | null };
  pass: boolean;
  failures: string[];
}

/**
 * Liveness, beside the criteria: the room must not go longer than this without a commit.
 * A host restart (a few seconds down, then the workers say hello again) and a round aborted at its
 * deadline each cost well under it.
 */
export const MAX_COMMIT_GAP_S = 60;
export function computeFigures(record: ChaosRecord): ChaosFigures {
  const failures: string[] = [];
  const { named, hostConflicts, resumedFrom, resumeMismatches } = hostNames(record.hosts);
  const { opened, committed, aborted, lostInHostKills, inFlightAtEnd, abortReasons, perLife, commitRatio } =
    roundFigures(record, resumedFrom);
  const { hostEvalLoss, evalLosses, workerTrainLoss, workerRecoveries, checkpointNaN, nanCount } = nanFigures(record);
  const { checked, agreed, mismatched, unmatched, hostile, mismatches, unmatchedSamples, witnesses } = hashFigures(
    record,
    named,
  );
  const { failedLoads, roundsLostMax } = checkpointFigures(record);
  const { exits, tampered, benched, hostileLives } = processFigures(record);
  const { longestGap, stalls } = livenessFigures(record);

  // --- criteria -------------------------------------------------------------------------------
  const pct = (x: number) => `${(100 * x).toFixed(1)}%`;
  if (opened === 0) failures.push('no round was opened');
  else if (commitRatio < 0.9) failures.push(`${pct(commitRatio)} of opened rounds committed (< 90%)`);
  if (nanCount > 0)
    failures.push(
      `${nanCount} NaN: host eval ${hostEvalLoss}, worker loss ${workerTrainLoss}, θ_local recoveries ${workerRecoveries}, checkpoints ${checkpointNaN}`,
    );
  if (mismatched > 0) failures.push(`${mismatched} replica states differ from the host's committed hash`);
  if (hostConflicts > 0) failures.push(`${hostConflicts} rounds for which one host life named two hashes`);
  if (resumeMismatches > 0) failures.push(`${resumeMismatches} resumed fragments start from a hash never committed`);
  if (witnesses > 0 && checked === 0) failures.push('no replica state could be compared with the host');
  if (failedLoads.length > 0) failures.push(`${failedLoads.length} checkpoint loads failed`);
  if (record.checkpoints.length === 0) failures.push('no checkpoint was loaded');
  if (record.reclaimed < record.actions.hostRestarts)
    failures.push(`${record.actions.hostRestarts - record.reclaimed} host restarts did not get the room back`);
  if (longestGap.seconds > MAX_COMMIT_GAP_S)
    failures.push(`the room committed nothing for ${longestGap.seconds} s (from ${longestGap.fromS} s)`);
  if (exits.length > 0) failures.push(`${exits.length} processes exited by themselves`);

  return {
    minutes: record.minutes,
    seed: record.seed,
    workers: record.workers,
    elapsedS: Math.round(record.elapsedMs / 1e3),
    rounds: {
      opened,
      committed,
      aborted,
      lostInHostKills,
      inFlightAtEnd,
      commitRatio: Math.round(commitRatio * 1e4) / 1e4,
      abortReasons,
      perLife,
      longestCommitGap: longestGap,
      stalls,
    },
    nan: {
      count: nanCount,
      hostEvalLoss,
      workerTrainLoss,
      workerRecoveries,
      checkpoints: checkpointNaN,
    },
    hashes: {
      checked,
      agreed,
      mismatched,
      unmatched,
      hostConflicts,
      resumeMismatches,
      witnesses,
      hostile,
      mismatches,
      unmatchedSamples,
    },
    checkpoints: {
      loads: record.checkpoints.length,
      failed: failedLoads.length,
      errors: failedLoads.map((c) => `${c.when} (host life ${c.life}): ${c.check.error}`),
      evalLoss: record.checkpoints.at(-1)?.check.evalLoss ?? null,
      roundsLostMax,
    },
    chaos: {
      ...record.actions,
      reclaimed: record.reclaimed,
      unexpectedExits: exits.length,
      exits,
      stopProblems: record.stopProblems,
    },
    hostile: { lives: hostileLives.length, tampered, benched },
    evalLoss: { first: evalLosses[0] ?? null, last: evalLosses.at(-1) ?? null },
    pass: failures.length === 0,
    failures,
  };
}
