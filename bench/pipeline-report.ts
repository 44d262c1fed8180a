/**
 * bench/pipeline.ts's rows and its table: measured (S stage threads) beside modelled
 * (simulateSchedule with the measured stage times), then the loss with f32 and bf16 activations.
 */
import type { PipelineSchedule } from '../packages/model/src/pipeline/schedule.ts';
import type { ActivationType } from './pipeline-stage.ts';

export interface PipelineRow {
  S: number;
  M: number;
  schedule: PipelineSchedule;
  activations: ActivationType;
  /** Median and least over the timed steps. */
  stepMs: number;
  bestStepMs: number;
  bubble: number;
  /** simulateSchedule at free links, then at each of `links`. */
  modelStepMs: number[];
  modelBubble: number[];
  idealBubble: number;
  peakInFlight: number[];
  bytesPerStep: number;
  bytesPerToken: number;
  /** Per stage, medians over the timed steps: busy (forward, backward, codec, step's end), codec, waiting. */
  busyMs: number[];
  codecMs: number[];
  waitMs: number[];
  /** Every step's training loss, then the mean loss on the held-out batches after the last. */
  losses: number[];
  validationLoss: number;
}

export function printPipelineTable(
  preset: string,
  rows: PipelineRow[],
  { seqLen, links, cores }: { seqLen: number; links: number[]; cores: number },
): void {
  const pct = (x: number) => `${(100 * x).toFixed(1)}%`;
  const linkNames = links.map((mbps) => (mbps >= 1000 ? `${mbps / 1000}G` : `${mbps}M`));
  console.log(
    `\n${preset}, T ${seqLen}: measured (S threads on ${cores} cores) | modelled (simulateSchedule, the stage times ` +
      `above; links ${linkNames.join(', ')} bit/s carry the row's activation type)`,
  );
  const head = [
    'S'.padStart(2),
    'M'.padStart(3),
    'schedule'.padEnd(8),
    'act'.padEnd(4),
    'step ms: med'.padStart(12),
    'best'.padStart(6),
    'bubble'.padStart(7),
    '|',
    'model ms'.padStart(8),
    'bubble: free'.padStart(12),
    ...linkNames.map((name) => name.padStart(7)),
    'ideal'.padStart(7),
    'in-flight'.padStart(12),
    'MB/step'.padStart(8),
    'B/token'.padStart(8),
  ];
  console.log(head.join(' '));
  for (const r of rows) {
    console.log(
      [
        String(r.S).padStart(2),
        String(r.M).padStart(3),
        r.schedule.padEnd(8),
        r.activations.padEnd(4),
        r.stepMs.toFixed(1).padStart(12),
        r.bestStepMs.toFixed(0).padStart(6),
        pct(r.bubble).padStart(7),
        '|',
        (r.modelStepMs[0] ?? 0).toFixed(1).padStart(8),
        pct(r.modelBubble[0] ?? 0).padStart(12),
        ...r.modelBubble.slice(1).map((b) => pct(b).padStart(7)),
        pct(r.idealBubble).padStart(7),
        r.peakInFlight.join('/').padStart(12),
        (r.bytesPerStep / 1e6).toFixed(2).padStart(8),
        r.bytesPerToken.toFixed(0).padStart(8),
      ].join(' '),
    );
  }
  if (rows.some((r) => r.S > cores)) {
    console.log(
      `  S > ${cores}: the stage threads timeshare ${cores} cores, so their measured step and bubble are not S machines'.`,
    );
  }
  console.log('\n  loss after the last step (train batch / held out), f32 → bf16 activations');
  for (const S of new Set(rows.map((r) => r.S))) {
    const f32 = rows.find((r) => r.S === S && r.activations === 'f32');
    const bf16 = rows.find((r) => r.S === S && r.activations === 'bf16');
    const cell = (r: PipelineRow | undefined) =>
      r ? `${(r.losses.at(-1) ?? 0).toFixed(4)} / ${r.validationLoss.toFixed(4)}` : '—';
    const most = (a: number[], b: number[]) => Math.max(...a.map((x, i) => Math.abs(x - (b[i] ?? Number.NaN))));
    const delta =
      f32 && bf16
        ? `  (held out Δ ${(bf16.validationLoss - f32.validationLoss).toExponential(2)}, ` +
          `largest |Δ| of a step's loss ${most(bf16.losses, f32.losses).toExponential(2)})`
        : '';
    console.log(`  S ${S}: ${cell(f32)} → ${cell(bf16)}${delta}`);
  }
}
