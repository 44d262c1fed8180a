/**
 * The DiLoCo scaling paper's trend (arXiv 2503.09799, Table 4) on Shoal's CPU engine: validation
 * loss of data-parallel and of DiLoCo with M = 1, 2, 4, 8 replicas at equal tokens and equal
 * global batch, per preset, beside the paper's 35M row. Does DiLoCo's gap to dp shrink as the
 * model grows, and does M = 1 (Lookahead with Nesterov) beat dp?
 *
 * - dp: `simulateMethod('dp')` with one replica at the whole global batch. dp with M synchronised
 *   workers at batch global/M is the same algorithm, so one dp run per preset serves every M.
 * - diloco: M workers at batch global/M each, P = 1, τ = 0, α = 0, fp32, H inner steps a round.
 * - The link is fast (10 Gbit/s, 1 ms) and an inner step is modelled as 1 s, so the network never
 *   holds a round up: the loss is the algorithm's, not the link's.
 * - Every run trains --tokens tokens (the same number of steps for every method), then
 *   evaluates θ_global on the same validation batches.
 *
 *   npm run bench:scaling -- [--presets nano,tiny] [--replicas 1,2,4,8] [--global-batch 32]
 *     [--seq 64] [--tokens 921600] [--inner-steps 30] [--lr 3e-3] [--outer-lr 0.7]
 *     [--outer-momentum 0.9] [--seed 1] [--eval-batches 16]
 *     [--out bench/results/scaling-<cores>core.json] [--doc docs/scaling.md] [--no-save]
 *
 * --outer-lr takes one η for every M, `M:η` pairs, or several bare values to sweep: then every M
 * runs with each and the gap uses the best, as the paper takes the best η per size and M.
 * Prints a table per preset and one JSON line; unless --no-save, writes the JSON to --out and
 * the tables into --doc between its `bench:scaling` markers. About 20 minutes of CPU time.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { parseArgs } from 'node:util';
import { loadCorpus, validationBatches } from '@shoal/data';
import { buildLayout, CpuTrainer, presetConfig } from '@shoal/model';
import { type MethodName, simulateMethod } from '@shoal/sim';

const { values: args } = parseArgs({
  options: {
    presets: { type: 'string', default: 'nano,tiny' },
    replicas: { type: 'string', default: '1,2,4,8' },
    'global-batch': { type: 'string', default: '32' },
    seq: { type: 'string', default: '64' },
    tokens: { type: 'string', default: String(450 * 32 * 64) },
    'inner-steps': { type: 'string', default: '30' },
    lr: { type: 'string', default: '3e-3' },
    'outer-lr': { type: 'string', default: '0.7' },
    'outer-momentum': { type: 'string', default: '0.9' },
    seed: { type: 'string', default: '1' },
    'eval-batches': { type: 'string', default: '16' },
    out: { type: 'string', default: `bench/results/scaling-${cpus().length}core.json` },
    doc: { type: 'string', default: 'docs/scaling.md' },
    save: { type: 'boolean', default: true },
  },
  allowNegative: true,
});

const numbers = (flag: string, value: string | undefined) => {
  const list = (value ?? '').split(',').filter(Boolean).map(Number);
  if (list.length === 0 || list.some((x) => !Number.isFinite(x))) throw new Error(`--${flag}: numbers, got ${value}`);
  return list;
};
const presets = (args.presets ?? '').split(',').filter(Boolean);
const replicas = numbers('replicas', args.replicas);
const globalBatch = Number(args['global-batch']);
const seqLen = Number(args.seq);
const tokens = Number(args.tokens);
const innerSteps = Number(args['inner-steps']);
const lr = Number(args.lr);
const outerMomentum = Number(args['outer-momentum']);
const seed = Number(args.seed);
for (const M of replicas) {
  if (!Number.isInteger(globalBatch / M))
    throw new Error(`--global-batch ${globalBatch} is not a multiple of M = ${M}`);
}
const steps = Math.ceil(tokens / (globalBatch * seqLen));

/** η per M: the values to try for each M (one, unless sweeping). */
function outerLrs(spec: string): Map<number, number[]> {
  const entries = spec.split(',').filter(Boolean);
  if (entries.every((e) => !e.includes(':'))) {
    const sweep = numbers('outer-lr', spec);
    return new Map(replicas.map((M) => [M, sweep]));
  }
  const byM = new Map(entries.map((e) => e.split(':').map(Number) as [number, number]));
  return new Map(
    replicas.map((M) => {
      const eta = byM.get(M);
      if (eta === undefined || !Number.isFinite(eta)) throw new Error(`--outer-lr gives no η for M = ${M}: ${spec}`);
      return [M, [eta]];
    }),
  );
}
const etas = outerLrs(args['outer-lr'] ?? '');

