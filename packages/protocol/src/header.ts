/**
 * The fixed header every message starts with (wire format 1.0): 48 bytes, little-endian.
 *
 * | offset | bytes | field          | type | meaning                                                 |
 * | ------ | ----- | -------------- | ---- | ------------------------------------------------------- |
 * | 0      | 4     | magic          | u8×4 | ASCII "SHOL" (53 48 4F 4C)                              |
 * | 4      | 1     | major version  | u8   | PROTOCOL_VERSION.major; another major is rejected       |
 * | 5      | 1     | minor version  | u8   | PROTOCOL_VERSION.minor; any minor is accepted           |
 * | 6      | 1     | kind           | u8   | MESSAGE_SPECS[kind].id                                  |
 * | 7      | 1     | flags          | u8   | reserved, 0                                             |
 * | 8      | 4     | run id         | u32  | the run (0 in a hello: not known yet)                   |
 * | 12     | 4     | round          | u32  | round r of the fragment; 0xFFFFFFFF = none              |
 * | 16     | 2     | fragment       | u16  | fragment p; 0xFFFF = none                               |
 * | 18     | 2     | shard          | u16  | shard k of the round; 0xFFFF = none                     |
 * | 20     | 1     | codec          | u8   | CODEC_IDS (codec-ids.ts); 0xFF = none                   |
 * | 21     | 3     | reserved       | u8×3 | 0                                                       |
 * | 24     | 8     | weight         | f64  | contribution weight in tokens (a safe integer); 0 = none |
 * | 32     | 4     | JSON length    | u32  | J: bytes of the JSON part                               |
 * | 36     | 4     | payload length | u32  | L: bytes of the binary payload                          |
 * | 40     | 8     | hash           | u8×8 | XXH3-64 of bytes [0, 40) ‖ [48, 48 + J + L)             |
 * | 48     | J     | JSON part      |      | UTF-8 JSON object, the kind's body                      |
 * | 48 + J | L     | payload        |      | contribution/shard-result: codec bytes; state: fp32     |
 *
 * A message is exactly 48 + J + L bytes. Which of round, fragment, shard, codec and weight a
 * kind uses is fixed per kind (messages.ts); a kind's unused fields hold their "none" value and
 * a used one never does. The hash covers everything but itself, so a message misassembled from
 * chunks is caught whole; it is an integrity check against bugs, not a signature (a hostile peer
 * can compute it too). The weight is an f64 rather than a u32 so a fast GPU's tokens since its
 * last contribution cannot overflow it; it must still be an integer.
 */

export const HEADER_BYTES = 48;
export const MAGIC = Uint8Array.of(0x53, 0x48, 0x4f, 0x4c); // "SHOL"
export const HASH_OFFSET = 40;
export const HASH_BYTES = 8;

export const NONE_U8 = 0xff;
export const NONE_U16 = 0xffff;
export const NONE_U32 = 0xffff_ffff;
export const NONE_WEIGHT = 0;

/** Field offsets, for readers and for tests that forge headers. */
export const HEADER_OFFSETS = {
  magic: 0,
  major: 4,
  minor: 5,
  kind: 6,
  flags: 7,
  runId: 8,
  round: 12,
  fragment: 16,
  shard: 18,
  codec: 20,
  reserved: 21,
  weight: 24,
  jsonLength: 32,
  payloadLength: 36,
  hash: HASH_OFFSET,
} as const;

/** The header's numbers as stored, sentinels included. */
export interface RawHeader {
  major: number;
  minor: number;
  kindId: number;
  flags: number;
  runId: number;
  round: number;
  fragment: number;
  shard: number;
  codecId: number;
  /** The three reserved bytes as one number; 0 when well-formed. */
  reserved: number;
  weight: number;
  jsonLength: number;
  payloadLength: number;
}

const view = (bytes: Uint8Array) => new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);

export function hasMagic(bytes: Uint8Array): boolean {
  return bytes.length >= 4 && MAGIC.every((byte, i) => bytes[i] === byte);
}

/** Reads the header's fields; `bytes` must hold at least HEADER_BYTES. */
export function readHeader(bytes: Uint8Array): RawHeader {
  const v = view(bytes);
  const o = HEADER_OFFSETS;
  return {
    major: v.getUint8(o.major),
    minor: v.getUint8(o.minor),
    kindId: v.getUint8(o.kind),
    flags: v.getUint8(o.flags),
    runId: v.getUint32(o.runId, true),
    round: v.getUint32(o.round, true),
    fragment: v.getUint16(o.fragment, true),
    shard: v.getUint16(o.shard, true),
    codecId: v.getUint8(o.codec),
    reserved: v.getUint8(o.reserved) | (v.getUint8(o.reserved + 1) << 8) | (v.getUint8(o.reserved + 2) << 16),
    weight: v.getFloat64(o.weight, true),
    jsonLength: v.getUint32(o.jsonLength, true),
    payloadLength: v.getUint32(o.payloadLength, true),
  };
}

/** Writes magic and fields (not the hash) into the first HEADER_BYTES of `bytes`, zeroed before. */
export function writeHeader(bytes: Uint8Array, header: Omit<RawHeader, 'flags' | 'reserved'>): void {
  const v = view(bytes);
  const o = HEADER_OFFSETS;
  bytes.set(MAGIC, o.magic);
  v.setUint8(o.major, header.major);
  v.setUint8(o.minor, header.minor);
  v.setUint8(o.kind, header.kindId);
  v.setUint32(o.runId, header.runId, true);
  v.setUint32(o.round, header.round, true);
  v.setUint16(o.fragment, header.fragment, true);
  v.setUint16(o.shard, header.shard, true);
  v.setUint8(o.codec, header.codecId);
  v.setFloat64(o.weight, header.weight, true);
  v.setUint32(o.jsonLength, header.jsonLength, true);
  v.setUint32(o.payloadLength, header.payloadLength, true);
}

/** What the hash covers: the header up to the hash field, then everything after the header. */
export function hashedParts(bytes: Uint8Array): [Uint8Array, Uint8Array] {
  return [bytes.subarray(0, HASH_OFFSET), bytes.subarray(HEADER_BYTES)];
}
