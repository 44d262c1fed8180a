/**
 * Building blocks of the message schemas (zod 4): peer ids, hashes, counters, and the run
 * configuration a coordinator hands to every member that joins.
 *
 * Objects strip keys they do not know instead of rejecting them, so a peer of a newer minor
 * version may add optional fields without breaking older ones (a new required field is a major
 * version). Numbers are finite by construction (JSON has no NaN or Infinity; zod rejects them
 * too); integer fields are safe integers.
 *
 * The model and inner-optimizer parts are typed against @shoal/model's GptConfig and
 * TrainConfig, so a field added there fails typechecking here until the wire carries it.
 */
import { CODEC_NAMES, DILOCO_RANGES, MAX_LOW_RANK, type SettingRange } from '@shoal/diloco';
import type { GptConfig, TrainConfig } from '@shoal/model';
import { z } from 'zod';
import {
  MAX_CODEC_BLOCK_SIZE,
  MAX_CORPUS_BYTES,
  MAX_DATASET_SHARDS,
  MAX_DEADLINE_MS,
  MAX_FRAGMENTS,
  MAX_MEMBERS,
  MAX_PEER_ID_LENGTH,
  MAX_PIPELINE_STAGES,
  MAX_REASON_LENGTH,
  MAX_TEXT_LENGTH,
} from './limits.ts';

export const peerIdSchema = z
  .string()
  .min(1)
  .max(MAX_PEER_ID_LENGTH)
  .regex(/^[\x21-\x7e]+$/, 'peer ids are printable ASCII without spaces');

/** Distinct peer ids, at most `max`. */
export const peerListSchema = (max: number) =>
  z
    .array(peerIdSchema)
    .max(max)
    .refine((peers) => new Set(peers).size === peers.length, 'peer ids must be unique');

/** Lowercase hex of 64 to 512 bits: the fragment hashes of @shoal/diloco (xxh128, blake3). */
export const hashHexSchema = z.string().regex(/^(?:[0-9a-f]{2}){8,64}$/, 'a hash is 16 to 128 lowercase hex digits');

export const textSchema = z.string().max(MAX_TEXT_LENGTH);
export const reasonSchema = z
  .string()
  .min(1)
  .max(MAX_REASON_LENGTH)
  .regex(/^[a-z0-9][a-z0-9:-]*$/, 'reason codes are lowercase words joined by - or :');

/** Counters: tokens, steps, bytes (a safe integer ≥ 0). */
export const countSchema = z.int().min(0);
/** Values into a fragment's contiguous form. */
export const offsetSchema = z.int().min(0);
export const fragmentIndexSchema = z
  .int()
  .min(0)
  .max(MAX_FRAGMENTS - 1);
export const roundSchema = z.int().min(0).max(0xffff_fffe);
export const nonNegativeSchema = z.number().min(0);
export const deadlineSchema = z.int().min(1).max(MAX_DEADLINE_MS);
export const codecNameSchema = z.enum(CODEC_NAMES);
/**
 * A corpus's fingerprint, `${byteLength}:${fnv1a32 hex}` (@shoal/data corpusFingerprint): what
 * peers compare to be sure they train on the same text, and what a shared text is checked against.
 */
export const corpusFingerprintSchema = z
  .string()
  .regex(/^[1-9][0-9]{0,9}:[0-9a-f]{8}$/, 'a corpus fingerprint is LENGTH:FNV1A32 (8 lowercase hex digits)')
  .refine((text) => Number(text.split(':')[0]) <= MAX_CORPUS_BYTES, {
    message: `a corpus is at most ${MAX_CORPUS_BYTES} bytes`,
  });

/** The byte length a corpus fingerprint names. */
export function corpusLengthOf(fingerprint: string): number {
  return Number(fingerprint.slice(0, fingerprint.indexOf(':')));
}

export const blockSizeSchema = z.int().min(1).max(MAX_CODEC_BLOCK_SIZE);

/** worker: trains and contributes; replica: holds θ_global but does not train (a host); spectator: watches. */
export const roleSchema = z.enum(['worker', 'replica', 'spectator']);

