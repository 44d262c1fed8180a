/**
 * The chaos run's figures, from what its processes printed and the checkpoints it loaded (pure:
 * harness.ts collects, this counts). Issue 13's criteria:
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
 * Liveness, beside the issue's criteria: the room must not go longer than this without a commit.
 * A host restart (a few seconds down, then the workers say hello again) and a round aborted at its
 * deadline each cost well under it.
 */
export const MAX_COMMIT_GAP_S = 60;
/** Gaps between commits at least this long are listed (with the roster) as stalls. */
const STALL_S = 30;

const num = (value: unknown): number | null => (typeof value === 'number' && Number.isFinite(value) ? value : null);
const events = (lines: Line[], event: string) => lines.filter((line) => line.json?.event === event);
type FragmentRound = { round: number; hash: string };

/** The line of a crashed process's stderr that says what went wrong (not Node's version banner). */
function errorLine(stderr: string): string {
  const lines = stderr
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line && !/^Node\.js v/.test(line));
  return lines.find((line) => /Error\b|error:|Uncaught/.test(line)) ?? lines.at(-1) ?? '(no stderr)';
}

/** The host life running at `at`: the last one started at or before it. */
function lifeAt(hosts: HostLife[], at: number): number {
  let life = 0;
  for (const [i, host] of hosts.entries()) if (host.startedAt <= at) life = i;
  return life;
}

