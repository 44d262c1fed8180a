/**
 * The bodies of the messages that move bytes between members (messages.ts puts them in the
 * union): a fragment's state asked for and sent in parts, the room's text, a packed dataset's
 * files, and the pipeline traffic inside one replica group.
 */

import { z } from 'zod';
import { MAX_CORPUS_PART_BYTES, MAX_DATASET_FILE_BYTES, MAX_MEMBERS } from './limits.ts';
import {
  corpusFingerprintSchema,
  corpusLengthOf,
  countSchema,
  datasetFileSchema,
  hashHexSchema,
  manifestHashSchema,
  offsetSchema,
} from './schemas.ts';

const rangeIsOrdered = {
  check: (r: { start: number; end: number }) => r.start < r.end,
  message: 'start must be below end',
};

/** Values [start, end) of θ_global[p] and m[p] (fragment in the header), split so parts fit a message. */
export const stateRequestBody = z
  .object({ start: offsetSchema, end: offsetSchema })
  .refine(rangeIsOrdered.check, { message: rangeIsOrdered.message, path: ['end'] });

/**
 * θ_global[p][start, end) then m[p][start, end), fp32 little-endian (payload: 8·(end − start)
 * bytes), at committed round `round` (header). The requester checks `hash`, of the whole fragment,
 * once all parts are in.
 */
export const stateTransferBody = z
  .object({
    start: offsetSchema,
    end: offsetSchema,
    fragmentSize: z.int().min(1),
    hash: hashHexSchema,
    roomTokens: countSchema,
  })
  .refine(rangeIsOrdered.check, { message: rangeIsOrdered.message, path: ['end'] })
  .refine((r) => r.end <= r.fragmentSize, { message: 'the range must lie in the fragment', path: ['end'] });

/** A range that lies in the text its fingerprint names. */
const corpusRange = z
  .object({ fingerprint: corpusFingerprintSchema, start: offsetSchema, end: offsetSchema })
  .refine(rangeIsOrdered.check, { message: rangeIsOrdered.message, path: ['end'] })
  .refine((r) => r.end <= corpusLengthOf(r.fingerprint), { message: 'the range must lie in the text', path: ['end'] });

/**
 * Bytes [start, end) of the room's text (minor 1): a member that does not hold the text the run
 * config names (an uploaded file) fetches it from the coordinator in parts, then checks the whole.
 */
export const corpusRequestBody = corpusRange.refine((r) => r.end - r.start <= MAX_CORPUS_PART_BYTES, {
  message: `a part is at most ${MAX_CORPUS_PART_BYTES} bytes`,
  path: ['end'],
});

/** The answer: payload = bytes [start, end) of the text `fingerprint` names. */
export const corpusTransferBody = corpusRange;

/** Which bytes of which dataset file: a part of at most MAX_CORPUS_PART_BYTES. */
const datasetPart = z.object({
  manifest: manifestHashSchema,
  file: datasetFileSchema,
  start: offsetSchema,
  end: z.int().min(1).max(MAX_DATASET_FILE_BYTES),
});
const partIsBounded = {
  check: (r: { start: number; end: number }) => r.end - r.start <= MAX_CORPUS_PART_BYTES,
  message: `a part is at most ${MAX_CORPUS_PART_BYTES} bytes`,
};

/**
 * Bytes [start, end) of `file` (manifest.json or a shard's file) of the packed dataset whose
 * manifest hashes to `manifest` (minor 7): a volunteer whose dataset URL fails, or in a room whose
 * url is 'mesh:', fetches the file from the host in parts. The holder answers a shorter part where
 * the file ends before `end`; the requester checks every shard against the manifest.
 */
export const datasetRequestBody = datasetPart
  .refine(rangeIsOrdered.check, { message: rangeIsOrdered.message, path: ['end'] })
  .refine(partIsBounded.check, { message: partIsBounded.message, path: ['end'] });

/**
 * The answer: payload = bytes [start, end) of `file`, which is `total` bytes long (so the first
 * part tells the requester what else to ask for).
 */
export const datasetTransferBody = datasetPart
  .extend({ total: z.int().min(1).max(MAX_DATASET_FILE_BYTES) })
  .refine(rangeIsOrdered.check, { message: rangeIsOrdered.message, path: ['end'] })
  .refine(partIsBounded.check, { message: partIsBounded.message, path: ['end'] })
  .refine((r) => r.end <= r.total, { message: 'the range must lie in the file', path: ['end'] });

/**
 * Pipeline traffic inside one replica group (minor 6; docs/pipeline.md), payload per `what`:
 * - act: micro-batch `micro`'s activations, stage s → s+1 (`values` in `dtype`), then its
 *   `targets` as int32 (the last stage computes the loss);
 * - grad: their gradient, s+1 → s (`values` in `dtype`);
 * - tied: the first and last stages' tied wte gradients, each to the other (f32);
 * - wte: the first stage's new wte after a merge, to the last stage's copy (f32);
 * - norm: a stage's Σg² to every other stage of the group, in `sumSquares` (no payload); the
 *   last stage's carries the step's loss.
 * `group` and `version` say which formation of which group it belongs to, `step` the group's step.
 */
export const pipeBody = z
  .object({
    what: z.enum(['act', 'grad', 'tied', 'wte', 'norm']),
    group: z.int().min(0).max(MAX_MEMBERS),
    version: countSchema,
    step: countSchema,
    micro: z.int().min(0).max(4095),
    dtype: z.enum(['f32', 'bf16']),
    values: countSchema,
    targets: countSchema,
    sumSquares: z.number().min(0).optional(),
    /** On the last stage's norm message: the step's mean loss, so every stage can report it. */
    loss: z.number().optional(),
  })
  .refine((b) => (b.what === 'norm') === (b.sumSquares !== undefined), {
    message: 'a norm message carries sumSquares, and only a norm message',
    path: ['sumSquares'],
  })
  .refine((b) => b.what === 'act' || b.targets === 0, { message: 'only activations carry targets', path: ['targets'] });

/** Payload bytes a pipe message's body implies. */
export function pipePayloadBytes(body: { dtype: 'f32' | 'bf16'; values: number; targets: number }): number {
  return body.values * (body.dtype === 'bf16' ? 2 : 4) + 4 * body.targets;
}
