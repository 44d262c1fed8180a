/**
 * The options of a training run, defined once: name (camelCase: the host form's field, the URL
 * query's key, commander's attribute), flag, label, help, default and range. `shoal host`,
 * `shoal simulate`, the host dashboard's form and its URL query are all derived from this table,
 * and `runConfigOf` turns a set of values into the room's RunConfig. Adding an option is an entry
 * in the table (its type follows) and a line in `runConfigOf` saying where it goes.
 *
 * Defaults live here, except the inner optimiser's, which `defaultTrainConfig` (@shoal/model)
 * defines for every trainer and this table reads.
 */
import {
  AGGREGATION_KINDS,
  aggregationRuleOf,
  CODEC_NAMES,
  type CodecName,
  LOW_RANK_TARGET,
  MAX_LOW_RANK,
} from '@shoal/diloco';
import {
  defaultTrainConfig,
  type GptConfig,
  PIPELINE_SCHEDULES,
  type PipelineSchedule,
  PRESETS,
  pipelineMicros,
  presetConfig,
} from '@shoal/model';
import { MAX_CODEC_BLOCK_SIZE, MAX_PIPELINE_STAGES, type PipelineConfig, type RunConfig } from '@shoal/protocol';
import { z } from 'zod';
import { fragmentStages } from './pipeline/groups.ts';

interface SpecBase {
  /** The command-line flag, `--inner-steps`. */
  flag: string;
  /** What the value stands for in `--flag <H>`. */
  metavar: string;
  /** The form's label. */
  label: string;
  /** One line: the CLI's help and the form's hint. */
  help: string;
  /** Whether `shoal simulate` offers it (the host and the form offer every option). */
  simulate: boolean;
}

export interface NumberOptionSpec extends SpecBase {
  kind: 'integer' | 'number';
  default: number;
  min: number;
  max: number;
  /** The value must be a multiple of this. */
  step?: number;
}

export interface ChoiceOptionSpec extends SpecBase {
  kind: 'choice';
  default: string;
  choices: readonly string[];
}

export type RunOptionSpec = NumberOptionSpec | ChoiceOptionSpec;

const TRAIN = defaultTrainConfig();

