/**
 * The dashboard's room form: its fields carry `shoal host`'s option names in camelCase, so a
 * configuration is shared as a link (`/host?preset=nano&innerSteps=10&fragments=2`) and means
 * the same as on the command line. Pure: parsed and checked without the DOM.
 */
import { checkCorpusSize, corpusFingerprint, MOBY_DICK_FINGERPRINT } from '@shoal/data';
import { AGGREGATION_KINDS, aggregationRuleOf } from '@shoal/diloco';
import { type GptConfig, PRESETS, presetConfig } from '@shoal/model';
import { codecNameSchema, MAX_CORPUS_BYTES, type RunConfig } from '@shoal/protocol';
import { createRunConfig } from '@shoal/swarm/config';

export const CODECS: readonly string[] = codecNameSchema.options;
export const AGGREGATIONS: readonly string[] = AGGREGATION_KINDS;

export interface HostFormValues {
  preset: string;
  innerSteps: number;
  fragments: number;
  overlap: number;
  alpha: number;
  codec: string;
  /** How shard owners combine the volunteers' Δ (docs/hostile-volunteers.md): clipped-mean resists a hostile one. */
  aggregation: string;
  outerLr: number;
  outerMomentum: number;
  lr: number;
  batch: number;
  seq: number;
  steps: number;
  seed: number;
}

/** `shoal host`'s defaults (apps/cli/src/main.ts), and the simulator's for the outer optimiser. */
export const HOST_FORM_DEFAULTS: HostFormValues = {
  preset: 'nano',
  innerSteps: 50,
  fragments: 2,
  overlap: 2,
  alpha: 0.5,
  codec: 'fp4',
  aggregation: AGGREGATION_KINDS[0],
  outerLr: 0.7,
  outerMomentum: 0.9,
  lr: 3e-3,
  batch: 16,
  seq: 64,
  steps: 400,
  seed: 1,
};

type NumberField = Exclude<keyof HostFormValues, 'preset' | 'codec' | 'aggregation'>;

export interface FieldSpec {
  name: keyof HostFormValues;
  label: string;
  hint: string;
  /** Integers only; the least and most allowed. */
  integer?: boolean;
  min?: number;
  max?: number;
}

export const HOST_FIELDS: FieldSpec[] = [
  {
    name: 'innerSteps',
    label: 'H, inner steps',
    hint: 'inner steps between two rounds of one fragment',
    integer: true,
    min: 1,
    max: 100_000,
  },
  {
    name: 'fragments',
    label: 'Fragments P',
    hint: '1 … n_layer groups of blocks, synchronised in turn',
    integer: true,
    min: 1,
    max: 64,
  },
  {
    name: 'overlap',
    label: 'τ, overlap',
    hint: 'inner steps between a contribution and its merge',
    integer: true,
    min: 0,
    max: 10_000,
  },
  { name: 'alpha', label: 'α, merge', hint: 'weight of θ_local when merging θ_global in', min: 0, max: 1 },
  { name: 'outerLr', label: 'Outer lr η', hint: 'Nesterov learning rate of the outer step', min: 1e-6, max: 10 },
  { name: 'outerMomentum', label: 'Outer momentum μ', hint: 'Nesterov momentum of the outer step', min: 0, max: 0.999 },
  { name: 'lr', label: 'Inner lr', hint: 'AdamW peak learning rate', min: 1e-7, max: 1 },
  { name: 'batch', label: 'Batch', hint: 'sequences per volunteer per inner step', integer: true, min: 1, max: 1024 },
  {
    name: 'seq',
    label: 'Sequence',
    hint: 'tokens per sequence (≤ the preset’s block size)',
    integer: true,
    min: 2,
    max: 4096,
  },
  {
    name: 'steps',
    label: 'Schedule steps',
    hint: 'inner steps of the learning-rate schedule (warmup, cosine)',
    integer: true,
    min: 1,
    max: 10_000_000,
  },
  { name: 'seed', label: 'Seed', hint: 'initialisation and data seed', integer: true, min: 0, max: 2 ** 31 - 1 },
];

export type FormErrors = Partial<Record<keyof HostFormValues, string>>;

function checkNumber(spec: FieldSpec, raw: string): { value?: number; error?: string } {
  const value = Number(raw);
  if (raw.trim() === '' || !Number.isFinite(value)) return { error: `${raw || '(empty)'} is not a number` };
  if (spec.integer && !Number.isInteger(value)) return { error: 'a whole number' };
  if (spec.min !== undefined && value < spec.min) return { error: `at least ${spec.min}` };
  if (spec.max !== undefined && value > spec.max) return { error: `at most ${spec.max}` };
  return { value };
}

