/**
 * The run's configuration as a person reads it: the model with its size, the text, and the
 * settings a host chose, labelled as the host form labels them (RUN_OPTIONS). Built from the room
 * view's RunConfig, so the dashboard and the watch page show the same.
 */
import { buildLayout, formatMemory, type GptConfig, gpuTrainingMemory, PRESETS, presetConfig } from '@shoal/model';
import type { RunConfig } from '@shoal/protocol';
import { formatCount } from '@shoal/room/plan';
import { RUN_OPTIONS } from '@shoal/room/run-options';
import { corpusName } from './parts.tsx';

/** The preset whose shape `model` is, or null (a checkpoint's own shape). */
export function presetNameOf(model: GptConfig): string | null {
  const same = (a: GptConfig, b: GptConfig) =>
    a.nLayer === b.nLayer &&
    a.nHead === b.nHead &&
    a.nEmbd === b.nEmbd &&
    a.blockSize === b.blockSize &&
    a.vocabSize === b.vocabSize;
  return Object.keys(PRESETS).find((name) => same(presetConfig(name), model)) ?? null;
}

/** `0.12M parameters, 2 layers × 64 wide, 64 tokens of context`. */
export function modelSize(model: GptConfig): string {
  return `${formatCount(buildLayout(model).size)} parameters, ${model.nLayer} layers × ${model.nEmbd} wide, ${model.blockSize} tokens of context`;
}

/** A preset as the form's Model choice offers it: `nano — 0.12M parameters, …`. */
export function presetChoice(name: string): string {
  return `${name} — ${modelSize(presetConfig(name))}`;
}

/** A learning rate: 0.003, 0.0003, 1e-7 (three significant digits at most, no trailing zeros). */
export function formatRate(lr: number): string {
  return String(Number(lr.toPrecision(3)));
}

/** The config's rows: [label, value]; what does not apply to this run (a pipeline, low rank) is left out. */
export function runConfigRows(config: RunConfig): [string, string][] {
  const { model, train, diloco, pipeline, data } = config;
  const preset = presetNameOf(model);
  const label = (name: keyof typeof RUN_OPTIONS) => RUN_OPTIONS[name].label;
  const rows: [string, string][] = [
    [label('preset'), `${preset ?? 'from a checkpoint'}: ${modelSize(model)}`],
    ['Text', corpusName(data.corpus)],
    [
      `${label('batch')} × ${label('seq').toLowerCase()}`,
      `${train.batchSize} × ${train.seqLen} tokens per volunteer per step`,
    ],
    [
      'GPU memory',
      `${formatMemory(gpuTrainingMemory(model, train.batchSize, train.seqLen).total)} per WebGPU volunteer`,
    ],
    [
      label('precision'),
      config.precision === 'f16'
        ? 'f16 operands, f32 sums and weights, on WebGPU volunteers (tensor cores where offered); CPU volunteers f32'
        : 'f32',
    ],
    [label('innerSteps'), String(diloco.innerSteps)],
    [label('fragments'), String(diloco.fragments)],
    [label('overlap'), String(diloco.overlap)],
    [label('alpha'), String(diloco.alpha)],
    [label('codec'), `${diloco.codec}, blocks of ${diloco.codecBlockSize}`],
  ];
  if (diloco.lowRank) rows.push([label('lowRank'), `${diloco.lowRank.rank} (error target ${diloco.lowRank.target})`]);
  if (diloco.overlapRounds) rows.push([label('overlapRounds'), 'on']);
  rows.push(
    [label('aggregation'), diloco.aggregation.kind],
    [label('lr'), `${formatRate(train.maxLr)}, down to ${formatRate(train.minLr)} (warmup ${train.warmupSteps} steps)`],
    [`${label('outerLr')}, ${label('outerMomentum').toLowerCase()}`, `${diloco.outerLr}, ${diloco.outerMomentum}`],
    [
      label('steps'),
      `${train.totalSteps.toLocaleString('en-US')}; after them the rate stays at ${formatRate(train.minLr)}`,
    ],
  );
  if (pipeline) {
    rows.push([
      label('pipelineStages'),
      `${pipeline.stages} stages, ${pipeline.micros} micro-batches, ${pipeline.schedule}, activations ${pipeline.activations}`,
    ]);
  }
  rows.push([label('seed'), String(train.seed)]);
  return rows;
}

/** The "Run" panel: the configuration, compact, as a definition list. */
export function RunConfigPanel({ config }: { config: RunConfig | null | undefined }) {
  if (!config) return null;
  return (
    <section className="card run-config" aria-labelledby="run-config-title" data-testid="run-config">
      <h2 id="run-config-title">Run</h2>
      <dl>
        {runConfigRows(config).map(([label, value]) => (
          <div key={label}>
            <dt>{label}</dt>
            <dd>{value}</dd>
          </div>
        ))}
      </dl>
    </section>
  );
}
