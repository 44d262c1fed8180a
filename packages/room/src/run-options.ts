/**
 * The options of a training run, defined once: name (camelCase: the host form's field, the URL
 * query's key, commander's attribute), flag, label, help, default and range. `shoal host`,
 * `shoal simulate`, the host dashboard's form and its URL query are all derived from this table,
 * and `runConfigOf` turns a set of values into the room's RunConfig. Adding an option is an entry
 * in the table (run-option-table.ts; its type follows) and a line in `runConfigOf` saying where
 * it goes.
 */
import { aggregationRuleOf, type CodecName } from '@shoal/diloco';
import {
  defaultTrainConfig,
  type GptConfig,
  type MatmulPrecision,
  type PipelineSchedule,
  pipelineMicros,
  presetConfig,
} from '@shoal/model';
import type { PipelineConfig, RunConfig } from '@shoal/protocol';
import { fragmentStages } from '@shoal/swarm';
import { z } from 'zod';
import {
  RUN_OPTION_DEFAULTS,
  RUN_OPTION_NAMES,
  RUN_OPTIONS,
  type RunOptionName,
  type RunOptionSpec,
  type RunOptions,
} from './run-option-table.ts';

export * from './run-option-table.ts';

/** The inner optimizer's warmup, which a schedule must outlast. */
const WARMUP_STEPS = defaultTrainConfig().warmupSteps;

function schemaOf(spec: RunOptionSpec): z.ZodType<number | string> {
  if (spec.kind === 'choice') {
    return z.string().refine((value) => spec.choices.includes(value), {
      error: (issue) => `unknown ${spec.label.toLowerCase()} "${issue.input}": choose ${spec.choices.join(', ')}`,
    });
  }
  let schema = z.number({ error: 'not a number' });
  if (spec.kind === 'integer') schema = schema.int({ error: 'a whole number' });
  schema = schema.min(spec.min, { error: `at least ${spec.min}` }).max(spec.max, { error: `at most ${spec.max}` });
  return 'step' in spec && spec.step ? schema.multipleOf(spec.step, { error: `a multiple of ${spec.step}` }) : schema;
}

/** Each option's schema, built once. */
const OPTION_SCHEMAS = Object.fromEntries(
  RUN_OPTION_NAMES.map((name) => [name, schemaOf(RUN_OPTIONS[name])]),
) as Record<RunOptionName, z.ZodType<number | string>>;

/** Checks a whole set of values, each field against its range (other keys, a command's own, pass). */
export const runOptionsSchema = z.object(OPTION_SCHEMAS);

/** One option's value from text (a flag's argument, a query value, a form field), or why not. */
export function parseRunOption(
  name: RunOptionName,
  raw: string,
): { value: number | string; error?: undefined } | { value?: undefined; error: string } {
  const spec = RUN_OPTIONS[name];
  const input = spec.kind === 'choice' ? raw : raw.trim() === '' ? Number.NaN : Number(raw);
  const result = OPTION_SCHEMAS[name].safeParse(input);
  if (result.success) return { value: result.data };
  const message = result.error.issues[0]?.message ?? 'invalid';
  return { error: spec.kind === 'choice' || !Number.isNaN(input) ? message : `${raw || '(empty)'} is not a number` };
}

export type RunOptionErrors = Partial<Record<RunOptionName, string>>;

/** Values from a URL query (unknown keys ignored; a bad value is reported and keeps its default). */
export function parseRunQuery(search: string): { values: RunOptions; errors: RunOptionErrors } {
  const query = new URLSearchParams(search);
  const values: Record<string, number | string> = { ...RUN_OPTION_DEFAULTS };
  const errors: RunOptionErrors = {};
  for (const name of RUN_OPTION_NAMES) {
    const raw = query.get(name);
    if (raw === null) continue;
    const { value, error } = parseRunOption(name, raw);
    if (error !== undefined) errors[name] = error;
    else values[name] = value;
  }
  return { values: values as unknown as RunOptions, errors };
}

/** The query that reproduces `values`: only what differs from the defaults, `?a=1&b=2` or ''. */
export function runQueryOf(values: RunOptions): string {
  const query = new URLSearchParams();
  for (const name of RUN_OPTION_NAMES) {
    if (values[name] !== RUN_OPTION_DEFAULTS[name]) query.set(name, String(values[name]));
  }
  const text = query.toString();
  return text ? `?${text}` : '';
}

/** The settings of a room that are not a person's options. */
const ROOM_DILOCO = {
  fragmentMode: 'sequential',
  errorFeedback: false,
  hashAlgorithm: 'xxh128',
  // A contribution's weight (its inner steps) counts at most this many times the median's: 2, so
  // one claimed weight is at most 2/(K + 1) of a round's (docs/robust-aggregation.md); also the
  // pace above the median's at which a fast worker waits for its round, and contributionBound's factor.
  weightCapFactor: 2,
  // Half the participants must report the committed hash: a round survives a crash or two. The
  // coordinator also needs a strict majority of participants and host together, host included.
  quorum: 0.5,
} as const satisfies Partial<RunConfig['diloco']>;