export function computeFigures(record: ChaosRecord): ChaosFigures {
  const { hosts, workerLives, measuredUntil } = record;
  const failures: string[] = [];

  // --- what each host life named: fragment:round → hash -------------------------------------
  let hostConflicts = 0;
  const named = hosts.map((host) => {
    const known = new Map<string, string>();
    const name = (fragment: number, round: number, hash: string) => {
      const key = `${fragment}:${round}`;
      const before = known.get(key);
      if (before !== undefined && before !== hash) hostConflicts++;
      known.set(key, hash);
    };
    for (const line of host.lines) {
      const json = line.json;
      if (!json) continue;
      if (json.event === 'round-committed') name(Number(json.fragment), Number(json.round), String(json.hash));
      if (json.event === 'checkpoint' || json.event === 'resumed') {
        for (const [p, f] of (json.fragments as FragmentRound[]).entries()) name(p, f.round, f.hash);
      }
    }
    return known;
  });
  let resumeMismatches = 0;
  const resumedFrom = hosts.map((host, life) => {
    const resumed = events(host.lines, 'resumed')[0]?.json;
    if (!resumed) return null;
    const fragments = resumed.fragments as FragmentRound[];
    for (const [p, f] of fragments.entries()) {
      if (f.round > 0 && named[life - 1]?.get(`${p}:${f.round}`) !== f.hash) resumeMismatches++;
    }
    return fragments;
  });

  // --- rounds ---------------------------------------------------------------------------------
  const opensSeen = workerLives.flatMap((w) => events(w.lines, 'opened'));
  let lostInHostKills = 0;
  let inFlightAtEnd = 0;
  const abortReasons: Record<string, number> = {};
  const perLife = hosts.map((host, life) => {
    const until = Math.min(host.endedAt ?? Number.POSITIVE_INFINITY, measuredUntil);
    const inLife = (line: Line) => line.at <= until;
    const committed = events(host.lines, 'round-committed').filter(inLife);
    const aborted = events(host.lines, 'round-aborted').filter(inLife);
    for (const line of aborted) {
      const reason = String(line.json?.reason);
      abortReasons[reason] = (abortReasons[reason] ?? 0) + 1;
    }
    const nextStart = hosts[life + 1]?.startedAt ?? Number.POSITIVE_INFINITY;
    const opens = opensSeen.filter((line) => line.at >= host.startedAt && line.at < nextStart && inLife(line));
    let opened = 0;
    const fragments = Math.max(
      resumedFrom[life]?.length ?? 0,
      ...[...committed, ...aborted, ...opens].map((line) => Number(line.json?.fragment) + 1),
    );
    for (let p = 0; p < fragments; p++) {
      const start = resumedFrom[life]?.[p]?.round ?? 0;
      const rounds = [...committed, ...aborted, ...opens]
        .filter((line) => Number(line.json?.fragment) === p)
        .map((line) => Number(line.json?.round));
      const last = Math.max(start, ...rounds);
      const resolved = new Set(
        [...committed, ...aborted]
          .filter((line) => Number(line.json?.fragment) === p)
          .map((l) => Number(l.json?.round)),
      );
      const open = last - start - resolved.size;
      // killed while a round was open: it is lost; open when the measurement ended: not measured
      if ((host.endedAt ?? Number.POSITIVE_INFINITY) <= measuredUntil) {
        lostInHostKills += open;
        opened += last - start;
      } else {
        inFlightAtEnd += open;
        opened += last - start - open;
      }
    }
    return { opened, committed: committed.length, aborted: aborted.length };
  });
  const opened = perLife.reduce((sum, life) => sum + life.opened, 0);
  const committed = perLife.reduce((sum, life) => sum + life.committed, 0);
  const aborted = perLife.reduce((sum, life) => sum + life.aborted, 0);
  const commitRatio = opened === 0 ? 0 : committed / opened;

  // --- NaN ------------------------------------------------------------------------------------
  let hostEvalLoss = 0;
  const evalLosses: number[] = [];
  for (const host of hosts) {
    let evaluated = false;
    for (const line of events(host.lines, 'metrics')) {
      const loss = line.json?.evalLoss;
      if (num(loss) !== null) {
        evaluated = true;
        evalLosses.push(loss as number);
      } else if (evaluated) hostEvalLoss++; // null after a finite one: the evaluation was not finite
    }
  }
  let workerTrainLoss = 0;
  let workerRecoveries = 0;
  for (const worker of workerLives) {
    if (worker.kind === 'hostile') continue;
    workerTrainLoss += events(worker.lines, 'nan').length;
    const left = events(worker.lines, 'left')[0]?.json;
    workerRecoveries += num((left?.metrics as { recoveries?: number } | undefined)?.recoveries) ?? 0;
  }
  const checkpointNaN = record.checkpoints.filter((c) => c.check.nonFinite > 0 || c.check.evalLoss === null).length;
  const nanCount = hostEvalLoss + workerTrainLoss + workerRecoveries + checkpointNaN;

  // --- hashes ---------------------------------------------------------------------------------
  let checked = 0;
  let agreed = 0;
  let mismatched = 0;
  let unmatched = 0;
  const hostile = { agreed: 0, mismatched: 0 };
  const mismatches: string[] = [];
  const unmatchedSamples: string[] = [];
  for (const worker of workerLives) {
    if (worker.kind === 'cli') continue;
    for (const line of events(worker.lines, 'adopted')) {
      const { fragment, round, hash } = line.json as { fragment: number; round: number; hash: string };
      const life = lifeAt(hosts, line.at);
      // the host life of that moment (a state adopted just before a kill may print just after it);
      // round 0 is the seeded initial state of every life, which the first life's first save names
      const key = `${fragment}:${round}`;
      const expected =
        named[life]?.get(key) ?? named[life - 1]?.get(key) ?? (round === 0 ? named[0]?.get(key) : undefined);
      if (worker.kind === 'hostile') {
        if (expected === hash) hostile.agreed++;
        else if (expected !== undefined) hostile.mismatched++;
        continue;
      }
      if (expected === undefined) {
        unmatched++;
        if (unmatchedSamples.length < 10)
          unmatchedSamples.push(
            `${worker.name} held ${fragment}:${round} ${hash} at ${(line.at / 1e3).toFixed(1)} s (host life ${life})`,
          );
        continue;
      }
      checked++;
      if (expected === hash) agreed++;
      else {
        mismatched++;
        if (mismatches.length < 10)
          mismatches.push(`${worker.name} held ${fragment}:${round} ${hash}, host life ${life} named ${expected}`);
      }
    }
  }
  const witnesses = new Set(workerLives.filter((w) => w.kind === 'witness').map((w) => w.name.split('#')[0])).size;

  // --- checkpoints ----------------------------------------------------------------------------
  const failedLoads = record.checkpoints.filter((c) => !c.check.ok);
  let roundsLostMax = 0;
  for (const load of record.checkpoints) {
    if (load.when !== 'host-killed') continue;
    const host = hosts[load.life];
    if (!host) continue;
    for (const [p, f] of load.check.fragments.entries()) {
      const printed = events(host.lines, 'round-committed')
        .filter((line) => Number(line.json?.fragment) === p)
        .map((line) => Number(line.json?.round));
      roundsLostMax = Math.max(roundsLostMax, Math.max(f.round, ...printed) - f.round);
    }
  }

  // --- processes and the hostile --------------------------------------------------------------
  const exits: string[] = [];
  for (const host of hosts)
    if (host.ending === 'crashed')
      exits.push(
        `the host exited by itself at ${((host.endedAt ?? 0) / 1e3).toFixed(0)} s: ${errorLine(host.stderrTail)}`,
      );
  for (const worker of workerLives) {
    if (worker.ending !== 'crashed') continue;
    const why = String(events(worker.lines, 'left')[0]?.json?.stoppedBy ?? errorLine(worker.stderrTail));
    exits.push(`${worker.name} exited by itself at ${((worker.endedAt ?? 0) / 1e3).toFixed(0)} s: ${why}`);
  }
  const tampered: Record<string, number> = {};
  let benched = 0;
  const hostileLives = workerLives.filter((w) => w.kind === 'hostile');
  for (const life of hostileLives) {
    const lastCounts = [...events(life.lines, 'behaviour'), ...events(life.lines, 'left')]
      .map((line) => line.json?.tampered as Record<string, number> | undefined)
      .filter((counts) => counts !== undefined)
      .at(-1);
    for (const [name, n] of Object.entries(lastCounts ?? {})) tampered[name] = (tampered[name] ?? 0) + n;
  }
  // how often the coordinator benched the hostile, as the witnesses saw the roster
  const hostilePeers = new Set(hostileLives.map((w) => events(w.lines, 'joined')[0]?.json?.peer).filter(Boolean));
  const benchings = new Set<string>();
  for (const worker of workerLives) {
    for (const line of events(worker.lines, 'roster')) {
      for (const m of (line.json?.members ?? []) as { peer: string; status: string; reason: string }[]) {
        if (hostilePeers.has(m.peer) && m.status === 'excluded') benchings.add(`${m.peer}:${m.reason}`);
      }
    }
  }
  benched = benchings.size;

  // --- liveness: the longest time the room committed nothing (host downtime included) ---------
  const commitTimes = hosts
    .flatMap((host) => events(host.lines, 'round-committed').map((line) => line.at))
    .filter((at) => at <= measuredUntil)
    .sort((a, b) => a - b);
  const gaps: { seconds: number; fromS: number; from: number }[] = [];
  for (const [i, at] of [...commitTimes, measuredUntil].entries()) {
    const before = commitTimes[i - 1];
    if (before !== undefined)
      gaps.push({ seconds: Math.round((at - before) / 100) / 10, fromS: Math.round(before / 1e3), from: before });
  }
  gaps.sort((a, b) => b.seconds - a.seconds);
  const longestGap = { seconds: gaps[0]?.seconds ?? 0, fromS: gaps[0]?.fromS ?? 0 };
  // Each stall with the room as the coordinator last described it a few seconds in (witnesses
  // print every roster change): who was benched, and why.
  const rosters = workerLives.flatMap((w) => events(w.lines, 'roster')).sort((a, b) => a.at - b.at);
  const stalls = gaps
    .filter((gap) => gap.seconds >= STALL_S)
    .slice(0, 10)
    .map(({ seconds, fromS, from }) => {
      const roster = rosters.filter((line) => line.at <= from + 5_000).at(-1)?.json?.members as
        | { peer: string; status: string; reason: string }[]
        | undefined;
      return {
        seconds,
        fromS,
        roster: (roster ?? []).map((m) => `${m.peer} ${m.status}${m.reason ? `: ${m.reason}` : ''}`),
      };
    });

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