export const capabilitiesSchema = z.object({
  /** The compute backend, or 'none' for a member that does not train. */
  backend: z.enum(['webgpu', 'cpu', 'wasm', 'none']),
  /** The adapter in words, for the roster ("NVIDIA H100 (vulkan)", "SwiftShader"). */
  adapter: textSchema,
  /** Inner-loop tokens per second: measured, or a benchmark's estimate before the first step. */
  tokensPerSecond: nonNegativeSchema,
  /**
   * The most memory this member lends, bytes (minor 6): a pipeline-parallel room places it only in
   * a stage that fits. Absent: no limit it knows of.
   */
  memoryBytes: z.int().min(1).optional(),
});
export type Capabilities = z.infer<typeof capabilitiesSchema>;

/** A fragment's last committed state: what a joiner or a diverged replica must reach. */
export const fragmentStateSchema = z.object({
  fragment: fragmentIndexSchema,
  /** The last committed round; 0 before the first commit. */
  round: roundSchema,
  /** hash(θ_global[p] ‖ m[p]) after it. */
  hash: hashHexSchema,
});
export type FragmentState = z.infer<typeof fragmentStateSchema>;

const modelConfigSchema: z.ZodType<GptConfig> = z.object({
  nLayer: z.int().min(1).max(MAX_FRAGMENTS),
  nHead: z.int().min(1),
  nEmbd: z.int().min(1),
  blockSize: z.int().min(1),
  vocabSize: z.int().min(1),
});

const trainConfigSchema: z.ZodType<TrainConfig> = z.object({
  batchSize: z.int().min(1),
  seqLen: z.int().min(1),
  maxLr: nonNegativeSchema,
  minLr: nonNegativeSchema,
  warmupSteps: countSchema,
  totalSteps: z.int().min(1),
  beta1: z.number().min(0).max(1),
  beta2: z.number().min(0).max(1),
  eps: nonNegativeSchema,
  weightDecay: nonNegativeSchema,
  gradClip: nonNegativeSchema,
  seed: z.int(),
});

const aggregationSchema = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('mean') }),
  z.object({ kind: z.literal('clipped-mean'), clipFactor: z.number().positive().optional() }),
  z.object({ kind: z.literal('trimmed-mean'), trimFraction: z.number().min(0).lt(0.5).optional() }),
  z.object({
    kind: z.literal('centered-clip'),
    clipFactor: z.number().positive().optional(),
    radiusFactor: z.number().positive().optional(),
    // each iteration is two passes over the shard: a room cannot ask owners for more than 16
    iterations: z.int().min(1).max(16).optional(),
  }),
]);

const numberIn = (range: SettingRange) => z.number().min(range.min).max(range.max);
const intIn = (range: SettingRange) => z.int().min(range.min).max(range.max);

/** Streaming DiLoCo's settings; names as in `shoal simulate`'s options. */
const dilocoConfigSchema = z.object({
  fragments: z.int().min(1).max(MAX_FRAGMENTS),
  fragmentMode: z.enum(['sequential', 'strided']),
  /** H: inner steps of the median worker between two rounds of one fragment. */
  innerSteps: intIn(DILOCO_RANGES.innerSteps),
  /** τ: inner steps between a contribution and the merge of its round. */
  overlap: intIn(DILOCO_RANGES.overlap),
  /** Merge weight α of θ_local. */
  alpha: numberIn(DILOCO_RANGES.alpha),
  outerLr: numberIn(DILOCO_RANGES.outerLr),
  outerMomentum: numberIn(DILOCO_RANGES.outerMomentum),
  codec: codecNameSchema,
  codecBlockSize: blockSizeSchema,
  errorFeedback: z.boolean(),
  aggregation: aggregationSchema,
  hashAlgorithm: z.enum(['xxh128', 'blake3']),
  /** A contribution's weight is capped at this multiple of the median (4 in the design). */
  weightCapFactor: z.number().min(1),
  /** Fraction of a round's participants whose hashes must agree for it to commit. */
  quorum: z.number().gt(0).max(1),
  /**
   * The low-rank codec (docs/lowrank.md): pseudo-gradients travel as rank-r factors, quantised
   * with `codec`. `rank` is the most the adaptive rule uses (and where it starts); `target` the
   * relative error it keeps under (0: the rank stays fixed). Absent or null: dense rounds.
   */
  lowRank: z
    .object({ rank: z.int().min(1).max(MAX_LOW_RANK), target: numberIn(DILOCO_RANGES.lowRankTarget) })
    .nullable()
    .optional(),
  /**
   * 1: one-step-delay overlap (DiLoCoX): a round's outer update reaches θ_local as a correction,
   * the progress trained since its contribution kept, and the worker waits for it only where the
   * fragment's next round is due. 0 or absent: the merge at contribution + τ.
   */
  overlapRounds: intIn(DILOCO_RANGES.overlapRounds).optional(),
});

