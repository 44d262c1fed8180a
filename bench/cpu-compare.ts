/**
 * The arithmetic of bench:engine's CPU comparison, apart from the engines: parsing the shape and
 * thread lists, the order engines take turns in, medians of run medians, FLOP counts and the table.
 */
import { type GptConfig, PRESETS, type PresetName } from '../packages/model/src/config.ts';
import type { StepSamples } from './torch-child.ts';

export interface CpuShape {
  preset: PresetName;
  B: number;
  T: number;
}

/** The shapes measured by default: nano's 1,024-token step, then tiny at 1,024 and 4,096 tokens. */
export const DEFAULT_CPU_SHAPES = 'nano:16x64,tiny:8x128,tiny:32x128';

const positiveInteger = (text: string) => (/^[1-9]\d*$/.test(text) ? Number(text) : Number.NaN);

/** `nano:16x64,tiny:8x128` → shapes; throws naming the entry that is wrong. */
export function parseCpuShapes(text: string): CpuShape[] {
  const entries = text.split(',').filter(Boolean);
  if (entries.length === 0) throw new Error('--cpu-shapes: no shapes given (e.g. nano:16x64)');
  return entries.map((entry) => {
    const match = /^(\w+):(\d+)[x×](\d+)$/.exec(entry.trim());
    if (!match) throw new Error(`--cpu-shapes: "${entry}" is not preset:BxT (e.g. tiny:8x128)`);
    const [, preset = '', b = '', t = ''] = match;
    if (!Object.hasOwn(PRESETS, preset)) {
      throw new Error(`--cpu-shapes: unknown preset "${preset}" (${Object.keys(PRESETS).join(', ')})`);
    }
    const B = positiveInteger(b);
    const T = positiveInteger(t);
    const { blockSize } = PRESETS[preset as PresetName];
    if (!(B >= 1 && T >= 1 && T <= blockSize)) {
      throw new Error(`--cpu-shapes: "${entry}" needs B ≥ 1 and 1 ≤ T ≤ ${blockSize}`);
    }
    return { preset: preset as PresetName, B, T };
  });
}

/** `1,2` → [1, 2] (sorted, without repeats); throws on anything but positive integers. */
export function parseThreadList(text: string, flag: string): number[] {
  const counts = text.split(',').map((part) => positiveInteger(part.trim()));
  if (counts.length === 0 || counts.some((n) => !(n >= 1))) {
    throw new Error(`${flag}: "${text}" is not a list of positive integers (e.g. 1,2)`);
  }
  return [...new Set(counts)].sort((a, b) => a - b);
}

export function median(values: readonly number[]): number {
  if (values.length === 0) throw new RangeError('median of no values');
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

/**
 * The order engines run in, round `round`: rotated by one each round, so every engine runs first
 * and after every other as often as the others (no engine always inherits a warm or busy core).
 */
export function roundOrder<E>(engines: readonly E[], round: number): E[] {
  if (engines.length === 0) return [];
  const shift = round % engines.length;
  return [...engines.slice(shift), ...engines.slice(0, shift)];
}

export interface RunSummary {
  /** Median over runs of each run's median step (ms). */
  msPerStep: number;
  /** Each run's median step (ms), in the order the runs ran. */
  runMedians: number[];
  /** Process CPU time ÷ wall time over all timed steps: how many cores the engine kept busy. */
  coresBusy: number;
}

export function summariseRuns(runs: readonly StepSamples[]): RunSummary {
  if (runs.length === 0) throw new RangeError('no runs to summarise');
  const runMedians = runs.map((run) => median(run.ms));
  const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
  const wall = sum(runs.map((run) => sum(run.ms)));
  const cpu = sum(runs.map((run) => sum(run.cpuMs)));
  return { msPerStep: median(runMedians), runMedians, coresBusy: cpu / wall };
}

/**
 * FLOPs of a step whose attention computes the whole T×T square (Shoal today, and eager PyTorch):
 * the matmuls of trainingStepFlops (6 per parameter per token, tied head included) plus
 * QKᵀ and PV over all T² pairs, 4·B·T²·C per layer forward, ×3 with backward. trainingStepFlops
 * counts the causal half only; this is what PyTorch's profiler should count (mm, addmm, bmm).
 */
export function fullSquareStepFlops(config: GptConfig, B: number, T: number): number {
  const { nLayer: L, nEmbd: C, vocabSize: V } = config;
  const matmulParams = L * 12 * C * C + V * C;
  return 6 * matmulParams * B * T + 3 * L * 4 * B * T * T * C;
}

export interface CpuTableRow {
  preset: string;
  B: number;
  T: number;
  /** trainingStepFlops of the shape (causal attention). */
  flops: number;
  engine: string;
  threads: number;
  msPerStep: number;
  runMedians: number[];
  coresBusy: number;
  /** Not taking turns with the others (TF.js-WASM, measured once after the rounds). */
  alone?: boolean;
}

const grouped = (n: number, digits: number) =>
  n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });

/**
 * The comparison as a Markdown table: step time, useful GFLOP/s (trainingStepFlops ÷ step) and
 * speed against the shape's Shoal 1-thread row (its ms ÷ this row's ms; above 1 is faster).
 */
export function formatCpuTable(rows: readonly CpuTableRow[]): string {
  const lines = [
    '| shape | engine | threads | ms/step (median of runs) | run medians | GFLOP/s | cores busy | speed vs Shoal 1t |',
    '|---|---|---:|---:|---|---:|---:|---:|',
  ];
  for (const r of rows) {
    const shoal = rows.find(
      (s) => s.preset === r.preset && s.B === r.B && s.T === r.T && s.engine === 'Shoal' && s.threads === 1,
    );
    const speed = shoal ? `${(shoal.msPerStep / r.msPerStep).toFixed(2)}×` : '—';
    const spread = r.runMedians.length
      ? `${grouped(Math.min(...r.runMedians), 1)}–${grouped(Math.max(...r.runMedians), 1)}`
      : '—';
    lines.push(
      `| ${r.preset} ${r.B}×${r.T} (${(r.flops / 1e9).toFixed(2)} GFLOP) | ${r.engine}${r.alone ? ' (alone)' : ''} ` +
        `| ${r.threads} | ${grouped(r.msPerStep, 1)} | ${spread} | ${(r.flops / r.msPerStep / 1e6).toFixed(1)} ` +
        `| ${r.coresBusy.toFixed(2)} | ${speed} |`,
    );
  }
  return lines.join('\n');
}
