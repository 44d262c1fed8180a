/**
 * `shoal plan`: the run options to start a room with, from the model, the expected volunteers,
 * the token budget and each volunteer's throughput and link (@shoal/room/plan; docs/plan.md).
 * Prints a short table and why; `--json` one JSON line ending with the options; `--as-flags` only
 * the flags, for `shoal host $(shoal plan … --as-flags)` and `shoal simulate $(…) --dry-run`.
 */
import { formatCount, type Plan, type PlanOptions, plan } from '@shoal/room/plan';
import { ROOM_MODEL_DEFAULTS } from '@shoal/room/room-model-defaults';
import { RUN_OPTIONS } from '@shoal/room/run-options';
import { UsageError } from './usage.ts';

export interface PlanCliOptions {
  preset?: string;
  params?: number;
  workers: number;
  tokens?: number;
  gpuTflops?: number;
  tokensPerSecond?: number;
  linkMbps: number;
  latencyMs: number;
  seq?: number;
  json?: boolean;
  asFlags?: boolean;
}

/** The plan's options as flags both `shoal host` and `shoal simulate` take, in the table's order. */
export function planFlags(options: PlanOptions): string[] {
  const flags: string[] = [];
  for (const [name, spec] of Object.entries(RUN_OPTIONS)) {
    const value = options[name as keyof PlanOptions];
    if (value === undefined) continue;
    if (!spec.simulate) throw new Error(`${spec.flag} is not a shoal simulate option`); // the table changed
    flags.push(spec.flag, String(value));
  }
  return flags;
}

const kebab = (name: string) => name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
const bytes = (n: number) => (n >= 1e6 ? `${(n / 1e6).toFixed(2)} MB` : `${(n / 1e3).toFixed(1)} kB`);
const seconds = (ms: number) => (ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${ms.toFixed(1)} ms`);
const percent = (x: number) => `${(100 * x).toFixed(1)}%`;

/** The human table: the recommendation, then why. */
function report(p: Plan, input: PlanCliOptions): string[] {
  const { options: o, timing: t } = p;
  const model = p.model.preset
    ? `${p.model.preset} (${formatCount(p.model.params)} params)`
    : `${formatCount(p.model.params)} params`;
  const throughput =
    input.tokensPerSecond !== undefined
      ? `${input.tokensPerSecond} tokens/s`
      : `${input.gpuTflops ?? ROOM_MODEL_DEFAULTS.gpuTflops} TFLOP/s`;
  // the run options' own labels: the form and docs/cli.md say the same
  const rows: [string, string][] = [
    [RUN_OPTIONS.innerSteps.label, String(o.innerSteps)],
    [RUN_OPTIONS.fragments.label, String(o.fragments)],
    [RUN_OPTIONS.overlap.label, String(o.overlap)],
    [RUN_OPTIONS.codec.label, o.codec],
    [RUN_OPTIONS.lr.label, `${o.lr}${p.fit.inRange ? '' : ` (fit: ${p.fit.innerLr.toPrecision(2)}, extrapolated)`}`],
    [
      'batch per volunteer',
      `${o.batch} × ${o.seq} tokens (global ${formatCount(t.globalBatchTokens)} tokens; fit: ${p.fit.globalBatchSequences.toPrecision(3)} × 2048)`,
    ],
    [RUN_OPTIONS.outerLr.label, String(o.outerLr)],
    ['', ''],
    ['step', `${seconds(t.stepMs)} of compute, ${formatCount(t.steps)} steps for ${formatCount(p.tokens)} tokens`],
    ['bytes per round', `${bytes(t.roundUploadBytes)} uploaded per volunteer (largest fragment)`],
    ['round vs τ·step', `${seconds(t.roundMs)} vs ${seconds(t.overlapMs)}`],
    ['uplink busy', percent(t.linkBusy)],
    ['utilisation', `${percent(t.utilization)} predicted${p.meetsTarget ? '' : ' (below 95%)'}`],
    ['expected loss', p.fit.expectedLoss === null ? 'extrapolated: no prediction' : p.fit.expectedLoss.toFixed(3)],
  ];
  return [
    `${model}, ${p.workers} volunteers at ${throughput}, ${input.linkMbps} Mbit/s, ${input.latencyMs} ms`,
    ...rows.map(([label, value]) => (label ? `  ${label.padEnd(28)}${value}` : '')),
    ...p.notes.map((note) => `note: ${note}`),
    `flags: ${planFlags(o).join(' ')}`,
  ];
}

export async function planCommand(input: PlanCliOptions): Promise<void> {
  if (input.json && input.asFlags) throw new UsageError('choose --json or --as-flags, not both');
  if (input.asFlags && input.preset === undefined) {
    throw new UsageError('--as-flags needs --preset: shoal host and shoal simulate train presets only');
  }
  let result: Plan;
  try {
    result = plan({
      preset: input.preset,
      params: input.params,
      workers: input.workers,
      tokens: input.tokens,
      // without either, the planner takes ROOM_MODEL_DEFAULTS.gpuTflops, as shoal simulate does
      gpuTflops: input.gpuTflops,
      tokensPerSecond: input.tokensPerSecond,
      linkMbps: input.linkMbps,
      latencyMs: input.latencyMs,
      seq: input.seq,
    });
  } catch (error) {
    // the planner names its inputs (linkMbps: …); a person typed flags (--link-mbps)
    const message = (error as Error).message.replace(/^([a-zA-Z]+):/, (_, name: string) => `--${kebab(name)}:`);
    throw new UsageError(message);
  }
  if (input.asFlags) {
    console.log(planFlags(result.options).join(' '));
    return;
  }
  if (input.json) {
    // the options last, as shoal host and shoal simulate name them
    const { options, ...rest } = result;
    console.log(JSON.stringify({ ...rest, options }));
    return;
  }
  for (const line of report(result, input)) console.log(line);
}