/**
 * Pipeline-parallel replicas (DiLoCoX; docs/pipeline.md; minor 6): each replica is a group of
 * `stages` volunteers holding consecutive blocks, passing micro-batches' activations forward and
 * their gradients back. Absent: every volunteer is a whole replica.
 */
export const pipelineConfigSchema = z.object({
  stages: z.int().min(2).max(MAX_PIPELINE_STAGES),
  /** M: micro-batches per inner step; divides train.batchSize. */
  micros: z.int().min(1).max(4096),
  schedule: z.enum(['1f1b', 'gpipe']),
  /** How activations and their gradients travel between stages. */
  activations: z.enum(['f32', 'bf16']),
});
export type PipelineConfig = z.infer<typeof pipelineConfigSchema>;

/** SHA-256 of a dataset's manifest.json: how a room, and a dataset-request, name the dataset. */
export const manifestHashSchema = z
  .string()
  .regex(/^[0-9a-f]{64}$/, 'a manifest hash is a SHA-256: 64 lowercase hex digits');

/**
 * A file of a packed dataset, relative to its manifest: manifest.json, or a shard's file as
 * @shoal/data's manifest names them ([a-z0-9-]+.txt, no folders).
 */
export const datasetFileSchema = z
  .string()
  .regex(
    /^(?:manifest\.json|[a-z0-9][a-z0-9-]{0,62}\.txt)$/,
    'a dataset file is manifest.json or a shard file like train-00000.txt',
  );

/** A dataset room's `url` when no server serves the dataset: only the host has it, over the mesh. */
export const MESH_DATASET_URL = 'mesh:';

/**
 * A packed dataset (`shoal data pack`, @shoal/data's manifest): volunteers fetch only the training
 * shards assigned to them and check each against the manifest; the host evaluates on validation
 * shards. docs/data.md.
 */
export const datasetRefSchema = z.object({
  /** SHA-256 of its manifest.json: a manifest that differs is refused. */
  manifest: manifestHashSchema,
  /**
   * Where manifest.json and the shards are: an http(s) URL, or a path on the room's own server
   * (/datasets/NAME/, `shoal server --datasets`); either way the host serves them over the mesh
   * too (dataset-request), for a volunteer the URL fails. MESH_DATASET_URL ('mesh:'): nowhere
   * else, volunteers fetch every file from the host over the mesh.
   */
  url: z
    .string()
    .max(MAX_TEXT_LENGTH)
    .regex(
      /^(?:mesh:|(?:https?:\/\/|\/)[^\s]*)$/,
      'a dataset URL is http(s)://…, a path on the room’s server (/datasets/…), or mesh: (from the host)',
    ),
  trainShards: z.int().min(1).max(MAX_DATASET_SHARDS),
  validationShards: z.int().min(1).max(MAX_DATASET_SHARDS),
  /** The training shards' bytes. */
  trainBytes: z.int().min(1),
});
export type DatasetRef = z.infer<typeof datasetRefSchema>;

/** Where a volunteer is in a training shard of a data epoch: batches drawn from it so far. */
export const shardPositionSchema = z.object({
  epoch: countSchema,
  shard: z
    .int()
    .min(0)
    .max(MAX_DATASET_SHARDS - 1),
  drawn: countSchema,
});
export type ShardPosition = z.infer<typeof shardPositionSchema>;

