/**
 * Which aggregation rule holds against a worker that scales its own Δ (docs/robust-aggregation.md):
 * for each rule and room size, `shoal attacks`' room (nano, the real CPU engine, 1 hostile) clean
 * and under each attack, and the final validation loss vs clean.
 *
 *   node --import tsx --import ./bench/register-raw.mjs bench/robust-aggregation.ts \
 *     [--workers 4,5,8] [--rules mean,clipped-mean,trimmed-mean,centered-clip] \
 *     [--attacks contribution-100x-own-state] [--tokens 140000] [--seeds 1] [--json]
 *
 * A rule is a name with optional parameters, `clipped-mean:clipFactor=1` or
 * `centered-clip:radiusFactor=0.5/iterations=1`. The room's rule is the run options' default
 * unless set: this sets DEFAULT_DILOCO.aggregation (which the attack room's config copies) for
 * each rule in turn; nothing else in the room changes.
 */
import { parseArgs } from 'node:util';
import { loadCorpus, validationBatches } from '@shoal/data';
import type { AggregationRule } from '@shoal/diloco';
import { DEFAULT_DILOCO } from '@shoal/room/run-config';
import { ROOM_DEFAULTS, runAttacks } from '@shoal/sim/attacks';

const { values } = parseArgs({
  options: {
    workers: { type: 'string', default: '4,5,8' },
    rules: { type: 'string', default: 'mean,trimmed-mean,clipped-mean,centered-clip' },
    attacks: { type: 'string', default: 'contribution-100x-own-state' },
    tokens: { type: 'string', default: '140000' },
    seeds: { type: 'string', default: '1' },
    json: { type: 'boolean', default: false },
  },
});

/** `name` or `name:key=value/key=value` (numbers). */
function ruleOf(text: string): AggregationRule {
  const [kind, params = ''] = text.split(':');
  const rule: Record<string, unknown> = { kind };
  for (const pair of params.split('/').filter(Boolean)) {
    const [key, value] = pair.split('=');
    rule[key as string] = Number(value);
  }
  return rule as unknown as AggregationRule;
}

const list = (text: string) => text.split(',').filter(Boolean);
const rules = list(values.rules);
const workerCounts = values.workers.split(',').map(Number);
const attacks = list(values.attacks);
const corpus = loadCorpus({ seqLen: ROOM_DEFAULTS.seqLen });
const evalBatches = validationBatches(corpus.validation, { batchSize: 8, seqLen: ROOM_DEFAULTS.seqLen, count: 4 });

interface Row {
  rule: string;
  workers: number;
  seed: number;
  attack: string;
  clean: number | null;
  loss: number | null;
  percent: number | null;
  stopped: boolean;
  detected: boolean;
}
const rows: Row[] = [];
const pct = (loss: number | null, clean: number | null) =>
  loss === null || clean === null ? null : (100 * (loss - clean)) / clean;
const baseline: Record<string, number | null> = {};

for (const text of rules) {
  DEFAULT_DILOCO.aggregation = ruleOf(text);
  for (const workers of workerCounts)
    for (const seed of list(values.seeds).map(Number)) {
      const started = performance.now();
      const report = await runAttacks({
        preset: 'nano',
        workers,
        hostile: 1,
        tokens: Number(values.tokens),
        seed,
        only: attacks,
        trainTokens: corpus.train,
        evalBatches,
      });
      const clean = report.clean[0]?.evalLoss ?? null;
      baseline[`${workers}:${seed}`] ??= clean;
      rows.push({
        rule: text,
        workers,
        seed,
        attack: 'none (clean)',
        clean: baseline[`${workers}:${seed}`] ?? null,
        loss: clean,
        percent: pct(clean, baseline[`${workers}:${seed}`] ?? null),
        stopped: true,
        detected: false,
      });
      for (const a of report.attacks) {
        rows.push({
          rule: text,
          workers,
          seed,
          attack: a.name,
          clean,
          loss: a.evalLoss,
          percent: pct(a.evalLoss, clean),
          stopped: a.stopped,
          detected: a.detected,
        });
      }
      const seconds = ((performance.now() - started) / 1000).toFixed(0);
      const line = rows
        .slice(-1 - report.attacks.length)
        .map(
          (r) =>
            `${r.attack} ${r.loss?.toFixed(4)} (${r.percent === null ? '—' : `${r.percent >= 0 ? '+' : ''}${r.percent.toFixed(1)}%`})`,
        )
        .join('; ');
      console.error(`${text}, ${workers} workers, seed ${seed} (${seconds} s): ${line}`);
    }
}

console.log(
  `| rule | workers | seed | attack | eval loss | vs clean (same rule) | vs ${rules[0]}'s clean | stopped | detected |`,
);
console.log('| --- | --- | --- | --- | --- | --- | --- | --- | --- |');
const signed = (p: number | null) => (p === null ? '—' : `${p >= 0 ? '+' : ''}${p.toFixed(1)}%`);
for (const r of rows) {
  const clean = r.attack === 'none (clean)';
  const sameRule = clean ? '' : signed(r.percent);
  const vsFirst = signed(pct(r.loss, baseline[`${r.workers}:${r.seed}`] ?? null));
  const verdicts = clean ? '| |' : `| ${r.stopped ? 'yes' : 'no'} | ${r.detected ? 'yes' : 'no'} |`;
  const loss = r.loss?.toFixed(4) ?? 'NaN';
  console.log(`| ${r.rule} | ${r.workers} | ${r.seed} | ${r.attack} | ${loss} | ${sameRule} | ${vsFirst} ${verdicts}`);
}
if (values.json) console.log(JSON.stringify({ rows }));
