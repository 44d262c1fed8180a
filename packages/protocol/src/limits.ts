/**
 * Every bound that input from a stranger is checked against, by name, in one place.
 *
 * Byte limits are configurable per codec (`createWireCodec({ limits })`) and per reassembler,
 * because what a room needs depends on the model: an fp32 shard of a large fragment, or a state
 * transfer part, is megabytes. Count limits are part of the message schemas and therefore of the
 * protocol version: raising one is a minor version bump (old peers would reject the new rooms),
 * so they are plain constants.
 */

/** A message's bytes, header included, when nothing else is configured: 256 MiB. */
export const DEFAULT_MAX_MESSAGE_BYTES = 256 * 1024 * 1024;

/** The JSON part of one message: 1 MiB (a roster of MAX_MEMBERS is about 100 KiB). */
export const DEFAULT_MAX_JSON_BYTES = 1024 * 1024;

/** Nesting of the JSON part, checked before parsing: the deepest body (welcome) nests 4. */
export const DEFAULT_MAX_JSON_DEPTH = 16;

/** Members of one room, host included. Issue 5 budgets for rooms of 50. */
export const MAX_MEMBERS = 256;

/** Participants of one round, and so shards of one round's fragment. */
export const MAX_PARTICIPANTS = MAX_MEMBERS;

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

/** One corpus-request asks for at most this many bytes: 1 MiB. */
export const MAX_CORPUS_PART_BYTES = 1024 * 1024;

/** The largest codec block (diloco's checkBlockSize). */
export const MAX_CODEC_BLOCK_SIZE = 65536;

/**
 * Chunks on a data channel: the design caps them at 64 KiB, the largest message every WebRTC
 * implementation accepts (the remote's `maxMessageSize` may be lower, never higher in practice).
 */
export const MAX_CHUNK_BYTES = 64 * 1024;

/**
 * Incomplete messages the reassembler keeps per sender, and their declared bytes in total: an
 * honest sender interleaves at most one large message with a few control messages, so one
 * maximal message plus 16 MiB. Memory is reserved at a message's first chunk, so this is also
 * what one hostile peer can make a receiver allocate: a room of small fragments should lower
 * maxMessageBytes to what it needs.
 */
export const DEFAULT_MAX_PENDING_MESSAGES = 8;
export const DEFAULT_MAX_PENDING_BYTES = DEFAULT_MAX_MESSAGE_BYTES + 16 * 1024 * 1024;

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
