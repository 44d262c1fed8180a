/**
 * `shoal attacks`: every attack of issue 13 that an in-memory room can hold, each in its own room
 * on the real (CPU) engine beside a clean run of the same room and seed, then a table (or, with
 * --json, one JSON line last: {"attacks": [...]}). See packages/swarm/src/attacks/ for the
 * catalogue, the referee that judges a commit, and what "stopped" and "detected" mean.
 */
import { loadCorpus, validationBatches } from '@shoal/data';
import { ATTACKS, type AttackReport, type AttackResult, formatBytes, ROOM_DEFAULTS, runAttacks } from '@shoal/swarm';
import { presetOption, UsageError } from './usage.ts';

export interface AttacksCliOptions {
  workers: number;
  hostile: number;
  preset: string;
  tokens: number;
  seed: number;
  only?: string;
  json?: boolean;
}

/** Validation batches of 8 × seqLen, 16 of them: enough that 2% of loss is signal, not noise. */
const EVAL_BATCHES = { batchSize: 8, count: 16 };

export async function attacksCommand(options: AttacksCliOptions): Promise<void> {
  const model = presetOption(options.preset);
  if (options.workers < 2) throw new UsageError('--workers must be at least 2 (one honest beside the hostile)');
  if (options.hostile >= options.workers) {
    throw new UsageError(`--hostile ${options.hostile} leaves no honest worker of ${options.workers}`);
  }
  if (ROOM_DEFAULTS.fragments > model.nLayer) {
    throw new UsageError(
      `${options.preset} has ${model.nLayer} block(s); the attack room needs ${ROOM_DEFAULTS.fragments}`,
    );
  }
  const only = (options.only ?? '')
    .split(',')
    .map((name) => name.trim())
    .filter(Boolean);
  const unknown = only.filter((name) => !ATTACKS.some((a) => a.name === name));
  if (unknown.length > 0) {
    throw new UsageError(`unknown attack ${unknown.join(', ')}: choose from ${ATTACKS.map((a) => a.name).join(', ')}`);
  }
  const seqLen = Math.min(ROOM_DEFAULTS.seqLen, model.blockSize);
  const corpus = loadCorpus({ seqLen });
  const evalBatches = validationBatches(corpus.validation, { ...EVAL_BATCHES, seqLen });

  // An attack that makes the swarm reject a promise nobody awaits must not end the command:
  // it is counted as a crash of the run it happened in.
  const escaped: string[] = [];
  const onUnhandled = (reason: unknown) => escaped.push(`unhandled: ${String((reason as Error)?.message ?? reason)}`);
  process.on('unhandledRejection', onUnhandled);
  let report: AttackReport;
  try {
    report = await runAttacks({
      preset: options.preset,
      workers: options.workers,
      hostile: options.hostile,
      tokens: options.tokens,
      seed: options.seed,
      only,
      trainTokens: corpus.train,
      evalBatches,
      drainUnhandled: () => escaped.splice(0),
      onProgress: ({ run, index, total, finished }) => {
        if (!finished) return;
        const verdict =
          'stopped' in finished ? `${yesNo(finished.stopped)} stopped, ${yesNo(finished.detected)} detected` : 'done';
        console.error(`[${index + 1}/${total}] ${run}: ${verdict} (${finished.wallSeconds.toFixed(1)} s)`);
      },
    });
  } finally {
    process.off('unhandledRejection', onUnhandled);
  }
  if (options.json) {
    console.log(JSON.stringify(report));
    return;
  }
  printTable(report);
}

const yesNo = (value: boolean) => (value ? 'yes' : 'no');
/** A loss in a column: 4 decimals, or 3 significant digits once it has blown up. */
const loss = (value: number | null) =>
  value === null ? '—' : Math.abs(value) >= 1e4 ? value.toExponential(2) : value.toFixed(4);

function printTable(report: AttackReport): void {
  const { settings } = report;
  console.log(
    `${settings.preset}, ${settings.workers} workers (${settings.hostile} hostile), ${settings.tokens.toLocaleString('en')} tokens per run, ` +
      `seed ${settings.seed}; attacks begin at ${(settings.startMs / 1000).toFixed(1)} s; memory budget ${formatBytes(report.budgetBytes)}`,
  );
  for (const c of report.clean) {
    console.log(
      `clean, ${c.workers} workers: eval loss ${loss(c.evalLoss)}, ${c.roundsCommitted} commits (${c.roundsAborted} aborted) ` +
        `in ${c.simSeconds.toFixed(1)} s; referee self-check: ${c.checkedShards} shards, ${c.madeUpShards} made up, ` +
        `max influence ${c.maxInfluence.toExponential(1)}`,
    );
  }
  console.log('');
  console.log(
    `${'attack'.padEnd(31)}${'stopped'.padEnd(9)}${'detected'.padEnd(10)}${'eval loss (clean)'.padEnd(20)}` +
      `${'commits (aborted)'.padEnd(19)}${'peak held'.padEnd(12)}why not stopped; how it was noticed`,
  );
  for (const a of report.attacks) console.log(row(a));
  console.log('');
  console.log('not run here:');
  for (const e of report.elsewhere) console.log(`  ${e.name}: ${e.where}`);
}

function row(a: AttackResult): string {
  const rounds = a.roundsCommitted === null ? '—' : `${a.roundsCommitted} (${a.roundsAborted})`;
  const held = a.peakBytesHeld === null ? '—' : formatBytes(a.peakBytesHeld);
  const notes = [a.why.join('; '), a.signals.length > 0 ? `noticed: ${a.signals.join(', ')}` : 'not noticed'];
  // (other attacks can make a hostile replica fetch state once, legitimately: not worth a note)
  if (a.family === 'memory' && a.amplification !== null)
    notes.push(`${a.amplification.toFixed(0)}× state amplification`);
  if (a.scope !== 'room') notes.push(`scope: ${a.scope}`);
  if (a.attackErrors.length > 0) notes.push(`attack errors: ${a.attackErrors.join('; ')}`);
  return (
    `${a.name.padEnd(31)}${yesNo(a.stopped).padEnd(9)}${yesNo(a.detected).padEnd(10)}` +
    `${`${loss(a.evalLoss)} (${loss(a.cleanEvalLoss)})`.padEnd(20)}${rounds.padEnd(19)}${held.padEnd(12)}` +
    notes.filter(Boolean).join('; ')
  );
}
