/**
 * The parts of a chaos run's figures (figures.ts puts them together and judges them), each from
 * the run's record: what each host life named, the rounds, NaN, the replicas' hashes against the
 * host's, the checkpoints, the processes and the hostile, and liveness.
 */
import type { ChaosRecord, HostLife } from './figures.ts';
import type { Line } from './processes.ts';

/** Gaps between commits at least this long are listed (with the roster) as stalls. */
const STALL_S = 30;

export const num = (value: unknown): number | null =>
  typeof value === 'number' && Number.isFinite(value) ? value : null;
export const events = (lines: Line[], event: string) => lines.filter((line) => line.json?.event === event);
export type FragmentRound = { round: number; hash: string };

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

/**
 * What each host life named, fragment:round → hash; the rounds one life named two hashes for;
 * each resumed life's fragments and those resumed from a hash never committed.
 */
export function hostNames(hosts: HostLife[]) {
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
  return { named, hostConflicts, resumedFrom, resumeMismatches };
}

/**
 * The rounds each host life opened, committed and aborted; those lost in host kills and in flight
 * at the end; why rounds aborted.
 */
export function roundFigures(
  { hosts, workerLives, measuredUntil }: ChaosRecord,
  resumedFrom: (FragmentRound[] | null)[],
) {
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
  return { opened, committed, aborted, lostInHostKills, inFlightAtEnd, abortReasons, perLife, commitRatio };
}

/**
 * Every NaN: the host's validation loss, the workers' training losses and θ_local recoveries, the
 * checkpoints loaded; the host's finite validation losses.
 */
export function nanFigures(record: ChaosRecord) {
  const { hosts, workerLives } = record;
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
  return { hostEvalLoss, evalLosses, workerTrainLoss, workerRecoveries, checkpointNaN, nanCount };
}

/** Each state a replica adopted against what the host life of that moment named. */
export function hashFigures({ hosts, workerLives }: ChaosRecord, named: Map<string, string>[]) {
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
  return { checked, agreed, mismatched, unmatched, hostile, mismatches, unmatchedSamples, witnesses };
}

/**
 * The checkpoint loads that failed, and the most rounds a host kill lost against its checkpoint.
 */
export function checkpointFigures(record: ChaosRecord) {
  const { hosts } = record;
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
  return { failedLoads, roundsLostMax };
}

/**
 * The processes that exited by themselves, and what the hostile tampered with and how often it
 * was benched.
 */
export function processFigures({ hosts, workerLives }: ChaosRecord) {
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
  return { exits, tampered, benched, hostileLives };
}

/**
 * Liveness: the longest time the room committed nothing (host downtime included), and the stalls.
 */
export function livenessFigures({ hosts, workerLives, measuredUntil }: ChaosRecord) {
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
  return { longestGap, stalls };
}
