/**
 * summary.md from the parts' JSON files: the adapter, the gradient check, the step-time table,
 * the kernel table and the f16-against-f32 check, and which parts failed or ran out of time.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { AdapterPart } from './adapter.ts';
import type { GradsPart } from './grads.ts';
import type { KernelsPart } from './kernels.ts';
import { PART_NAMES, type PartName } from './plan.ts';
import type { PrecisionPart } from './precision.ts';
import { type EngineTiming, type StepsPart, TORCH_PRECISIONS } from './steps.ts';

type Written<T> = T & { part: string; complete: boolean; seconds: number; error?: string };

function read<T>(out: string, part: PartName): Written<T> | null {
  const path = join(out, `${part}.json`);
  if (!existsSync(path)) return null;
  try {
    return JSON.parse(readFileSync(path, 'utf8')) as Written<T>;
  } catch {
    return null;
  }
}

const num = (value: number | undefined | null, digits = 2) =>
  value === undefined || value === null || !Number.isFinite(value) ? '—' : value.toFixed(digits);
const exp = (value: number | undefined | null) =>
  value === undefined || value === null || !Number.isFinite(value) ? '—' : value.toExponential(2);
/** Three significant digits: TFLOP/s on a software adapter are thousandths. */
const sig = (value: number | undefined | null) =>
  value === undefined || value === null || !Number.isFinite(value) ? '—' : value.toPrecision(3);
const ms = (t: EngineTiming | undefined) =>
  t?.msPerStep !== undefined ? sig(t.msPerStep) : t?.error ? 'error' : t?.skipped ? 'skipped' : '—';
const oneLine = (text: string) => text.split('\n')[0]?.slice(0, 160) ?? '';

function adapterSection(part: Written<AdapterPart> | null): string[] {
  if (!part) return ['## Adapter', '', 'not measured', ''];
  const lines = ['## Adapter', ''];
  const engine = part.engine;
  lines.push(
    `- engine's adapter: ${engine && 'adapter' in engine ? engine.adapter : `none (${engine?.error ?? '?'})`}`,
  );
  for (const probe of part.probes ?? []) {
    const toggles = probe.toggles.length ? probe.toggles.join(' ') : 'no toggles';
    if (!probe.found) {
      lines.push(`- ${toggles}: no adapter${probe.error ? ` (${oneLine(probe.error)})` : ''}`);
      continue;
    }
    const info = probe.info ?? {};
    const limit = (name: string) => probe.limits?.[name] ?? '?';
    const configs = Array.isArray(info.subgroupMatrixConfigs) ? info.subgroupMatrixConfigs.length : 0;
    lines.push(
      `- ${toggles}: ${String(info.vendor ?? '?')} ${String(info.architecture ?? '')} (${String(info.description ?? '')}); ` +
        `subgroup sizes ${String(info.subgroupMinSize ?? '?')}–${String(info.subgroupMaxSize ?? '?')}; ` +
        `maxStorageBufferBindingSize ${limit('maxStorageBufferBindingSize')}, maxBufferSize ${limit('maxBufferSize')}, ` +
        `maxComputeWorkgroupStorageSize ${limit('maxComputeWorkgroupStorageSize')}; subgroup-matrix configurations: ${configs}`,
      `  - features: ${probe.features?.join(', ') || 'none'}`,
    );
    if (probe.subgroupMatrix) {
      const s = probe.subgroupMatrix;
      lines.push(
        `  - subgroup-matrix module: ${'error' in s ? `error ${oneLine(s.error)}` : s.compiled ? `compiles${s.pipeline ? ', pipeline accepted' : ', pipeline refused'}` : `does not compile (${oneLine(s.messages.join('; '))})`}`,
      );
    }
  }
  return [...lines, ''];
}

function gradsSection(part: Written<GradsPart> | null): string[] {
  if (!part) return ['## Gradients', '', 'not measured', ''];
  const lines = [
    '## Gradients against float64',
    '',
    `Reference: ${part.reference ?? '?'}; tolerance ${part.tolerance} (max |diff| / max |ref| per tensor).`,
    '',
    '| shape | B×T | params | worst ‖Δ‖/‖ref‖ (tensor) | worst max-relative (tensor) | loss Shoal / ref | ok |',
    '|---|---|---|---|---|---|---|',
  ];
  for (const r of part.rows ?? []) {
    if (r.error) {
      lines.push(`| ${r.shape} | ${r.B}×${r.T} | ${r.parameters} | ${oneLine(r.error)} | | | no |`);
      continue;
    }
    lines.push(
      `| ${r.shape} | ${r.B}×${r.T} | ${r.parameters} | ${exp(r.worstNorm?.relativeNorm)} (${r.worstNorm?.name}) | ` +
        `${exp(r.worstMax?.relativeMax)} (${r.worstMax?.name}) | ${num(r.shoalLoss, 6)} / ${num(r.referenceLoss, 6)} | ${r.ok ? 'yes' : 'no'} |`,
    );
  }
  return [...lines, ''];
}

