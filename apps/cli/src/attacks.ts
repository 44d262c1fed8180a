/**
 * `shoal attacks`: every attack of the in-memory room's catalogue, each in its own room on the
 * real (CPU) engine beside a clean run of the same room and seed (packages/sim/src/attacks/:
 * the referee that judges a commit, what "stopped" and "detected" mean), then every attack on the
 * server's side, each against a fresh `shoal server` on loopback (apps/server/src/attacks/:
 * signaling, the rooms directory). A table, or with --json one JSON line last: {"attacks": [...]}.
 * Every room, the attack rooms too, requires signatures, as the CLI's and the pages' rooms do.
 */
import { loadCorpus, validationBatches } from '@shoal/data';
import { SERVER_ATTACKS, type ServerAttack, type ServerAttackFamily } from '@shoal/server/attacks';
import {
  ATTACKS,
  type AttackReport,
  type AttackResult,
  formatBytes,
  noRoomRun,
  ROOM_DEFAULTS,
  runAttacks,
} from '@shoal/sim/attacks';
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
  const names = [...ATTACKS, ...SERVER_ATTACKS].map((a) => a.name);
  const unknown = only.filter((name) => !names.includes(name));
  if (unknown.length > 0) throw new UsageError(`unknown attack ${unknown.join(', ')}: choose from ${names.join(', ')}`);
  const roomOnly = only.filter((name) => ATTACKS.some((a) => a.name === name));
  const serverAttacks = SERVER_ATTACKS.filter((a) => only.length === 0 || only.includes(a.name));
  const progress = (
    step: string,
    name: string,
    result: { stopped?: boolean; detected?: boolean; wallSeconds: number },
  ) => {
    const verdict =
      result.stopped === undefined
        ? 'done'
        : `${yesNo(result.stopped)} stopped, ${yesNo(result.detected ?? false)} detected`;
    console.error(`[${step}] ${name}: ${verdict} (${result.wallSeconds.toFixed(1)} s)`);
  };

  let report: Report = { attacks: [] };
  if (only.length === 0 || roomOnly.length > 0) {
    const seqLen = Math.min(ROOM_DEFAULTS.seqLen, model.blockSize);
    const corpus = loadCorpus({ seqLen });
    const evalBatches = validationBatches(corpus.validation, { ...EVAL_BATCHES, seqLen });
    // An attack that makes the swarm reject a promise nobody awaits must not end the command:
    // it is counted as a crash of the run it happened in.
    const escaped: string[] = [];
    const onUnhandled = (reason: unknown) => escaped.push(`unhandled: ${String((reason as Error)?.message ?? reason)}`);
    process.on('unhandledRejection', onUnhandled);
    try {
      report = await runAttacks({
        preset: options.preset,
        workers: options.workers,
        hostile: options.hostile,
        tokens: options.tokens,
        seed: options.seed,
        only: roomOnly,
        trainTokens: corpus.train,
        evalBatches,
        drainUnhandled: () => escaped.splice(0),
        onProgress: ({ run, index, total, finished }) => {
          if (finished) progress(`${index + 1}/${total}`, run, finished);
        },
      });
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  }
  for (const [i, attack] of serverAttacks.entries()) {
    const result = await runServerAttack(attack);
    progress(`server ${i + 1}/${serverAttacks.length}`, attack.name, result);
    report.attacks.push(result);
  }
  if (options.json) {
    console.log(JSON.stringify(report));
    return;
  }
  printTable(report);
}

/** An attack on the server's side, in the shape of the room's (its room figures null). */
type ServerAttackResult = Omit<AttackResult, 'family'> & { family: ServerAttackFamily };
type ReportedAttack = AttackResult | ServerAttackResult;
/** The room's report (absent when --only names server attacks alone), with every attack's result. */
type Report = Partial<Omit<AttackReport, 'attacks'>> & { attacks: ReportedAttack[] };

/** Runs `attack` on its own fresh server; an attack that throws is a failure of the run, not stopped. */
async function runServerAttack(attack: ServerAttack): Promise<ServerAttackResult> {
  const started = performance.now();
  let outcome: Awaited<ReturnType<ServerAttack['run']>> | null = null;
  let error: string | null = null;
  try {
    outcome = await attack.run();
  } catch (thrown) {
    error = String((thrown as Error)?.message ?? thrown);
  }
  const stopped = outcome?.stopped ?? false;
  const detected = outcome?.detected ?? false;
  return {
    name: attack.name,
    family: attack.family,
    summary: attack.summary,
    stopped,
    detected,
    ...noRoomRun(),
    evalLoss: null,
    cleanEvalLoss: null,
    peakBytesHeld: null,
    scope: attack.family === 'store' ? 'the room store, on a fresh directory' : 'shoal server on loopback',
    why: stopped ? [] : [outcome?.detail ?? `the attack failed: ${error}`],
    signals: detected && outcome ? [`${outcome.refusals} refused: ${outcome.detail}`] : [],
    wallSeconds: (performance.now() - started) / 1000,
    attackErrors: error === null ? [] : [error],
  };
}

const yesNo = (value: boolean) => (value ? 'yes' : 'no');
/** A loss in a column: 4 decimals, or 3 significant digits once it has blown up. */
const loss = (value: number | null) =>
  value === null ? '—' : Math.abs(value) >= 1e4 ? value.toExponential(2) : value.toFixed(4);

function printTable(report: Report): void {
  const { settings } = report;
  if (settings) {
    console.log(
      `${settings.preset}, ${settings.workers} workers (${settings.hostile} hostile), ${settings.tokens.toLocaleString('en')} tokens per run, ` +
        `seed ${settings.seed}; attacks begin at ${(settings.startMs / 1000).toFixed(1)} s; memory budget ${formatBytes(report.budgetBytes ?? 0)}`,
    );
  }
  for (const c of report.clean ?? []) {
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
  if (report.elsewhere) {
    console.log('');
    console.log('not run here:');
    for (const e of report.elsewhere) console.log(`  ${e.name}: ${e.where}`);
  }
}

function row(a: ReportedAttack): string {
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