/**
 * What a room has drawn from its dataset: per data epoch still open (at most two: volunteers
 * cross into the next epoch one by one), the batches drawn from each training shard. The host
 * keeps it from heartbeats, saves it with θ_global and sends it with every roster, so a shard
 * that moves to another volunteer, or a resumed room, goes on where it was.
 */
export const dataLedgerSchema = z.object({
  epochs: z.array(z.object({ epoch: countSchema, drawn: z.array(countSchema).max(MAX_DATASET_SHARDS) })).max(2),
});
export type DataLedger = z.infer<typeof dataLedgerSchema>;

export const runConfigSchema = z.object({
  model: modelConfigSchema,
  /** AdamW; its step schedule is read off the room's tokens (tokens ÷ (batchSize·seqLen)). */
  train: trainConfigSchema,
  diloco: dilocoConfigSchema,
  pipeline: pipelineConfigSchema.optional(),
  data: z.object({
    /** 'moby-dick' (each member's own copy: a static file, the CLI's bundled text), or the text's name. */
    corpus: textSchema,
    seed: z.int(),
    /**
     * The text's fingerprint. Set, a member checks the text it loads against it; a member without
     * the text asks the coordinator for it (corpus-request). Absent in rooms of older hosts.
     */
    fingerprint: corpusFingerprintSchema.optional(),
    /** A packed dataset instead of one text (`corpus` is then its name). Absent: the text. */
    dataset: datasetRefSchema.optional(),
  }),
  /**
   * The matmul operands of WebGPU volunteers (@shoal/model's MatmulPrecision): 'f16' rounds them
   * to f16 with f32 sums and f32 master weights. Absent: f32.
   */
  precision: z.enum(['f32', 'f16']).optional(),
  /** How often members send heartbeats. */
  heartbeatMs: z.int().min(100).max(60_000),
});
export type RunConfig = z.infer<typeof runConfigSchema>;

/**
 * A room's run state beside its θ_global checkpoint (`shoal host --checkpoint-dir`, the
 * dashboard's IndexedDB): what a host needs to take the same run up again. The hashes double as
 * an integrity check of the weights and outer momentum they sit beside.
 */
export const roomRunStateSchema = z
  .object({
    format: z.literal('shoal-room'),
    version: z.literal(1),
    config: runConfigSchema,
    /** Per fragment: its last committed round and the hash of θ_global[p] ‖ m[p] after it. */
    fragments: z
      .array(z.object({ round: roundSchema, hash: hashHexSchema }))
      .min(1)
      .max(MAX_FRAGMENTS),
    /** Tokens the room had trained. */
    roomTokens: countSchema,
    /**
     * The room's step on the learning-rate schedule, which a resumed host goes on from (it never
     * goes back). Absent: an older host's (the resumed room then goes on from its kept view).
     */
    step: countSchema.optional(),
    /**
     * Each worker's steps as the host had counted them: `innerStep` the worker's own count its
     * heartbeat said, `step` its place on the room's schedule. A worker that comes back to the
     * resumed host with at least that count is credited with the steps it trained since the save,
     * and keeps its place. Absent: an older host's.
     */
    members: z
      .record(peerIdSchema, z.object({ innerStep: countSchema, step: countSchema }))
      .refine((members) => Object.keys(members).length <= MAX_MEMBERS, { message: `at most ${MAX_MEMBERS} members` })
      .optional(),
    committedRounds: countSchema,
    abortedRounds: countSchema,
    /** The signaling room, so a restarted host can take it back (the secret is the host's key). */
    room: z.object({ roomId: textSchema, hostSecret: textSchema, joinToken: textSchema }).nullable(),
    /** A dataset room's ledger (what it has drawn). Absent: a one-text room, or an older host. */
    data: dataLedgerSchema.optional(),
    savedAt: z.string(),
  })
  .refine((state) => state.fragments.length === state.config.diloco.fragments, {
    message: 'one entry per fragment of the run config',
  });
export type RoomRunState = z.infer<typeof roomRunStateSchema>;
