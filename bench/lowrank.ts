/**
 * What the low-rank codec costs per round as a round uses it (packages/diloco/src/lowrank/fragment.ts,
 * docs/lowrank.md), in Node and in the system Chromium, beside one CPU inner step of the same
 * preset: the bar is compression ≤ 10% of a `small` inner step on the CPU engine.
 *
 *   node --import tsx --import ./bench/register-raw.mjs bench/lowrank.ts [--preset small]
 *     [--fragments 2] [--ranks 1,4,8,16,32] [--sides right,left] [--block-size 1024]
 *     [--repeats 3] [--batch 16] [--seq 256] [--steps 2] [--step-ms MS] [--skip-browser]
 *     [--no-profile] [--out bench/results/lowrank-<preset>-<cores>core.json] [--no-save]
 *
 * Per rank and side, per round over the P sequential fragments (bench/lowrank-core.ts): the
 * projection's build (every replica), a worker's encode (error feedback, projection, fp4 round
 * trip, reconstruction, codec.encode), a replica's decode (codec.decode, reconstruction); ms, MB/s
 * of the fragments' f32 values, and the cost (build + encode + decode: a volunteer is worker and
 * replica) as a share of one CPU inner step, read two ways: one round of every fragment (the
 * whole model once) and the slowest fragment's round alone (a round syncs one fragment). Then
 * where the time goes: each primitive alone. The step runs on random tokens (the work is the
 * same); `--step-ms` takes the Node step instead of measuring it (about 10 s on `small`).
 * Chromium runs the same code, with its own CPU step beside Node's; without a Chromium it says so.
 * Single-threaded figures: other work on the machine inflates them (the JSON keeps the load).
 * Prints the tables and one JSON line; unless --no-save, writes the JSON to --out.
 */
import { writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import type { LowRankSide } from '../packages/diloco/src/lowrank/project.ts';
import { PRESETS, type PresetName } from '../packages/model/src/config.ts';
import { formatJson } from './format-json.ts';
import { openLowRankPage } from './lowrank-browser.ts';
import {
  cpuStepMs,
  type LowRankCase,
  type LowRankProfile,
  type LowRankTiming,
  measureLowRank,
  profileLowRank,
} from './lowrank-core.ts';

const { values: args } = parseArgs({
  options: {
    preset: { type: 'string', default: 'small' },
    fragments: { type: 'string', default: '2' },
    ranks: { type: 'string', default: '1,4,8,16,32' },
    sides: { type: 'string', default: 'right,left' },
    'block-size': { type: 'string', default: '1024' },
    repeats: { type: 'string', default: '3' },
    batch: { type: 'string', default: '16' },
    seq: { type: 'string', default: '256' },
    steps: { type: 'string', default: '2' },
    'step-ms': { type: 'string' },
    'skip-browser': { type: 'boolean', default: false },
    'no-profile': { type: 'boolean', default: false },
    out: { type: 'string' },
    'no-save': { type: 'boolean', default: false },
  },
});
const preset = args.preset ?? 'small';
if (!Object.hasOwn(PRESETS, preset)) throw new Error(`unknown preset ${preset}: ${Object.keys(PRESETS).join(', ')}`);
const ranks = (args.ranks ?? '').split(',').map(Number);
const sides = (args.sides ?? '').split(',') as LowRankSide[];
const base = { preset: preset as PresetName, fragmentCount: Number(args.fragments), repeats: Number(args.repeats) };
const blockSize = Number(args['block-size']);
const [batch, seq, steps] = [Number(args.batch), Number(args.seq), Number(args.steps)];
/** The bar: compression within this share of one CPU inner step. */
const BAR = 0.1;

interface Runtime {
  /** 'node' or the Chromium's path and version. */
  runtime: string;
  stepMs: number;
  rows: LowRankTiming[];
  profile: LowRankProfile[];
}

/** Measures every case with `measure` and `profile` (the same functions, here or in the page). */
async function run(
  runtime: string,
  stepMs: number,
  measure: (c: LowRankCase) => Promise<LowRankTiming>,
  profile: (c: Omit<LowRankCase, 'side'>) => Promise<LowRankProfile>,
): Promise<Runtime> {
  await measure({ ...base, rank: ranks[0] ?? 1, side: 'right', blockSize, repeats: 1 }); // warm-up: the JIT, the values
  const rows: LowRankTiming[] = [];
  for (const rank of ranks) for (const side of sides) rows.push(await measure({ ...base, rank, side, blockSize }));
  const profiles: LowRankProfile[] = [];
  if (!args['no-profile']) for (const rank of ranks) profiles.push(await profile({ ...base, rank, blockSize }));
  return { runtime, stepMs, rows, profile: profiles };
}

const totalMs = (r: LowRankTiming) => r.buildMs + r.encodeMs + r.decodeMs;
const pct = (ms: number, stepMs: number) => `${((100 * ms) / stepMs).toFixed(1)}%`;

function printRuntime(r: Runtime, nodeStepMs: number): void {
  const own = r.runtime !== 'node';
  console.log(`\n${r.runtime === 'node' ? `Node ${process.version}` : `Chromium: ${r.runtime}`}`);
  // P rounds: one round of every fragment (the whole model once); 1 frag: the slowest fragment's
  // round alone (a round syncs one fragment). ÷ step: of the Node CPU step; ÷ own: of this runtime's.
  const head = ['rank', 'side', 'payload kB', 'build ms', 'encode ms', 'decode ms', 'P rounds ms', 'MB/s', '÷ step'];
  head.push('1 frag ms', '÷ step');
  if (own) head.push('P ÷ own', '1 frag ÷ own');
  console.log(head.map((h, i) => (i < 2 ? h.padEnd(6) : h.padStart(13))).join(''));
  for (const row of r.rows) {
    const total = totalMs(row);
    const cells = [
      (row.payloadBytes / 1e3).toFixed(1),
      row.buildMs.toFixed(1),
      row.encodeMs.toFixed(1),
      row.decodeMs.toFixed(1),
      total.toFixed(1),
      ((4 * row.fragmentValues) / 1e3 / total).toFixed(0),
      pct(total, nodeStepMs),
      row.fragmentMs.toFixed(1),
      pct(row.fragmentMs, nodeStepMs),
    ];
    if (own) cells.push(pct(total, r.stepMs), pct(row.fragmentMs, r.stepMs));
    console.log(`${String(row.rank).padEnd(6)}${row.side.padEnd(6)}${cells.map((c) => c.padStart(13)).join('')}`);
  }
  // the bar, worst side, read both ways
  const verdict = (ms: number, stepMs: number) => `${ms <= BAR * stepMs ? 'holds' : 'MISSES'} ${pct(ms, stepMs)}`;
  for (const rank of ranks) {
    const rows = r.rows.filter((row) => row.rank === rank);
    const all = Math.max(...rows.map(totalMs));
    const one = Math.max(...rows.map((row) => row.fragmentMs));
    const own = r.runtime === 'node' ? '' : `; of its own step: ${verdict(all, r.stepMs)}, ${verdict(one, r.stepMs)}`;
    console.log(
      `  rank ${rank}, ≤ 10% of the Node step: P rounds ${verdict(all, nodeStepMs)}, one fragment ${verdict(one, nodeStepMs)}${own}`,
    );
  }
  if (r.profile.length === 0) return;
  console.log('  where it goes, each primitive once over every factored tensor, ms:');
  const cols = ['project right', 'project left', 'reconstruct', 'orthonormal×2', 'fp4 rtrip'];
  console.log(`  ${'rank'.padEnd(6)}${cols.map((c) => c.padStart(15)).join('')}`);
  for (const p of r.profile) {
    const cells = [p.projectRightMs, p.projectLeftMs, p.reconstructMs, p.orthonormalizeMs, p.fp4RoundTripMs];
    console.log(`  ${String(p.rank).padEnd(6)}${cells.map((c) => c.toFixed(1).padStart(15)).join('')}`);
  }
}

const loadBefore = loadavg().map((l) => Number(l.toFixed(2)));
const given = args['step-ms'];
console.log(
  `${preset}, P ${base.fragmentCount} sequential, fp4 block ${blockSize}, best of ${base.repeats} rounds; ` +
    `load average ${loadBefore.join(' ')} on ${cpus().length} cores`,
);
const nodeStepMs = given ? Number(given) : await cpuStepMs(base.preset, batch, seq, steps);
console.log(`one CPU inner step (${batch}×${seq}) in Node: ${nodeStepMs.toFixed(0)} ms${given ? ' (given)' : ''}`);
const node = await run(
  'node',
  nodeStepMs,
  async (c) => measureLowRank(c),
  async (c) => profileLowRank(c),
);
printRuntime(node, nodeStepMs);

let browser: Runtime | null = null;
let browserMissing: string | null = null;
if (args['skip-browser']) browserMissing = 'skipped (--skip-browser)';
else {
  const page = await openLowRankPage();
  if ('missing' in page) {
    browserMissing = page.missing;
  } else {
    try {
      const stepMs = await page.call('cpuStepMs', base.preset, batch, seq, steps);
      browser = await run(
        page.chromium,
        stepMs,
        (c) => page.call('measureLowRank', c),
        (c) => page.call('profileLowRank', c),
      );
      console.log(`\none CPU inner step (${batch}×${seq}) in Chromium: ${stepMs.toFixed(0)} ms`);
      printRuntime(browser, nodeStepMs);
    } finally {
      await page.close();
    }
  }
}
if (browserMissing) console.log(`\nChromium: NOT MEASURED, ${browserMissing}`);

const result = {
  bench: 'lowrank',
  machine: `${cpus().length} × ${cpus()[0]?.model.trim() ?? 'CPU'}, Node ${process.version}`,
  preset,
  fragments: base.fragmentCount,
  codec: { name: 'fp4', blockSize },
  repeats: base.repeats,
  step: { batch, seq },
  // other work on the machine inflates every figure: the load average before and after
  load: { before: loadBefore, after: loadavg().map((l) => Number(l.toFixed(2))) },
  bar: BAR,
  runtimes: [node, ...(browser ? [browser] : [])],
  ...(browserMissing ? { chromium: browserMissing } : {}),
};
console.log(JSON.stringify(result));
const out = args.out ?? `bench/results/lowrank-${preset}-${cpus().length}core.json`;
if (!args['no-save']) writeFileSync(out, formatJson(result));
