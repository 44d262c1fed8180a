/**
 * The table of a training run's options, defined once: name (camelCase: the host form's field, the
 * URL query's key, commander's attribute), flag, label, help, default and range. Data only; what
 * reads it (parsing, the rules between fields, `runConfigOf`) is in run-options.ts.
 *
 * Defaults and ranges live here, except the Streaming DiLoCo settings', which DILOCO_RANGES
 * (@shoal/diloco) defines for the wire's schema and the outer optimizer too, and the inner
 * optimizer's, which `defaultTrainConfig` (@shoal/model) defines for every trainer.
 */
import { AGGREGATION_KINDS, CODEC_NAMES, DILOCO_RANGES, MAX_LOW_RANK } from '@shoal/diloco';
import { defaultTrainConfig, MATMUL_PRECISIONS, PIPELINE_SCHEDULES, PRESETS } from '@shoal/model';
import { MAX_CODEC_BLOCK_SIZE, MAX_PIPELINE_STAGES } from '@shoal/protocol';

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
    ...DILOCO_RANGES.innerSteps,
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
    ...DILOCO_RANGES.overlap,
    simulate: true,
    section: 'rounds',
  },
  alpha: {
    kind: 'number',
    flag: '--alpha',
    metavar: 'α',
    label: 'Own weights kept at merge (α)',
    help: "share of a volunteer's own weights (θ_local) kept when the shared ones (θ_global) are merged in",
    ...DILOCO_RANGES.alpha,
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
    // (8% fewer bytes per worker at the measured setting), and the loss held within seed noise
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
    ...DILOCO_RANGES.lowRankTarget,
    simulate: true,
    section: 'wire',
  },
  overlapRounds: {
    kind: 'integer',
    flag: '--overlap-rounds',
    metavar: 'n',
    label: 'One-step delay',
    help: "1: a round's update lands H steps after the contribution as a correction that keeps the steps trained since (DiLoCoX's one-step delay); 0: merge at τ",
    ...DILOCO_RANGES.overlapRounds,
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
    ...DILOCO_RANGES.outerLr,
    simulate: true,
    section: 'rounds',
  },
  outerMomentum: {
    kind: 'number',
    flag: '--outer-momentum',
    metavar: 'μ',
    label: 'Outer momentum (μ)',
    help: 'momentum of the outer step (Nesterov)',
    ...DILOCO_RANGES.outerMomentum,
    simulate: true,
    section: 'rounds',
  },
  lr: {
    kind: 'number',
    flag: '--lr',
    metavar: 'rate',
    label: 'Inner learning rate',
    help: "peak learning rate of each volunteer's own optimizer, AdamW (warmup, then cosine decay to a tenth)",
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
