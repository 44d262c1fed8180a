/**
 * `npm run chaos`: the chaos run over real WebRTC on loopback (scripts/chaos/harness.ts).
 * A `shoal server`, a `shoal host` (nano, CPU, small H) and --workers workers, one of them hostile;
 * a seeded schedule SIGKILLs workers and the host, the host resumes from its checkpoint, links
 * are delayed. Prints a table of the figures; with --json, ends with one line
 * `{"chaos": {...figures, "pass": bool}}`. Exits 1 when a criterion fails.
 *
 *   npm run chaos -- [--minutes 30] [--seed 1] [--workers 4] [--cli-workers 1] [--inner-steps 16]
 *     [--deadline-ms 8000] [--behaviours contribution-100x,forged-commit,…]
 *     [--log-dir DIR] [--json]
 *
 * --behaviours limits the hostile worker to some of its behaviours (scripts/chaos/hostile.ts);
 * --log-dir DIR keeps every process's output (DIR/host#0.log, DIR/witness-1#2.log, …).
 *
 * Progress goes to stderr. On 2 cores the room's processes share the CPU with everything else.
 */
import { parseArgs } from 'node:util';
import { DEFAULT_CHAOS_OPTIONS, runChaos } from './chaos/harness.ts';
import { chaosTable } from './chaos/report.ts';

const { values: args } = parseArgs({
  options: {
    minutes: { type: 'string', default: String(DEFAULT_CHAOS_OPTIONS.minutes) },
    seed: { type: 'string', default: String(DEFAULT_CHAOS_OPTIONS.seed) },
    workers: { type: 'string', default: String(DEFAULT_CHAOS_OPTIONS.workers) },
    'cli-workers': { type: 'string', default: String(DEFAULT_CHAOS_OPTIONS.cliWorkers) },
    'inner-steps': { type: 'string', default: String(DEFAULT_CHAOS_OPTIONS.innerSteps) },
    'deadline-ms': { type: 'string', default: String(DEFAULT_CHAOS_OPTIONS.deadlineMs) },
    behaviours: { type: 'string' },
    'log-dir': { type: 'string' },
    json: { type: 'boolean', default: false },
  },
});

const positive = (name: string, value: string | undefined, min = 1) => {
  const n = Number(value);
  if (!(Number.isFinite(n) && n >= min)) {
    console.error(`chaos: --${name} must be a number ≥ ${min}, got ${value}`);
    process.exit(2);
  }
  return n;
};
const workers = Math.round(positive('workers', args.workers, 2));
const options = {
  minutes: positive('minutes', args.minutes, 0.5),
  seed: Math.round(positive('seed', args.seed, 0)),
  workers,
  cliWorkers: Math.min(workers - 1, Math.round(positive('cli-workers', args['cli-workers'], 0))),
  innerSteps: Math.round(positive('inner-steps', args['inner-steps'])),
  deadlineMs: Math.round(positive('deadline-ms', args['deadline-ms'], 1_000)),
  ...(args.behaviours && { behaviours: args.behaviours.split(',') }),
  ...(args['log-dir'] && { logDir: args['log-dir'] }),
  log: (text: string) => console.error(text),
};

const figures = await runChaos(options);
console.log(chaosTable(figures));
if (args.json) console.log(JSON.stringify({ chaos: figures }));
process.exit(figures.pass ? 0 : 1);