export const RUN_OPTIONS = {
  preset: {
    kind: 'choice',
    flag: '--preset',
    metavar: 'name',
    label: 'Model',
    help: 'model size',
    default: 'nano',
    choices: Object.keys(PRESETS),
    simulate: true,
  },
  innerSteps: {
    kind: 'integer',
    flag: '--inner-steps',
    metavar: 'H',
    label: 'H, inner steps',
    help: 'inner steps between two rounds of one fragment',
    default: 50,
    min: 1,
    max: 100_000,
    simulate: true,
  },
  fragments: {
    kind: 'integer',
    flag: '--fragments',
    metavar: 'P',
    label: 'Fragments P',
    help: "groups of blocks synchronised in turn (1 … the model's n_layer)",
    default: 2,
    min: 1,
    max: 64,
    simulate: true,
  },
  overlap: {
    kind: 'integer',
    flag: '--overlap',
    metavar: 'τ',
    label: 'τ, overlap',
    help: 'inner steps between a contribution and its merge',
    default: 2,
    min: 0,
    max: 10_000,
    simulate: true,
  },
  alpha: {
    kind: 'number',
    flag: '--alpha',
    metavar: 'α',
    label: 'α, merge',
    help: 'weight of θ_local when θ_global is merged in',
    default: 0.5,
    min: 0,
    max: 1,
    simulate: true,
  },
  codec: {
    kind: 'choice',
    flag: '--codec',
    metavar: 'codec',
    label: 'Codec',
    help: 'how contributions are quantized on the wire',
    default: 'fp4',
    choices: CODEC_NAMES,
    simulate: true,
  },
  blockSize: {
    kind: 'integer',
    flag: '--block-size',
    metavar: 'n',
    label: 'Codec block',
    help: 'values that share one scale in the codec (even)',
    // 1024, not 64: a float32 scale per 64 values is 11% of an fp4 payload, per 1024 under 1%
    // (8% fewer bytes per worker, issue-4 setting), and the loss held within seed noise
    default: 1024,
    min: 2,
    max: MAX_CODEC_BLOCK_SIZE,
    step: 2,
    simulate: true,
  },
  lowRank: {
    kind: 'integer',
    flag: '--low-rank',
    metavar: 'r',
    label: 'Low-rank r',
    help: 'send 2-D pseudo-gradients as rank-r factors (DiLoCoX; 0: off); the most the adaptive rank uses',
    default: 0,
    min: 0,
    max: MAX_LOW_RANK,
    simulate: true,
  },
  lowRankTarget: {
    kind: 'number',
    flag: '--low-rank-target',
    metavar: 'e',
    label: 'Low-rank error target',
    help: 'relative error the adaptive rank keeps each contribution under (0: rank r throughout; unused when r is 0)',
    default: LOW_RANK_TARGET,
    min: 0,
    max: 1,
    simulate: true,
  },
  overlapRounds: {
    kind: 'integer',
    flag: '--overlap-rounds',
    metavar: 'n',
    label: 'One-step delay',
    help: "1: a round's update lands H steps after the contribution as a correction that keeps the steps trained since (DiLoCoX's one-step delay); 0: merge at τ",
    default: 0,
    min: 0,
    max: 1,
    // the simulator's methods say whether they delay (streaming-delay, dilocox)
    simulate: false,
  },
  pipelineStages: {
    kind: 'integer',
    flag: '--pipeline-stages',
    metavar: 'S',
    label: 'Pipeline stages S',
    help: 'volunteers per replica, each holding consecutive blocks (DiLoCoX pipeline; 1: each volunteer holds the whole model)',
    default: 1,
    min: 1,
    max: MAX_PIPELINE_STAGES,
    simulate: true,
  },
  microBatches: {
    kind: 'integer',
    flag: '--micro-batches',
    metavar: 'M',
    label: 'Micro-batches M',
    help: 'micro-batches per inner step of a pipeline (divides the batch; 0: the smallest divisor ≥ 4S)',
    default: 0,
    min: 0,
    max: 1024,
    simulate: true,
  },
  pipelineSchedule: {
    kind: 'choice',
    flag: '--pipeline-schedule',
    metavar: 'name',
    label: 'Pipeline schedule',
    help: "1f1b holds at most S micro-batches' activations per stage; gpipe holds all M",
    default: '1f1b',
    choices: PIPELINE_SCHEDULES,
    simulate: true,
  },
  activations: {
    kind: 'choice',
    flag: '--activations',
    metavar: 'type',
    label: 'Activations on the wire',
    help: 'how activations and their gradients travel between stages (bf16: half the bytes)',
    default: 'f32',
    choices: ['f32', 'bf16'],
    simulate: true,
  },
  aggregation: {
    kind: 'choice',
    flag: '--aggregation',
    metavar: 'rule',
    label: 'Aggregation',
    help: "how shard owners combine the volunteers' Δ (clipped-mean and trimmed-mean resist a hostile one)",
    // robust by default: each Δ is scaled to at most twice the median norm before the weighted
    // mean, so one volunteer cannot steer θ_global with a scaled Δ, and a clean room loses nothing
    // (docs/hostile-volunteers.md, "Which aggregation")
    default: 'clipped-mean',
    choices: AGGREGATION_KINDS,
    simulate: true,
  },
  outerLr: {
    kind: 'number',
    flag: '--outer-lr',
    metavar: 'η',
    label: 'Outer lr η',
    help: 'Nesterov learning rate of the outer step',
    default: 0.7,
    min: 1e-6,
    max: 10,
    simulate: true,
  },
  outerMomentum: {
    kind: 'number',
    flag: '--outer-momentum',
    metavar: 'μ',
    label: 'Outer momentum μ',
    help: 'Nesterov momentum of the outer step',
    default: 0.9,
    min: 0,
    max: 0.999,
    simulate: true,
  },
  lr: {
    kind: 'number',
    flag: '--lr',
    metavar: 'rate',
    label: 'Inner lr',
    help: 'inner AdamW peak learning rate (warmup, then cosine decay to lr/10)',
    default: TRAIN.maxLr,
    min: 1e-7,
    max: 1,
    simulate: true,
  },
  batch: {
    kind: 'integer',
    flag: '--batch',
    metavar: 'b',
    label: 'Batch',
    help: 'sequences per volunteer per inner step',
    default: TRAIN.batchSize,
    min: 1,
    max: 1024,
    simulate: true,
  },
  seq: {
    kind: 'integer',
    flag: '--seq',
    metavar: 'T',
    label: 'Sequence',
    help: "tokens per sequence (at most the model's block size)",
    default: TRAIN.seqLen,
    min: 2,
    max: 4096,
    simulate: true,
  },
  steps: {
    kind: 'integer',
    flag: '--steps',
    metavar: 'n',
    label: 'Schedule steps',
    help: 'inner steps of the learning-rate schedule (warmup, cosine decay)',
    default: TRAIN.totalSteps,
    min: 1,
    max: 10_000_000,
    // the simulator's schedule spans its --tokens
    simulate: false,
  },
  seed: {
    kind: 'integer',
    flag: '--seed',
    metavar: 'n',
    label: 'Seed',
    help: 'initialisation and data seed',
    default: TRAIN.seed,
    min: 0,
    max: 2 ** 31 - 1,
    simulate: true,
  },
} as const satisfies Record<string, RunOptionSpec>;

