/**
 * Shoal's per-round byte formula, the one definition: what one worker uploads for one round of
 * one fragment of the collective (docs/design.md, "The collective"). The planner, the docs and the
 * benchmarks read their communication cost from here; round-bytes.test.ts holds it to what the
 * simulator's transport actually carries.
 *
 * Per round (fragment p, r) with M participants, the fragment is cut into min(M, blocks) shards on
 * the codec's block grid (shardRanges); shard k's owner is participant k and its checker k + 1:
 *
 *   contribution   every participant but the owner sends its shard k to the owner, and every one
 *                  but the checker to the checker: 2(M − 1) messages per shard (M − 1 with no
 *                  checker, M = 1).
 *   shard-result   the owner sends the encoded aggregate to every other replica: the M − 1 other
 *                  participants and the host; the checker sends its result hash (no payload) to
 *                  the same M replicas.
 *   hash-report    every participant reports its tentative hash to the coordinator.
 *
 * So a worker uploads about (3M − 2)/M of the fragment's encoded size, plus headers. A low-rank
 * round (docs/lowrank.md) is the same exchange over its payload instead of the fragment: each
 * 2-D tensor's factor (rows·r values in a right round, cols·r in a left one, lowRankPayloadSize)
 * and the other tensors as they are, quantised and sharded as a dense fragment. What this
 * leaves out: heartbeats (one per heartbeat interval, not per round), round-opens and commits
 * (the coordinator's), and the rare messages of faults (reassign resends, state transfers).
 */
import {
  type Codec,
  type CodecName,
  createCodec,
  type FragmentTensor,
  type LowRankSide,
  lowRankPayloadSize,
} from '@shoal/diloco';
import { HEADER_BYTES, shardRanges } from '@shoal/protocol';

export interface RoundBytesInput {
  /** Parameters in the fragment (f32 values). */
  values: number;
  /** Participants of the round (M). */
  workers: number;
  codec: CodecName;
  /** Values per codec scale (ignored by the float codecs). */
  blockSize: number;
  /**
   * Characters of a peer id, which the shard results' verdicts name: 12 for the signaling server's
   * ids (9 random bytes, base64url), 2 in the simulator ("w0").
   */
  peerIdChars?: number;
  /**
   * Whether contributions, shard results and hash reports carry a signature: true (the default)
   * in every room, the simulator's included; false only in a test room without key pairs.
   */
  signed?: boolean;
  /**
   * A low-rank round: the fragment's tensors (their sizes sum to `values`), the round's rank, and
   * its side; 'mean' (the default) is the mean of a right and a left round, what a run's rounds,
   * alternating sides, average. A low-rank room's dense rounds (each fragment's first) have none.
   */
  lowRank?: { tensors: readonly FragmentTensor[]; rank: number; side?: LowRankSide | 'mean' };
}

/** `,"signature":"…"` added to a body: an Ed25519 or P-256 signature is 64 bytes, 86 characters of base64url. */
const SIGNATURE_JSON_CHARS = ',"signature":""'.length + 86;
/** A contribution weight as JSON: tokens since the last contribution, a few hundred thousand. */
const WEIGHT_DIGITS = 6;
/** The result hash and the tentative-state hash, as hex (XXH3-128, hash.ts's default: 32 digits). */
const HASH_HEX_CHARS = 32;

/** Bytes that `values` f32s take on the wire in `codec` (the codec's own size function). */
export function encodedBytes(values: number, codec: CodecName, blockSize: number): number {
  return createCodec(codec, { blockSize }).encodedSize(values);
}

/** The JSON part of a shard result with `participants` verdicts (all accepted, no message). */
function shardResultJsonChars(participants: number, peerIdChars: number, check: boolean, signed: boolean): number {
  const verdict = `{"peer":"${'p'.repeat(peerIdChars)}","weight":${'9'.repeat(WEIGHT_DIGITS)},"reason":"","message":""}`;
  const verdicts = Array.from({ length: participants }, () => verdict).join(',');
  const body = `{"verdicts":[${verdicts}],"resultHash":"${'0'.repeat(HASH_HEX_CHARS)}"${check ? ',"check":true' : ''}}`;
  return body.length + (signed ? SIGNATURE_JSON_CHARS : 0);
}

/**
 * Bytes ONE worker uploads for one round of one fragment of `values` parameters with `workers`
 * participants, message headers included: the mean over the participants (shards differ by at
 * most one block, so owners differ by that much).
 */
export function roundUploadBytes(input: RoundBytesInput): number {
  const { values, workers: M, lowRank } = input;
  if (!Number.isSafeInteger(M) || M < 1) throw new RangeError(`workers must be an integer ≥ 1, got ${M}`);
  const codec = createCodec(input.codec, { blockSize: input.blockSize });
  if (!lowRank) return payloadUploadBytes(values, codec, input);
  const tensorValues = lowRank.tensors.reduce((n, t) => n + t.size, 0);
  if (tensorValues !== values) throw new RangeError(`the tensors hold ${tensorValues} values, the fragment ${values}`);
  const sides: LowRankSide[] = lowRank.side && lowRank.side !== 'mean' ? [lowRank.side] : ['right', 'left'];
  const bytes = sides.map((side) =>
    payloadUploadBytes(lowRankPayloadSize(lowRank.tensors, { rank: lowRank.rank, side }), codec, input),
  );
  return bytes.reduce((a, b) => a + b, 0) / bytes.length;
}

/** roundUploadBytes for a round whose payload (a dense fragment, or a low-rank round's factors) is `values` f32s. */
function payloadUploadBytes(values: number, codec: Codec, input: RoundBytesInput): number {
  const { workers: M, signed = true } = input;
  const peerIdChars = input.peerIdChars ?? 12;
  const checked = M >= 2;
  // `{}`, or `{"signature":"…"}`: no comma before it
  const contributionHeader = HEADER_BYTES + (signed ? SIGNATURE_JSON_CHARS + 1 : '{}'.length);
  const resultHeader = HEADER_BYTES + shardResultJsonChars(M, peerIdChars, false, signed);
  const checkBytes = HEADER_BYTES + shardResultJsonChars(M, peerIdChars, true, signed);
  const hashReport =
    HEADER_BYTES + `{"hash":"${'0'.repeat(HASH_HEX_CHARS)}"}`.length + (signed ? SIGNATURE_JSON_CHARS : 0);
  let total = 0;
  for (const range of shardRanges(values, codec.blockSize, M)) {
    const shardBytes = codec.encodedSize(range.end - range.start);
    const contributions = (checked ? 2 : 1) * (M - 1); // to the owner and the checker, from all but themselves
    total += contributions * (contributionHeader + shardBytes);
    total += M * (resultHeader + shardBytes); // the owner: M − 1 other participants and the host
    if (checked) total += M * checkBytes; // the checker: its hash to the same replicas
  }
  total += M * hashReport;
  return total / M;
}