/** SL Table 4, 35M: eval loss of DP and of DiLoCo per M. */
const PAPER_35M: Record<string, number> = { dp: 3.485, 1: 3.482, 2: 3.508, 4: 3.554, 8: 3.621 };
/** SL Tables 7–9, loss = A·N^α fitted per algorithm on 35M…2.4B. */
const LOSS_FITS: Record<string, [A: number, alpha: number]> = {
  dp: [18.129, -0.0953],
  1: [18.363, -0.0961],
  2: [18.768, -0.0969],
  4: [19.762, -0.0992],
  8: [21.051, -0.1018],
};
/** The independent fits' gap to DP at N parameters, %: far outside their range for our presets. */
function fittedGap(M: number, N: number): number | null {
  const fit = LOSS_FITS[M];
  const dp = LOSS_FITS.dp;
  if (!fit || !dp) return null;
  return 100 * ((fit[0] / dp[0]) * N ** (fit[1] - dp[1]) - 1);
}

interface Row {
  preset: string;
  params: number;
  method: 'dp' | 'diloco';
  replicas: number;
  batchPerWorker: number;
  outerLr: number | null;
  evalLoss: number;
  gapPercent: number;
  committedRounds: number;
  abortedRounds: number;
  wallSeconds: number;
}

const started = performance.now();
const cpuSeconds = () => {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1e6;
};
const corpus = loadCorpus({ seqLen });
const evalBatches = validationBatches(corpus.validation, {
  batchSize: globalBatch,
  seqLen,
  count: Number(args['eval-batches']),
});
const machine = `${cpus().length} × ${cpus()[0]?.model ?? 'unknown CPU'}, Node ${process.version}`;
console.log(
  `DiLoCo vs dp on the CPU engine (${machine}): global batch ${globalBatch}×${seqLen}, ${steps} steps ` +
    `(${(steps * globalBatch * seqLen).toLocaleString('en-US')} tokens) per run, H ${innerSteps}, inner lr ${lr}, ` +
    `outer momentum ${outerMomentum}, seed ${seed}`,
);

async function run(preset: string, method: MethodName, M: number, outerLr: number | null) {
  const t0 = performance.now();
  const result = await simulateMethod(method, {
    preset,
    workers: M,
    batch: globalBatch / M,
    seqLen,
    lr,
    innerSteps,
    fragments: 1,
    overlap: 0,
    alpha: 0,
    codec: 'fp32',
    ...(outerLr === null ? {} : { outerLr, outerMomentum }),
    tokens: steps * globalBatch * seqLen,
    seed,
    gpuTflops: 10,
    stepMs: 1000,
    linkMbps: 10_000,
    latencyMs: 1,
    dryRun: false,
    createTrainer: async (model, train, params) => new CpuTrainer(model, train, params),
    trainTokens: corpus.train,
    evalBatches,
  });
  if (result.evalLoss === null) throw new Error(`${preset} ${method} M=${M}: no evaluation`);
  const wallSeconds = (performance.now() - t0) / 1000;
  process.stderr.write(
    `${preset} ${method} M=${M}${outerLr === null ? '' : ` η=${outerLr}`}: ${result.evalLoss.toFixed(4)} ` +
      `(${wallSeconds.toFixed(0)} s, ${((performance.now() - started) / 60_000).toFixed(1)} min in)\n`,
  );
  return { result, wallSeconds, evalLoss: result.evalLoss };
}