/** A run's options as a person sets them: one field per entry of the table. */
export type RunOptions = {
  -readonly [K in keyof typeof RUN_OPTIONS]: (typeof RUN_OPTIONS)[K]['kind'] extends 'choice' ? string : number;
};

export type RunOptionName = keyof RunOptions;

export const RUN_OPTION_NAMES = Object.keys(RUN_OPTIONS) as RunOptionName[];

/** Every option at its default. */
export const RUN_OPTION_DEFAULTS = Object.fromEntries(
  RUN_OPTION_NAMES.map((name) => [name, RUN_OPTIONS[name].default]),
) as unknown as RunOptions;

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
  // A contribution's weight (its inner steps) counts at most this many times the median's.
  weightCapFactor: 4,
  // Half the participants must report the committed hash: a round survives a crash or two. The
  // coordinator also needs a strict majority of participants and host together, host included.
  quorum: 0.5,
} as const satisfies Partial<RunConfig['diloco']>;

/**
 * The room's run configuration for these values. `model` (a checkpoint's) replaces the preset's;
 * `corpus` names the text (Moby Dick by default). Throws a RangeError with a message for a person
 * when a value is out of range or the combination does not fit the model (P > n_layer, seq >
 * block size).
 */
export function runConfigOf(values: RunOptions, extra: { model?: GptConfig; corpus?: string } = {}): RunConfig {
  const checked = runOptionsSchema.safeParse(values);
  if (!checked.success) {
    const issue = checked.error.issues[0];
    const name = issue?.path[0] as RunOptionName | undefined;
    throw new RangeError(`${name ? `${RUN_OPTIONS[name].label}: ` : ''}${issue?.message ?? 'invalid options'}`);
  }
  const model = extra.model ?? presetConfig(values.preset);
  if (values.seq > model.blockSize) {
    throw new RangeError(`Sequence ${values.seq} exceeds the model's block size ${model.blockSize}.`);
  }
  if (values.fragments > model.nLayer) {
    throw new RangeError(`${values.fragments} fragments exceed the model's ${model.nLayer} blocks.`);
  }
  const pipeline = pipelineOf(values, model);
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
    heartbeatMs: 1000,
  };
}

/**
 * The pipeline settings for these values, or undefined for S = 1. Throws for a person when S
 * exceeds the blocks, M does not divide the batch, or a fragment would span two stages (a round
 * synchronises one stage's blocks across replicas, so each fragment must sit inside a stage).
 */
function pipelineOf(values: RunOptions, model: GptConfig): PipelineConfig | undefined {
  const stages = values.pipelineStages;
  if (stages === 1) return undefined;
  if (stages > model.nLayer)
    throw new RangeError(`${stages} pipeline stages exceed the model's ${model.nLayer} blocks.`);
  let micros: number;
  try {
    micros = pipelineMicros(values.batch, stages, values.microBatches || undefined);
  } catch {
    throw new RangeError(`Micro-batches ${values.microBatches} do not divide the batch of ${values.batch}.`);
  }
  fragmentStages(model, values.fragments, ROOM_DILOCO.fragmentMode, stages);
  return {
    stages,
    micros,
    schedule: values.pipelineSchedule as PipelineSchedule,
    activations: values.activations as PipelineConfig['activations'],
  };
}
