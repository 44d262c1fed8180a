/**
 * Every bound that input from a stranger is checked against, by name, in one place.
 *
 * Byte limits are configurable per codec (`createWireCodec({ limits })`) and per reassembler,
 * because what a room needs depends on the model: an fp32 shard of a large fragment, or a state
 * transfer part, is megabytes: `maxMessageBytesFor(config)` is the largest message of a run,
 * and `peerBudgetFor(bytes)` the buffer budget of one peer that follows from it. Count limits
 * are part of the message schemas and therefore of the protocol version: raising one is a minor
 * version bump (old peers would reject the new rooms), so they are plain constants.
 */
import { createCodec, type FragmentMode, fragmentBlocks } from '@shoal/diloco';
import type { GptConfig } from '@shoal/model';
import { HEADER_BYTES } from './header.ts';
import type { RunConfig } from './schemas.ts';

/** A message's bytes, header included, before a run config is known: 256 MiB. */
export const DEFAULT_MAX_MESSAGE_BYTES = 256 * 1024 * 1024;

/** The JSON part of one message: 1 MiB (a roster of MAX_MEMBERS is about 100 KiB). */
export const DEFAULT_MAX_JSON_BYTES = 1024 * 1024;

/** Nesting of the JSON part, checked before parsing: the deepest body (welcome) nests 4. */
export const DEFAULT_MAX_JSON_DEPTH = 16;

/** Members of one room, host included (rooms are designed for 50). */
export const MAX_MEMBERS = 256;

/** Participants of one round, and so shards of one round's fragment. */
export const MAX_PARTICIPANTS = MAX_MEMBERS;

/** Stages S of a pipeline-parallel replica (S ≤ n_layer). */
export const MAX_PIPELINE_STAGES = 16;

/** Fragments P of a run (P ≤ n_layer). */
export const MAX_FRAGMENTS = 1024;

/** Peer ids: printable ASCII, no spaces, at most this long. */
export const MAX_PEER_ID_LENGTH = 128;

/** Free text (reasons, adapter descriptions, error messages). */
export const MAX_TEXT_LENGTH = 1024;

/** Reason codes (`'non-finite'`, `'deadline'`): short identifiers. */
export const MAX_REASON_LENGTH = 64;

/** A round's deadline, relative to its open: one hour. */
export const MAX_DEADLINE_MS = 60 * 60 * 1000;

/**
 * A room's text, when the host shares it over the mesh (an uploaded file): 64 MiB. Moby Dick is
 * 1.2 MB; a text this size is already millions of nano batches.
 */
export const MAX_CORPUS_BYTES = 64 * 1024 * 1024;

/**
 * Training or validation shards of a room's packed dataset (@shoal/data's manifest): 16384, a
 * terabyte in 64 MiB shards, and a data ledger of one epoch within a roster's JSON.
 */
export const MAX_DATASET_SHARDS = 16384;

/** One corpus-request or dataset-request asks for at most this many bytes: 1 MiB. */
export const MAX_CORPUS_PART_BYTES = 1024 * 1024;

/**
 * A file of a packed dataset sent over the mesh (dataset-transfer's total): 1 GiB, @shoal/data's
 * largest shard (MAX_SHARD_BYTES), and room for a manifest of many thousand shards.
 */
export const MAX_DATASET_FILE_BYTES = 1024 * 1024 * 1024;

/**
 * Values per state-transfer part: θ and m, fp32, so 8 bytes a value and 8 MiB per message. A
 * fetching replica asks for a fragment in parts of this many values.
 */
export const STATE_PART_VALUES = 1 << 20;

/** The largest codec block (diloco's checkBlockSize). */
export const MAX_CODEC_BLOCK_SIZE = 65536;

/**
 * Chunks on a data channel: the design caps them at 64 KiB, the largest message every WebRTC
 * implementation accepts (the remote's `maxMessageSize` may be lower, never higher in practice).
 */
export const MAX_CHUNK_BYTES = 64 * 1024;