/** The form's values from a URL query (unknown keys ignored, bad values reported per field). */
export function parseHostQuery(search: string): { values: HostFormValues; errors: FormErrors } {
  const query = new URLSearchParams(search);
  const values: HostFormValues = { ...HOST_FORM_DEFAULTS };
  const errors: FormErrors = {};
  const preset = query.get('preset');
  if (preset !== null) {
    if (Object.hasOwn(PRESETS, preset)) values.preset = preset;
    else errors.preset = `unknown preset "${preset}": ${Object.keys(PRESETS).join(', ')}`;
  }
  const codec = query.get('codec');
  if (codec !== null) {
    if (CODECS.includes(codec)) values.codec = codec;
    else errors.codec = `unknown codec "${codec}": ${CODECS.join(', ')}`;
  }
  const aggregation = query.get('aggregation');
  if (aggregation !== null) {
    if (AGGREGATIONS.includes(aggregation)) values.aggregation = aggregation;
    else errors.aggregation = `unknown aggregation "${aggregation}": ${AGGREGATIONS.join(', ')}`;
  }
  for (const spec of HOST_FIELDS) {
    const raw = query.get(spec.name);
    if (raw === null) continue;
    const { value, error } = checkNumber(spec, raw);
    if (error) errors[spec.name] = error;
    else values[spec.name as NumberField] = value as number;
  }
  return { values, errors };
}

/** The query that reproduces `values` (only what differs from the defaults). */
export function hostQueryOf(values: HostFormValues): string {
  const query = new URLSearchParams();
  for (const [key, value] of Object.entries(values)) {
    if (HOST_FORM_DEFAULTS[key as keyof HostFormValues] !== value) query.set(key, String(value));
  }
  const text = query.toString();
  return text ? `?${text}` : '';
}

/** Checks one field's raw input. */
export function checkField(name: keyof HostFormValues, raw: string): string | undefined {
  const spec = HOST_FIELDS.find((field) => field.name === name);
  return spec ? checkNumber(spec, raw).error : undefined;
}

/** A text the host uploads for the room: its file name and bytes. */
export interface UploadedText {
  name: string;
  bytes: Uint8Array;
}

/** Room texts are file names a person reads: printable, without path separators. */
export function textNameOf(fileName: string): string {
  const printable = [...fileName].filter((c) => (c.codePointAt(0) as number) >= 0x20 && c !== '\u007f').join('');
  const name = printable.replace(/[\\/]/g, '_').trim().slice(0, 200);
  return name === '' || name === 'moby-dick' ? 'uploaded.txt' : name;
}

/**
 * Checks a file the host picked as the room's text: not empty, at most MAX_CORPUS_BYTES, UTF-8
 * text (the model reads bytes, but a binary file is surely the wrong file), and, with the form's
 * sequence length, large enough for one training and one validation window. The error says why.
 */
export function checkUploadedText(text: UploadedText, seqLen?: number): string | undefined {
  const { name, bytes } = text;
  if (bytes.length === 0) return `${name} is empty.`;
  if (bytes.length > MAX_CORPUS_BYTES) {
    return `${name} is ${(bytes.length / 1e6).toFixed(1)} MB; a room's text is at most ${MAX_CORPUS_BYTES / 1024 / 1024} MiB.`;
  }
  if (bytes.includes(0)) return `${name} holds NUL bytes: it does not look like a text file.`;
  try {
    new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    return `${name} is not UTF-8 text.`;
  }
  try {
    checkCorpusSize(bytes.length, name, seqLen === undefined ? {} : { seqLen });
  } catch (error) {
    return `${(error as Error).message}.`;
  }
  return undefined;
}

/**
 * The run config of the form; `model` (a checkpoint's) replaces the preset's, `text` (an upload)
 * replaces Moby Dick. Throws with a message for a person when the combination does not fit
 * (P > n_layer, seq > block size, a text too small for the sequence).
 */
export function runConfigOf(values: HostFormValues, model?: GptConfig, text?: UploadedText): RunConfig {
  const gpt = model ?? presetConfig(values.preset);
  if (values.seq > gpt.blockSize)
    throw new Error(`Sequence ${values.seq} exceeds the model's block size ${gpt.blockSize}.`);
  if (values.fragments > gpt.nLayer)
    throw new Error(`${values.fragments} fragments exceed the model's ${gpt.nLayer} blocks.`);
  if (text) {
    const problem = checkUploadedText(text, values.seq);
    if (problem) throw new Error(problem);
  }
  const config = createRunConfig({
    model: gpt,
    train: {
      batchSize: values.batch,
      seqLen: values.seq,
      maxLr: values.lr,
      minLr: values.lr / 10,
      totalSteps: values.steps,
      seed: values.seed,
    },
    diloco: {
      innerSteps: values.innerSteps,
      fragments: values.fragments,
      overlap: values.overlap,
      alpha: values.alpha,
      outerLr: values.outerLr,
      outerMomentum: values.outerMomentum,
      codec: values.codec as RunConfig['diloco']['codec'],
      aggregation: aggregationRuleOf(values.aggregation),
    },
    corpus: text ? textNameOf(text.name) : 'moby-dick',
  });
  config.data.fingerprint = text ? corpusFingerprint(text.bytes) : MOBY_DICK_FINGERPRINT;
  return config;
}