const rows: Row[] = [];
for (const preset of presets) {
  const params = buildLayout(presetConfig(preset)).size;
  const dp = await run(preset, 'dp', 1, null);
  const dpRow: Row = {
    preset,
    params,
    method: 'dp',
    replicas: 1,
    batchPerWorker: globalBatch,
    outerLr: null,
    evalLoss: dp.evalLoss,
    gapPercent: 0,
    committedRounds: 0,
    abortedRounds: 0,
    wallSeconds: dp.wallSeconds,
  };
  rows.push(dpRow);
  for (const M of replicas) {
    for (const eta of etas.get(M) ?? []) {
      const { result, evalLoss, wallSeconds } = await run(preset, 'diloco', M, eta);
      rows.push({
        preset,
        params,
        method: 'diloco',
        replicas: M,
        batchPerWorker: globalBatch / M,
        outerLr: eta,
        evalLoss,
        gapPercent: 100 * (evalLoss / dp.evalLoss - 1),
        committedRounds: result.committedRounds,
        abortedRounds: result.abortedRounds,
        wallSeconds,
      });
    }
  }
  console.log(`\n${preset} (${(params / 1e6).toFixed(2)}M parameters)`);
  console.log('method   M   batch/worker   η      eval loss   vs dp     rounds (aborted)   wall');
  for (const r of rows.filter((x) => x.preset === preset)) {
    console.log(
      `${r.method.padEnd(9)}${String(r.replicas).padEnd(4)}${String(r.batchPerWorker).padEnd(15)}` +
        `${(r.outerLr === null ? '—' : String(r.outerLr)).padEnd(7)}${r.evalLoss.toFixed(4).padEnd(12)}` +
        `${(r.method === 'dp' ? '—' : signed(r.gapPercent)).padEnd(10)}` +
        `${r.method === 'dp' ? '—'.padEnd(19) : `${r.committedRounds} (${r.abortedRounds})`.padEnd(19)}` +
        `${r.wallSeconds.toFixed(0)} s`,
    );
  }
}

function signed(percent: number, digits = 1): string {
  const text = Math.abs(percent).toFixed(digits);
  return `${percent < 0 && Number(text) !== 0 ? '−' : '+'}${text}%`;
}

/** The best η per (preset, M): the row the gap is read from. */
function best(preset: string, M: number): Row | undefined {
  const runs = rows.filter((r) => r.preset === preset && r.method === 'diloco' && r.replicas === M);
  return runs.reduce<Row | undefined>((a, r) => (a === undefined || r.evalLoss < a.evalLoss ? r : a), undefined);
}
const dpOf = (preset: string) => rows.find((r) => r.preset === preset && r.method === 'dp');

function markdown(): string {
  const head = `| | N | dp | ${replicas.map((M) => `M = ${M}`).join(' | ')} |`;
  const rule = `|---|---|---|${replicas.map(() => '---|').join('')}`;
  const measured = presets.map((preset) => {
    const dp = dpOf(preset);
    const cells = replicas.map((M) => {
      const r = best(preset, M);
      return r ? `${r.evalLoss.toFixed(3)} (${signed(r.gapPercent)})` : '—';
    });
    return `| ${preset} | ${((dp?.params ?? 0) / 1e6).toFixed(2)}M | ${dp?.evalLoss.toFixed(3)} | ${cells.join(' | ')} |`;
  });
  const paperCells = replicas.map((M) => {
    const loss = PAPER_35M[M];
    const dp = PAPER_35M.dp;
    return loss && dp ? `${loss.toFixed(3)} (${signed(100 * (loss / dp - 1))})` : '—';
  });
  const fitted = presets.map((preset) => {
    const N = dpOf(preset)?.params ?? 0;
    const cells = replicas.map((M) => {
      const gap = fittedGap(M, N);
      return gap === null ? '—' : signed(gap);
    });
    return `| SL Tables 7–9 fits at ${preset}'s N (extrapolated) | | | ${cells.join(' | ')} |`;
  });
  const lines = [head, rule, ...measured, `| paper, 35M (SL Table 4) | 35M | 3.485 | ${paperCells.join(' | ')} |`];
  lines.push(...fitted);
  const sweeps = presets.flatMap((preset) => {
    const swept = replicas.filter((M) => (etas.get(M) ?? []).length > 1);
    if (swept.length === 0) return [];
    const values = [...new Set(swept.flatMap((M) => etas.get(M) ?? []))];
    const table = [
      '',
      `${preset}, eval loss per outer lr η (rows) and M (columns):`,
      '',
      `| η | ${swept.map((M) => `M = ${M}`).join(' | ')} |`,
      `|---|${swept.map(() => '---|').join('')}`,
      ...values.map((eta) => {
        const cells = swept.map((M) => {
          const r = rows.find((x) => x.preset === preset && x.replicas === M && x.outerLr === eta);
          return r ? `${r.evalLoss.toFixed(4)} (${signed(r.gapPercent, 2)})` : '—';
        });
        return `| ${eta} | ${cells.join(' | ')} |`;
      }),
    ];
    return table;
  });
  return [...lines, ...sweeps].join('\n');
}