/**
 * What is wrong with a set of values, per field: each value against its range, then the rules
 * that tie fields together (sequence ≤ the model's block size, fragments ≤ its layers, τ < H,
 * the schedule at least as long as its warmup, a pipeline's stages, micro-batches and
 * fragments). `model` (a checkpoint's) replaces the preset's. The host form shows each error
 * beside its field as the person types; `runConfigOf` refuses the first, for `shoal host` and
 * `shoal simulate`: one set of rules, in the same words.
 */
export function checkRunOptions(values: RunOptions, model?: GptConfig): RunOptionErrors {
  const errors: RunOptionErrors = {};
  for (const name of RUN_OPTION_NAMES) {
    const result = OPTION_SCHEMAS[name].safeParse(values[name]);
    if (!result.success) errors[name] = result.error.issues[0]?.message ?? 'invalid';
  }
  // a rule speaks only when the fields it reads are valid on their own, and names the field to change
  const ok = (...names: RunOptionName[]) => names.every((name) => errors[name] === undefined);
  const rule = (name: RunOptionName, inputs: RunOptionName[], check: () => string | undefined) => {
    if (errors[name] === undefined && ok(...inputs)) {
      const error = check();
      if (error !== undefined) errors[name] = error;
    }
  };
  rule('overlap', ['innerSteps'], () =>
    values.overlap < values.innerSteps
      ? undefined
      : `less than the inner steps per round, H = ${values.innerSteps} (a round's result merges before the fragment's next round)`,
  );
  rule('steps', [], () =>
    values.steps >= WARMUP_STEPS ? undefined : `at least the schedule's ${WARMUP_STEPS} warmup steps`,
  );
  const shape = model ?? (ok('preset') ? presetConfig(values.preset) : undefined);
  if (!shape) return errors;
  rule('seq', [], () =>
    values.seq <= shape.blockSize ? undefined : `at most the model's block size ${shape.blockSize}`,
  );
  rule('fragments', [], () =>
    values.fragments <= shape.nLayer ? undefined : `at most the model's ${shape.nLayer} layers`,
  );
  if (values.pipelineStages === 1) return errors;
  rule('pipelineStages', [], () =>
    values.pipelineStages <= shape.nLayer ? undefined : `at most the model's ${shape.nLayer} layers`,
  );
  rule('microBatches', ['batch', 'pipelineStages'], () => {
    try {
      pipelineMicros(values.batch, values.pipelineStages, values.microBatches || undefined);
      return undefined;
    } catch {
      // 0 (the default) picks a divisor itself, so only a number the person typed gets here
      return `a divisor of the batch, ${values.batch}`;
    }
  });
  rule('fragments', ['pipelineStages'], () => {
    try {
      fragmentStages(shape, values.fragments, ROOM_DILOCO.fragmentMode, values.pipelineStages);
      return undefined;
    } catch (error) {
      return (error as Error).message;
    }
  });
  return errors;
}

/** The first error of `checkRunOptions`, in the table's order, as one line: `Label: what is wrong`. */
export function firstRunOptionError(errors: RunOptionErrors): string | undefined {
  const name = RUN_OPTION_NAMES.find((n) => errors[n] !== undefined);
  return name && `${RUN_OPTIONS[name].label}: ${errors[name]}`;
}

/**
 * The room's run configuration for these values. `model` (a checkpoint's) replaces the preset's;
 * `corpus` names the text (Moby Dick by default). Throws a RangeError with a message for a person
 * (checkRunOptions's first) when a value is out of range or the combination does not fit.
 */
export function runConfigOf(values: RunOptions, extra: { model?: GptConfig; corpus?: string } = {}): RunConfig {
  const problem = firstRunOptionError(checkRunOptions(values, extra.model));
  if (problem) throw new RangeError(problem);
  const model = extra.model ?? presetConfig(values.preset);
  const pipeline = pipelineOf(values);
  const train = defaultTrainConfig({
    batchSize: values.batch,
    seqLen: values.seq,
    maxLr: values.lr,
    totalSteps: values.steps,
    seed: values.seed,
  });
  return {
    model,
    train,
    diloco: {
      ...ROOM_DILOCO,
      innerSteps: values.innerSteps,
      fragments: values.fragments,
      overlap: values.overlap,
      alpha: values.alpha,
      outerLr: values.outerLr,
      outerMomentum: values.outerMomentum,
      codec: values.codec as CodecName,
      codecBlockSize: values.blockSize,
      aggregation: aggregationRuleOf(values.aggregation),
      lowRank: values.lowRank > 0 ? { rank: values.lowRank, target: values.lowRankTarget } : null,
      overlapRounds: values.overlapRounds,
    },
    ...(pipeline ? { pipeline } : {}),
    data: { corpus: extra.corpus ?? 'moby-dick', seed: train.seed },
    // absent: f32 (and rooms of older hosts)
    ...(values.precision === 'f32' ? {} : { precision: values.precision as MatmulPrecision }),
    heartbeatMs: 1000,
  };
}

/** The pipeline settings for these values (checked by checkRunOptions), or undefined for S = 1. */
function pipelineOf(values: RunOptions): PipelineConfig | undefined {
  const stages = values.pipelineStages;
  if (stages === 1) return undefined;
  return {
    stages,
    micros: pipelineMicros(values.batch, stages, values.microBatches || undefined),
    schedule: values.pipelineSchedule as PipelineSchedule,
    activations: values.activations as PipelineConfig['activations'],
  };
}
