/** The chaos run's figures as a table, the criteria beside them, then PASS or what failed. */
import { type ChaosFigures, MAX_COMMIT_GAP_S } from './figures.ts';

export function chaosTable(figures: ChaosFigures): string {
  const { rounds, nan, hashes, checkpoints, chaos, hostile } = figures;
  const pct = (x: number) => `${(100 * x).toFixed(1)}%`;
  const rows: [string, string, string][] = [
    [
      'rounds committed / opened',
      `${rounds.committed} / ${rounds.opened} = ${pct(rounds.commitRatio)}`,
      `≥ 90% (${rounds.aborted} aborted ${JSON.stringify(rounds.abortReasons)}, ${rounds.lostInHostKills} open at a host kill, ${rounds.inFlightAtEnd} in flight at the end not counted)`,
    ],
    [
      'NaN',
      String(nan.count),
      `0 (host eval ${nan.hostEvalLoss}, worker loss ${nan.workerTrainLoss}, θ_local recoveries ${nan.workerRecoveries}, checkpoints ${nan.checkpoints})`,
    ],
    [
      'replica hashes = host committed',
      `${hashes.agreed} / ${hashes.checked}`,
      `all (${hashes.witnesses} witnesses; ${hashes.mismatched} differ, ${hashes.unmatched} not comparable, host conflicts ${hashes.hostConflicts}, resume mismatches ${hashes.resumeMismatches})`,
    ],
    [
      'checkpoint loads',
      `${checkpoints.loads - checkpoints.failed} / ${checkpoints.loads}`,
      `all (at ${chaos.hostKills} host kills and the end; ≤ ${checkpoints.roundsLostMax} round lost per fragment)`,
    ],
    [
      'longest time without a commit',
      `${rounds.longestCommitGap.seconds} s`,
      `≤ ${MAX_COMMIT_GAP_S} s (from ${rounds.longestCommitGap.fromS} s)`,
    ],
    [
      'chaos',
      `${chaos.workerKills} worker kills`,
      `${chaos.workerRestarts} rejoins, ${chaos.hostKills} host kills, ${chaos.hostRestarts} resumes (${chaos.reclaimed} took the room back), ${chaos.hostileRejoins} hostile rejoins`,
    ],
    [
      'hostile',
      `${hostile.lives} lives, benched ${hostile.benched}×`,
      Object.entries(hostile.tampered)
        .map(([name, n]) => `${name} ${n}`)
        .join(', '),
    ],
    [
      'eval loss (host)',
      `${figures.evalLoss.first?.toFixed(3)} → ${figures.evalLoss.last?.toFixed(3)}`,
      `checkpoint at the end: ${checkpoints.evalLoss?.toFixed(3)}`,
    ],
  ];
  const width = Math.max(...rows.map((row) => row[0].length));
  const valueWidth = Math.max(...rows.map((row) => row[1].length));
  const lines = rows.map(([name, value, note]) => `${name.padEnd(width)}  ${value.padEnd(valueWidth)}  ${note}`);
  const verdict = figures.pass ? 'PASS' : `FAIL:\n${figures.failures.map((f) => `  - ${f}`).join('\n')}`;
  const stalls = rounds.stalls.map(
    (stall) => `stalled ${stall.seconds} s from ${stall.fromS} s; roster: ${stall.roster.join('; ') || '—'}`,
  );
  const extra = [...stalls, ...chaos.exits, ...chaos.stopProblems, ...checkpoints.errors, ...hashes.mismatches];
  return [
    `chaos run: ${figures.minutes} min, seed ${figures.seed}, ${figures.workers} workers (1 hostile), ${figures.elapsedS} s`,
    ...lines,
    ...extra.map((line) => `  ! ${line}`),
    verdict,
  ].join('\n');
}