/**
 * Incomplete messages the reassembler keeps per sender. An honest MeshTransport sends one
 * message at a time per peer (its sends are serialized), so at most one is incomplete; 8 leaves
 * room for other senders' designs.
 */
export const DEFAULT_MAX_PENDING_MESSAGES = 8;

/**
 * What the reassembler counts for each chunk it keeps, beyond the chunk's data bytes: a
 * Uint8Array, its ArrayBuffer and a Map entry. Measured at about 245 bytes on V8 (Node 20, a
 * 1-byte chunk), so a flood of tiny chunks is charged for what it really costs.
 */
export const PENDING_CHUNK_OVERHEAD_BYTES = 256;

/** Headroom of a peer's buffer budget beyond one maximal message: 16 MiB of control messages. */
export const PEER_BUDGET_HEADROOM_BYTES = 16 * 1024 * 1024;

/**
 * The bytes one peer may make this side hold at once (reassembly in progress, frames queued
 * before the connection opened), when messages are at most `maxMessageBytes`: one maximal
 * message, its per-chunk overhead for chunks of 8 KiB or more (256 B per ≥ 8 KiB chunk is
 * ≤ 1/32), and PEER_BUDGET_HEADROOM_BYTES. Memory is charged as chunks arrive, not at a
 * message's declared size, so this bounds what a hostile peer can make a receiver allocate.
 */
export function peerBudgetFor(maxMessageBytes: number): number {
  return maxMessageBytes + Math.ceil(maxMessageBytes / 32) + PEER_BUDGET_HEADROOM_BYTES;
}

/** The reassembler's own budget when none is shared with it: peerBudgetFor(256 MiB), ≈ 280 MiB. */
export const DEFAULT_MAX_PENDING_BYTES = peerBudgetFor(DEFAULT_MAX_MESSAGE_BYTES);

/** An incomplete message with no new chunk for this long is evicted: 30 s. */
export const DEFAULT_REASSEMBLY_TIMEOUT_MS = 30_000;

export interface WireLimits {
  /** Bytes of one message, header included; at most 2³² − 1 (the header's lengths are u32). */
  maxMessageBytes: number;
  /** Bytes of the JSON part. */
  maxJsonBytes: number;
  /** Nesting depth of the JSON part (objects and arrays). */
  maxJsonDepth: number;
}

export const DEFAULT_WIRE_LIMITS: Readonly<WireLimits> = {
  maxMessageBytes: DEFAULT_MAX_MESSAGE_BYTES,
  maxJsonBytes: DEFAULT_MAX_JSON_BYTES,
  maxJsonDepth: DEFAULT_MAX_JSON_DEPTH,
};

/** Defaults filled in and every field checked; throws a RangeError naming the bad one. */
export function resolveWireLimits(limits: Partial<WireLimits> = {}): WireLimits {
  const resolved = { ...DEFAULT_WIRE_LIMITS, ...limits };
  // a lowered message limit lowers the default JSON limit with it
  if (limits.maxJsonBytes === undefined)
    resolved.maxJsonBytes = Math.min(resolved.maxJsonBytes, resolved.maxMessageBytes);
  const positive = (name: keyof WireLimits, max: number) => {
    const value = resolved[name];
    if (!Number.isInteger(value) || value < 1 || value > max) {
      throw new RangeError(`Wire limit ${name} must be an integer from 1 to ${max}, got ${value}`);
    }
  };
  positive('maxMessageBytes', 0xffff_ffff);
  positive('maxJsonBytes', resolved.maxMessageBytes);
  positive('maxJsonDepth', 1000);
  return resolved;
}

/*
 * The largest message of a run. Every big message is a fragment's worth of something: a
 * contribution or a shard result (a codec's encoding of at most the whole fragment, when one
 * participant owns the only shard), a state-transfer part (θ and m of at most STATE_PART_VALUES
 * values), or a corpus or dataset part (MAX_CORPUS_PART_BYTES). A room of the nano preset needs about
 * 2 MiB, against the 256 MiB default.
 *
 * Fragment sizes are computed from the GPT shape rather than with @shoal/model's buildLayout:
 * protocol imports only model's types, so the mesh and a Web Worker bundle do not pull the engine
 * in. limits.test.ts checks the closed form against buildLayout + buildFragments.
 */