function stepsSection(part: Written<StepsPart> | null): string[] {
  if (!part) return ['## Training steps', '', 'not measured', ''];
  const torch =
    part.torch && 'torch' in part.torch
      ? `PyTorch ${part.torch.torch} on ${part.torch.device ?? '?'}`
      : `PyTorch: ${part.torch && 'error' in part.torch ? oneLine(part.torch.error) : '—'}`;
  const lines = [
    '## Training steps (forward + backward + clip + AdamW), ms per step',
    '',
    `Shoal on ${part.adapter ?? '?'}; ${torch} (SDPA attention, fused AdamW; bf16 = autocast).`,
    '',
    '| model | params | B×T | Shoal | PyTorch fp32 | PyTorch TF32 | PyTorch bf16 | Shoal TFLOP/s | fp32 ÷ Shoal | first loss Shoal / PyTorch |',
    '|---|---|---|---|---|---|---|---|---|---|',
  ];
  for (const r of part.rows ?? []) {
    if (r.skipped) {
      lines.push(`| ${r.shape} | ${r.parameters} | ${r.B}×${r.T} | skipped: ${r.skipped} | | | | | | |`);
      continue;
    }
    const fp32 = r.torch.fp32?.msPerStep;
    const ratio = fp32 !== undefined && r.shoal?.msPerStep ? num(fp32 / r.shoal.msPerStep) : '—';
    lines.push(
      `| ${r.shape} | ${(r.parameters / 1e6).toFixed(2)}M | ${r.B}×${r.T} | ${ms(r.shoal)} | ` +
        `${TORCH_PRECISIONS.map((p) => ms(r.torch[p])).join(' | ')} | ${sig(r.shoal?.tflops)} | ${ratio} | ` +
        `${num(r.shoal?.firstLoss, 4)} / ${num(r.torch.fp32?.firstLoss, 4)} |`,
    );
  }
  const errors = (part.rows ?? []).flatMap((r) =>
    [['Shoal', r.shoal] as const, ...TORCH_PRECISIONS.map((p) => [`PyTorch ${p}`, r.torch[p]] as const)]
      .filter(([, t]) => t?.error)
      .map(([who, t]) => `- ${r.shape} ${who}: ${oneLine(t?.error ?? '')}`),
  );
  return [...lines, '', ...(errors.length ? ['Errors:', '', ...[...new Set(errors)], ''] : [])];
}

function kernelsSection(part: Written<KernelsPart> | null): string[] {
  if (!part) return ['## Kernels', '', 'not measured', ''];
  const lines = [
    '## Kernels',
    '',
    `${part.adapter ?? '?'}; timing: ${part.timing ?? '?'}.`,
    '',
    '| shape | kernel | problem | ms | TFLOP/s | GB/s |',
    '|---|---|---|---|---|---|',
  ];
  for (const r of part.rows ?? []) {
    lines.push(`| ${r.preset} | ${r.kernel} | ${r.shape} | ${sig(r.ms)} | ${sig(r.tflops)} | ${sig(r.gbps)} |`);
  }
  if (part.skipped?.length) lines.push('', `Skipped for time: ${part.skipped.join(', ')}`);
  return [...lines, ''];
}

/** Two significant digits: f16's difference from f32 may be a ten-thousandth of a percent. */
const percent = (value: number | undefined) =>
  value === undefined || !Number.isFinite(value) ? '—' : `${(value * 100).toPrecision(2)}%`;