function conditions(): string {
  const etaText = replicas.map((M) => `M = ${M}: ${(etas.get(M) ?? []).join(', ')}`).join('; ');
  return (
    `Measured by \`npm run bench:scaling\` on ${new Date().toISOString().slice(0, 10)}, ` +
    `${machine}; ${((performance.now() - started) / 60_000).toFixed(1)} minutes in all ` +
    `(${(cpuSeconds() / 60).toFixed(1)} minutes of this process's CPU time). ` +
    `Global batch ${globalBatch} sequences × ${seqLen} tokens, ${steps} steps ` +
    `(${(steps * globalBatch * seqLen).toLocaleString('en-US')} tokens) per run, inner AdamW lr ${lr} ` +
    `(warmup ${Math.min(100, Math.floor(steps / 10))} steps, cosine to lr/10), H = ${innerSteps}, ` +
    `outer Nesterov momentum ${outerMomentum}, outer lr η (${etaText}), seed ${seed}, ` +
    `${Number(args['eval-batches']) * globalBatch} validation windows.`
  );
}

/** The two questions, read off the table: the first preset against the last. */
function verdicts(): string[] {
  const lines: string[] = [];
  const [small, large] = [presets[0], presets.at(-1)];
  if (small !== undefined && large !== undefined && small !== large) {
    for (const M of replicas) {
      const [a, b] = [best(small, M), best(large, M)];
      if (!a || !b) continue;
      // The law: L_M / L_dp falls as N grows, for every M (the fitted exponents α_M < α_dp).
      const verdict = b.gapPercent < a.gapPercent ? 'falls, as the law predicts' : 'rises, against the law';
      lines.push(
        `- M = ${M}: DiLoCo's loss relative to dp ${verdict}, from ${signed(a.gapPercent, 2)} on ${small} ` +
          `to ${signed(b.gapPercent, 2)} on ${large}.`,
      );
    }
  }
  for (const preset of presets) {
    const r = best(preset, 1);
    if (!r) continue;
    const verb = r.gapPercent < 0 ? 'beats' : 'does not beat';
    lines.push(`- ${preset}: M = 1 DiLoCo ${verb} dp (${signed(r.gapPercent, 2)}).`);
  }
  return lines;
}

const doc = [conditions(), '', markdown(), '', ...verdicts()].join('\n');
console.log(`\n${doc}`);
const summary = {
  bench: 'scaling',
  machine,
  globalBatch,
  seqLen,
  steps,
  tokens: steps * globalBatch * seqLen,
  innerSteps,
  lr,
  outerMomentum,
  seed,
  minutes: (performance.now() - started) / 60_000,
  cpuMinutes: cpuSeconds() / 60,
  rows,
};
const json = JSON.stringify(summary);
console.log(json);
if (args.save) {
  if (args.out) writeFileSync(args.out, `${JSON.stringify(summary, null, 2)}\n`);
  if (args.doc) {
    const BEGIN = '<!-- bench:scaling begin -->';
    const END = '<!-- bench:scaling end -->';
    const text = readFileSync(args.doc, 'utf8');
    const [before, rest] = text.split(BEGIN);
    const after = rest?.split(END)[1];
    if (before === undefined || after === undefined) throw new Error(`${args.doc} lacks the ${BEGIN} … ${END} markers`);
    writeFileSync(args.doc, `${before}${BEGIN}\n${doc}\n${END}${after}`);
  }
}