/** Values of one transformer block with C channels: 12C² weights + 13C biases and norms. */
function blockValues(channels: number): number {
  // c_attn 3C×C + c_proj C×C + c_fc 4C×C + mlp.c_proj C×4C = 12C²;
  // ln_1, ln_2 2C each, c_attn bias 3C, attn c_proj bias C, c_fc bias 4C, mlp c_proj bias C = 13C
  return 12 * channels * channels + 13 * channels;
}

/**
 * Values of the largest of the run's P fragments: its blocks, plus wte (V×C) and wpe (T×C) with
 * the fragment that holds block 0, and ln_f (2C) with the one that holds the last block, as
 * @shoal/diloco's buildFragments groups the layout.
 */
export function largestFragmentValues(model: GptConfig, fragments: number, mode: FragmentMode): number {
  const { nLayer, nEmbd: C, blockSize: T, vocabSize: V } = model;
  const blocksOfFragments = fragmentBlocks(nLayer, fragments, mode);
  let largest = 0;
  for (const blocks of blocksOfFragments) {
    let values = blocks.length * blockValues(C);
    if (blocks.includes(0)) values += (V + T) * C;
    if (blocks.includes(nLayer - 1)) values += 2 * C;
    largest = Math.max(largest, values);
  }
  return largest;
}

/** The largest u32 a chunk header's total can state. */
const MAX_U32 = 0xffff_ffff;

/**
 * The largest message any member of the run `config` sends, header and JSON included: the
 * wire header, the JSON limit the wire codec enforces (DEFAULT_MAX_JSON_BYTES, 1 MiB: a roster
 * or a shard result's verdicts are ~100 KiB), and the largest binary payload of
 * - a contribution or a shard result: the whole largest fragment, encoded with the run's codec
 *   or fp32, whichever is larger (a blockwise codec's partial last block can cost more than 4
 *   bytes a value, and fp32 covers rounds a coordinator opens with it);
 * - a state-transfer part: θ and m, 8 bytes a value, for min(STATE_PART_VALUES, fragment) values;
 * - a corpus-transfer or dataset-transfer part: MAX_CORPUS_PART_BYTES;
 * - in a pipeline, a micro-batch's activations and targets (f32), or the tied wte (f32).
 * Throws a RangeError when that does not fit a chunk header's u32 total (more fragments help).
 */
export function maxMessageBytesFor(config: RunConfig): number {
  const { fragments, fragmentMode, codec, codecBlockSize } = config.diloco;
  const fragmentValues = largestFragmentValues(config.model, fragments, fragmentMode);
  const encoded = createCodec(codec, { blockSize: codecBlockSize }).encodedSize(fragmentValues);
  const shardBytes = Math.max(4 * fragmentValues, encoded);
  const statePartBytes = 8 * Math.min(STATE_PART_VALUES, fragmentValues);
  const { model, train, pipeline } = config;
  const microRows = pipeline ? train.batchSize / pipeline.micros : 0;
  const pipeBytes = pipeline
    ? Math.max(4 * microRows * train.seqLen * (model.nEmbd + 1), 4 * model.vocabSize * model.nEmbd)
    : 0;
  const payloadBytes = Math.max(shardBytes, statePartBytes, MAX_CORPUS_PART_BYTES, pipeBytes);
  const messageBytes = HEADER_BYTES + DEFAULT_MAX_JSON_BYTES + payloadBytes;
  if (messageBytes > MAX_U32) {
    throw new RangeError(
      `A fragment of ${fragmentValues} values makes ${messageBytes}-byte messages, over the ${MAX_U32}-byte ` +
        `maximum: split the model into more fragments (diloco.fragments = ${fragments})`,
    );
  }
  return messageBytes;
}
