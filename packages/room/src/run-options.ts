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
  MATMUL_PRECISIONS,
  type MatmulPrecision,
  PIPELINE_SCHEDULES,
  type PipelineSchedule,
  PRESETS,
  pipelineMicros,
  presetConfig,
} from '@shoal/model';
import { MAX_CODEC_BLOCK_SIZE, MAX_PIPELINE_STAGES, type PipelineConfig, type RunConfig } from '@shoal/protocol';
import { fragmentStages } from '@shoal/swarm';
import { z } from 'zod';

interface SpecBase {
  /** The command-line flag, `--inner-steps`. */
  flag: string;
  /** What the value stands for in `--flag <H>`. */
  metavar: string;
  /** The form's label: plain words first, the paper's symbol second, `Inner steps per round (H)`. */
  label: string;
  /** One line: the CLI's help and the form's hint. */
  help: string;
  /** Where the host form shows it: `basic` in the open, the others under Advanced. */
  section: RunOptionSection;
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

/** The host form's groups of options, in order, with their headings. */
export const RUN_OPTION_SECTIONS = {
  basic: 'Model',
  training: 'Training',
  rounds: 'Rounds between volunteers',
  wire: 'On the wire',
  pipeline: 'Pipeline: several volunteers per copy of the model',
} as const;

export type RunOptionSection = keyof typeof RUN_OPTION_SECTIONS;

const TRAIN = defaultTrainConfig();
/**
 * A room's schedule by default: 2,000 steps, about 4 minutes for a CPU volunteer on nano (108 ms
 * a step at 16 × 64) and far less on a GPU: some 40 rounds of each fragment at H 50 and about 2M
 * tokens a volunteer, close to two passes over Moby Dick's training text. `shoal train`'s 400 is
 * one machine's quick run; a room of 400 steps ends a minute after Start, before DiLoCo has done
 * much.
 */
const ROOM_STEPS = 2_000;

export const RUN_OPTIONS = {
  preset: {
    kind: 'choice',
    flag: '--preset',
    metavar: 'name',
    label: 'Model',
    help: 'the model the room trains: a larger one learns more, and each volunteer trains it more slowly',
    default: 'nano',
    choices: Object.keys(PRESETS),
    simulate: true,
    section: 'basic',
  },
  innerSteps: {
    kind: 'integer',
    flag: '--inner-steps',
    metavar: 'H',
    label: 'Inner steps per round (H)',
    help: 'steps each volunteer trains on its own between two rounds of one fragment',
    default: 50,
    min: 1,
    max: 100_000,
    simulate: true,
    section: 'rounds',
  },
  fragments: {
    kind: 'integer',
    flag: '--fragments',
    metavar: 'P',
    label: 'Fragments (P)',
    help: "parts of the model synchronised in turn, each a group of layers (1 … the model's layers)",
    default: 2,
    min: 1,
    max: 64,
    simulate: true,
    section: 'rounds',
  },
  overlap: {
    kind: 'integer',
    flag: '--overlap',
    metavar: 'τ',
    label: 'Merge delay, steps (τ)',
    help: "inner steps between sending a contribution and merging the round's result (less than H)",
    default: 2,
    min: 0,
    max: 10_000,
    simulate: true,
    section: 'rounds',
  },
  alpha: {
    kind: 'number',
    flag: '--alpha',
    metavar: 'α',
    label: 'Own weights kept at merge (α)',
    help: "share of a volunteer's own weights (θ_local) kept when the shared ones (θ_global) are merged in",
    default: 0.5,
    min: 0,
    max: 1,
    simulate: true,
    section: 'rounds',
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
    section: 'wire',
  },
  blockSize: {
    kind: 'integer',
    flag: '--block-size',
    metavar: 'n',
    label: 'Codec block size',
    help: 'values that share one scale in the codec (even)',
    // 1024, not 64: a float32 scale per 64 values is 11% of an fp4 payload, per 1024 under 1%
    // (8% fewer bytes per worker, issue-4 setting), and the loss held within seed noise
    default: 1024,
    min: 2,
    max: MAX_CODEC_BLOCK_SIZE,
    step: 2,
    simulate: true,
    section: 'wire',
  },
  lowRank: {
    kind: 'integer',
    flag: '--low-rank',
    metavar: 'r',
    label: 'Low-rank factors (r)',
    help: 'send 2-D pseudo-gradients as rank-r factors (DiLoCoX; 0: off); the most the adaptive rank uses',
    default: 0,
    min: 0,
    max: MAX_LOW_RANK,
    simulate: true,
    section: 'wire',
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
    section: 'wire',
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
    section: 'rounds',
  },
  pipelineStages: {
    kind: 'integer',
    flag: '--pipeline-stages',
    metavar: 'S',
    label: 'Pipeline stages (S)',
    help: 'volunteers per replica, each holding consecutive blocks (DiLoCoX pipeline; 1: each volunteer holds the whole model)',
    default: 1,
    min: 1,
    max: MAX_PIPELINE_STAGES,
    simulate: true,
    section: 'pipeline',
  },
  microBatches: {
    kind: 'integer',
    flag: '--micro-batches',
    metavar: 'M',
    label: 'Micro-batches (M)',
    help: 'micro-batches per inner step of a pipeline (divides the batch; 0: the smallest divisor ≥ 4S)',
    default: 0,
    min: 0,
    max: 1024,
    simulate: true,
    section: 'pipeline',
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
    section: 'pipeline',
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
    section: 'pipeline',
  },
  aggregation: {
    kind: 'choice',
    flag: '--aggregation',
    metavar: 'rule',
    label: 'Aggregation',
    help: "how shard owners combine the volunteers' updates, Δ (all but mean resist a hostile one; centered-clip best)",
    // robust by default: each Δ scaled to at most twice the median norm, then CenteredClip around
    // the coordinate-wise median, so a volunteer that scales its own Δ moves θ_global by little
    // more than an honest one, and a clean room loses no more than noise (docs/robust-aggregation.md)
    default: 'centered-clip',
    choices: AGGREGATION_KINDS,
    simulate: true,
    section: 'wire',
  },
  outerLr: {
    kind: 'number',
    flag: '--outer-lr',
    metavar: 'η',
    label: 'Outer learning rate (η)',
    help: "learning rate of the outer step that applies a round's averaged update (Nesterov)",
    default: 0.7,
    min: 1e-6,
    max: 10,
    simulate: true,
    section: 'rounds',
  },
  outerMomentum: {
    kind: 'number',
    flag: '--outer-momentum',
    metavar: 'μ',
    label: 'Outer momentum (μ)',
    help: 'momentum of the outer step (Nesterov)',
    default: 0.9,
    min: 0,
    max: 0.999,
    simulate: true,
    section: 'rounds',
  },
  lr: {
    kind: 'number',
    flag: '--lr',
    metavar: 'rate',
    label: 'Inner learning rate',
    help: "peak learning rate of each volunteer's own optimiser, AdamW (warmup, then cosine decay to a tenth)",
    default: TRAIN.maxLr,
    min: 1e-7,
    max: 1,
    simulate: true,
    section: 'training',
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
    section: 'training',
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
    section: 'training',
  },
  steps: {
    kind: 'integer',
    flag: '--steps',
    metavar: 'n',
    label: 'Schedule steps',
    help: 'inner steps of the learning-rate schedule (warmup, cosine decay; after it, the final rate)',
    default: ROOM_STEPS,
    min: 1,
    max: 10_000_000,
    // the simulator's schedule spans its --tokens
    simulate: false,
    section: 'training',
  },
  precision: {
    kind: 'choice',
    flag: '--precision',
    metavar: 'p',
    label: 'Matmul precision',
    help: 'f16: WebGPU volunteers multiply f16 operands with f32 sums and f32 weights (tensor cores where the GPU offers them and a start-up check passes; CPU volunteers stay f32)',
    default: 'f32',
    choices: MATMUL_PRECISIONS,
    simulate: false,
    section: 'training',
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
    section: 'training',
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
    values.steps >= TRAIN.warmupSteps ? undefined : `at least the schedule's ${TRAIN.warmupSteps} warmup steps`,
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
