/**
 * Chunks: how packages/mesh cuts a message into data-channel frames of at most the remote's max
 * message size (≤ 64 KiB), and puts it back together. Pure logic; the mesh only moves bytes.
 *
 * Chunk layout (chunk format 1), little-endian, 20-byte header then data:
 *
 * | offset | bytes | field       | type | meaning                                         |
 * | ------ | ----- | ----------- | ---- | ----------------------------------------------- |
 * | 0      | 2     | magic       | u8×2 | ASCII "Sc" (53 63)                              |
 * | 2      | 1     | version     | u8   | CHUNK_VERSION (1)                               |
 * | 3      | 1     | reserved    | u8   | 0                                               |
 * | 4      | 4     | message id  | u32  | chosen by the sender, unique among its messages |
 * | 8      | 4     | index       | u32  | i in 0 … n − 1                                  |
 * | 12     | 4     | count       | u32  | n ≥ 1                                           |
 * | 16     | 4     | total bytes | u32  | T, the whole message's length                   |
 * | 20     | …     | data        |      | message bytes [i·S, min((i + 1)·S, T)), S = ⌈T/n⌉ |
 *
 * Every chunk states n and T, so chunks may arrive in any order and each one's exact length is
 * known; n = ⌈T / (maxChunk − 20)⌉ keeps every chunk within maxChunk. An empty message is one
 * empty chunk. The message's own integrity is the wire header's hash (wire.ts), checked after
 * reassembly; chunks carry none.
 *
 * Message ids are per sender, so the mesh keeps one Reassembler per peer.
 */
import { MAX_CHUNK_BYTES } from './limits.ts';

export const CHUNK_HEADER_BYTES = 20;
export const CHUNK_MAGIC = Uint8Array.of(0x53, 0x63); // "Sc"
export const CHUNK_VERSION = 1;

export interface ChunkHeader {
  messageId: number;
  index: number;
  count: number;
  totalBytes: number;
}

/** Chunks a message of `length` bytes needs when no chunk may exceed `maxChunk` bytes. */
export function chunkCount(length: number, maxChunk: number): number {
  return Math.max(1, Math.ceil(length / (maxChunk - CHUNK_HEADER_BYTES)));
}

/** The data bytes [start, end) of chunk `index` of a message of `totalBytes` in `count` chunks. */
export function chunkSpan(index: number, count: number, totalBytes: number): [number, number] {
  const stride = Math.ceil(totalBytes / count);
  const start = Math.min(index * stride, totalBytes);
  return [start, Math.min(start + stride, totalBytes)];
}

function checkChunkArgs(length: number, maxChunk: number, messageId: number): void {
  if (!Number.isInteger(maxChunk) || maxChunk <= CHUNK_HEADER_BYTES || maxChunk > MAX_CHUNK_BYTES) {
    throw new RangeError(
      `maxChunk must be an integer in ${CHUNK_HEADER_BYTES + 1} … ${MAX_CHUNK_BYTES}, got ${maxChunk}`,
    );
  }
  if (!Number.isInteger(messageId) || messageId < 0 || messageId > 0xffff_ffff) {
    throw new RangeError(`messageId must be a u32, got ${messageId}`);
  }
  if (length > 0xffff_ffff) throw new RangeError(`a message of ${length} bytes does not fit the chunk header`);
}

/**
 * The chunks of `bytes`, one at a time (each a new buffer of at most maxChunk bytes), so a sender
 * waiting on backpressure between chunks holds one chunk beyond the message, not a second copy.
 */
export function* iterateChunks(bytes: Uint8Array, maxChunk: number, messageId: number): Generator<Uint8Array> {
  checkChunkArgs(bytes.length, maxChunk, messageId);
  const count = chunkCount(bytes.length, maxChunk);
  for (let index = 0; index < count; index++) {
    const [start, end] = chunkSpan(index, count, bytes.length);
    const chunk = new Uint8Array(CHUNK_HEADER_BYTES + end - start);
    writeChunkHeader(chunk, { messageId, index, count, totalBytes: bytes.length });
    chunk.set(bytes.subarray(start, end), CHUNK_HEADER_BYTES);
    yield chunk;
  }
}

export function chunkMessage(bytes: Uint8Array, maxChunk: number, messageId: number): Uint8Array[] {
  return [...iterateChunks(bytes, maxChunk, messageId)];
}

export function writeChunkHeader(chunk: Uint8Array, header: ChunkHeader): void {
  const view = new DataView(chunk.buffer, chunk.byteOffset, chunk.byteLength);
  chunk.set(CHUNK_MAGIC, 0);
  view.setUint8(2, CHUNK_VERSION);
  view.setUint8(3, 0);
  view.setUint32(4, header.messageId, true);
  view.setUint32(8, header.index, true);
  view.setUint32(12, header.count, true);
  view.setUint32(16, header.totalBytes, true);
}

export type ChunkHeaderProblem = 'chunk-too-short' | 'chunk-magic' | 'chunk-version';

/** The header, or why there is none. Never throws. */
export function readChunkHeader(chunk: Uint8Array): ChunkHeader | ChunkHeaderProblem {
  if (!(chunk instanceof Uint8Array) || chunk.length < CHUNK_HEADER_BYTES) return 'chunk-too-short';
  if (chunk[0] !== CHUNK_MAGIC[0] || chunk[1] !== CHUNK_MAGIC[1]) return 'chunk-magic';
  if (chunk[2] !== CHUNK_VERSION || chunk[3] !== 0) return 'chunk-version';
  const view = new DataView(chunk.buffer, chunk.byteOffset, chunk.byteLength);
  return {
    messageId: view.getUint32(4, true),
    index: view.getUint32(8, true),
    count: view.getUint32(12, true),
    totalBytes: view.getUint32(16, true),
  };
}