function precisionSection(part: Written<PrecisionPart> | null): string[] {
  if (!part) return ['## Precision f16 against f32', '', 'not measured', ''];
  const lines = ['## Precision f16 against f32', '', `${part.adapter ?? '?'}; timing: ${part.timing ?? '?'}.`, ''];
  const tensor = part.tensor;
  if (tensor) {
    const features = Object.entries(tensor.features)
      .map(([name, has]) => `${name} ${has ? 'yes' : 'no'}`)
      .join(', ');
    const configs = tensor.configs.map((c) => `${c.componentType}→${c.resultComponentType} ${c.M}×${c.N}×${c.K}`);
    const compiled =
      tensor.compiled === undefined
        ? 'not tried (no configuration chosen)'
        : tensor.compiled
          ? 'yes'
          : `no (${oneLine(tensor.compileError ?? '')})`;
    lines.push(
      `- features: ${features}`,
      `- subgroup-matrix configurations: ${configs.join(', ') || 'none'}`,
      `- chosen: ${tensor.chosen ?? 'none'}${tensor.refused.length ? `; refused: ${tensor.refused.join('; ')}` : ''}`,
      `- matrix kernel compiles: ${compiled}`,
      `- gate, tensor cores against f32 tiled: ${tensor.gate?.message ?? '—'}`,
      `- gate, f16 rounding tiled against f32 tiled: ${tensor.roundingGate?.message ?? '—'}`,
      '',
    );
  }
  if (part.matmul?.length) {
    lines.push('| matmul family | product | size | ms | TFLOP/s |', '|---|---|---|---|---|');
    for (const r of part.matmul) {
      lines.push(`| ${r.family} | ${r.product} | ${r.size}³ | ${sig(r.ms)} | ${sig(r.tflops)} |`);
    }
    lines.push('');
  }
  const t = part.training;
  if (t) {
    lines.push(
      `Training ${t.shape} ${t.B}×${t.T}, ${t.steps} steps on ${t.corpus}, the same init and batches per precision; ` +
        `train loss: mean of the last ${t.lastSteps} steps; validation: ${t.evalBatches} batches at the end.`,
      '',
      '| precision | matmul | ms per step | first loss | train loss | val loss | Δ train | Δ val |',
      '|---|---|---|---|---|---|---|---|',
    );
    for (const precision of ['f32', 'f16'] as const) {
      const r = t.runs[precision];
      if (!r || r.error) {
        lines.push(`| ${precision} | ${r?.error ? `error: ${oneLine(r.error)}` : 'not run'} | | | | | | |`);
        continue;
      }
      const delta = precision === 'f16' ? [percent(t.difference?.trainLoss), percent(t.difference?.valLoss)] : ['', ''];
      lines.push(
        `| ${precision} | ${r.matmul ?? '?'} | ${sig(r.msPerStep)} | ${num(r.firstLoss, 4)} | ${num(r.trainLoss, 4)} | ` +
          `${num(r.valLoss, 4)} | ${delta.join(' | ')} |`,
      );
    }
    const verdict = t.passed === undefined ? 'not decided' : t.passed ? 'passed' : 'failed';
    lines.push('', `f16 within ${percent(t.tolerance)} of f32 (train and validation loss): ${verdict}.`);
  }
  if (part.skipped?.length) lines.push('', `Skipped for time: ${part.skipped.join(', ')}`);
  return [...lines, ''];
}

/** Writes summary.md under `out` and returns its text; `status` is each part's exit code from run.sh. */
export function writeSummary(out: string, status: Partial<Record<PartName, number>>): string {
  const parts = {
    adapter: read<AdapterPart>(out, 'adapter'),
    grads: read<GradsPart>(out, 'grads'),
    steps: read<StepsPart>(out, 'steps'),
    kernels: read<KernelsPart>(out, 'kernels'),
    precision: read<PrecisionPart>(out, 'precision'),
  };
  const statusLines = PART_NAMES.map((name) => {
    const part = parts[name];
    const code = status[name];
    const state =
      code === undefined
        ? 'not run'
        : code === 0
          ? 'ok'
          : code === 124 || code === 137
            ? `stopped at its time budget (exit ${code})`
            : `failed (exit ${code})`;
    const detail = part?.error ? `: ${oneLine(part.error)}` : '';
    return `| ${name} | ${state}${detail} | ${part ? num(part.seconds, 1) : '—'} |`;
  });
  const text = [
    '# bench:device',
    '',
    `Measured ${new Date().toISOString()}.`,
    '',
    '| part | result | seconds |',
    '|---|---|---|',
    ...statusLines,
    '',
    ...adapterSection(parts.adapter),
    ...gradsSection(parts.grads),
    ...stepsSection(parts.steps),
    ...kernelsSection(parts.kernels),
    ...precisionSection(parts.precision),
  ].join('\n');
  writeFileSync(join(out, 'summary.md'), text);
  return text;
}
