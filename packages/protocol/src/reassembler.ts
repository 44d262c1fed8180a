/**
 * Puts one sender's chunks (chunks.ts) back into messages, with bounded memory and no timers of
 * its own: time comes from an injected clock, and expired messages are evicted on every push and
 * whenever the owner calls `evictExpired()` (the mesh does on its heartbeat, so a silent peer's
 * half-message does not stay forever).
 *
 * Policy:
 * - A chunk is checked on its own (size, magic, version, count against total, index in range,
 *   exact data length) and against its message (same count and total as its first chunk).
 * - Memory is reserved per message from its declared total (the buffer is allocated on the first
 *   chunk, and chunks are copied into place): at most `maxPendingMessages` incomplete messages
 *   and `maxPendingBytes` declared bytes; a new message beyond either is refused, the ones in
 *   progress keep going.
 * - A duplicate chunk is refused and the message goes on (a copy cannot corrupt it). A chunk that
 *   contradicts its message (other count or total, wrong length) drops the whole message, and the
 *   rest of that message's chunks are refused as 'dropped' (the last DROPPED_MEMORY ids are
 *   remembered).
 * - A message with no new chunk for `timeoutMs` is evicted.
 */
import { CHUNK_HEADER_BYTES, type ChunkHeaderProblem, chunkSpan, readChunkHeader } from './chunks.ts';
import {
  DEFAULT_MAX_MESSAGE_BYTES,
  DEFAULT_MAX_PENDING_BYTES,
  DEFAULT_MAX_PENDING_MESSAGES,
  DEFAULT_REASSEMBLY_TIMEOUT_MS,
  MAX_CHUNK_BYTES,
} from './limits.ts';

export type ChunkRejectReason =
  | ChunkHeaderProblem
  | 'chunk-too-large'
  | 'message-too-large'
  | 'bad-count'
  | 'index-out-of-range'
  | 'chunk-length'
  | 'inconsistent'
  | 'duplicate'
  | 'dropped'
  | 'too-many-pending'
  | 'over-budget';

export type PushResult =
  | { status: 'complete'; messageId: number; bytes: Uint8Array }
  | { status: 'pending'; messageId: number; received: number; count: number }
  | { status: 'rejected'; reason: ChunkRejectReason; detail: string; messageId?: number };

export interface Eviction {
  messageId: number;
  received: number;
  count: number;
}

export interface ReassemblerOptions {
  /** Clock in ms (performance.now, Date.now, or the simulator's virtual clock). */
  now: () => number;
  maxMessageBytes?: number;
  /** The largest chunk accepted, header included (this side's max message size). */
  maxChunkBytes?: number;
  maxPendingMessages?: number;
  maxPendingBytes?: number;
  timeoutMs?: number;
}

interface Pending {
  count: number;
  totalBytes: number;
  bytes: Uint8Array;
  seen: Uint8Array;
  received: number;
  lastActivity: number;
}

/** Ids of dropped messages remembered, to refuse their remaining chunks by name. */
export const DROPPED_MEMORY = 64;

export class Reassembler {
  private readonly pending = new Map<number, Pending>();
  private readonly dropped = new Set<number>();
  private reservedBytes = 0;
  private readonly now: () => number;
  private readonly maxMessageBytes: number;
  private readonly maxChunkBytes: number;
  private readonly maxPendingMessages: number;
  private readonly maxPendingBytes: number;
  private readonly timeoutMs: number;

  constructor(options: ReassemblerOptions) {
    this.now = options.now;
    this.maxMessageBytes = options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
    this.maxChunkBytes = options.maxChunkBytes ?? MAX_CHUNK_BYTES;
    this.maxPendingMessages = options.maxPendingMessages ?? DEFAULT_MAX_PENDING_MESSAGES;
    this.maxPendingBytes = options.maxPendingBytes ?? DEFAULT_MAX_PENDING_BYTES;
    this.timeoutMs = options.timeoutMs ?? DEFAULT_REASSEMBLY_TIMEOUT_MS;
  }

  /** Incomplete messages held now, and the bytes reserved for them. */
  get pendingMessages(): number {
    return this.pending.size;
  }
  get pendingBytes(): number {
    return this.reservedBytes;
  }

  /** Never throws. The completed message's bytes are owned by the caller. */
  push(chunk: Uint8Array): PushResult {
    this.evictExpired();
    const header = readChunkHeader(chunk);
    if (typeof header === 'string') return reject(header, `not a chunk (${header})`);
    const { messageId, index, count, totalBytes } = header;
    const refuse = (reason: ChunkRejectReason, detail: string): PushResult => reject(reason, detail, messageId);
    if (chunk.length > this.maxChunkBytes) {
      return refuse('chunk-too-large', `${chunk.length}-byte chunk exceeds ${this.maxChunkBytes}`);
    }
    if (totalBytes > this.maxMessageBytes) {
      return refuse('message-too-large', `message of ${totalBytes} bytes exceeds ${this.maxMessageBytes}`);
    }
    if (count < 1 || count > Math.max(1, totalBytes)) {
      return refuse('bad-count', `${count} chunks for ${totalBytes} bytes`);
    }
    if (index >= count) return refuse('index-out-of-range', `chunk ${index} of ${count}`);
    const [start, end] = chunkSpan(index, count, totalBytes);
    if (chunk.length - CHUNK_HEADER_BYTES !== end - start) {
      this.drop(messageId);
      return refuse(
        'chunk-length',
        `chunk ${index} holds ${chunk.length - CHUNK_HEADER_BYTES} bytes, expected ${end - start}`,
      );
    }
    if (this.dropped.has(messageId)) return refuse('dropped', `message ${messageId} was dropped`);

    let message = this.pending.get(messageId);
    if (!message) {
      if (this.pending.size >= this.maxPendingMessages) {
        return refuse('too-many-pending', `${this.pending.size} messages are already incomplete`);
      }
      const reserve = totalBytes + count;
      if (this.reservedBytes + reserve > this.maxPendingBytes) {
        return refuse('over-budget', `${reserve} more bytes would exceed the ${this.maxPendingBytes}-byte budget`);
      }
      message = {
        count,
        totalBytes,
        bytes: new Uint8Array(totalBytes),
        seen: new Uint8Array(count),
        received: 0,
        lastActivity: this.now(),
      };
      this.pending.set(messageId, message);
      this.reservedBytes += reserve;
    } else if (message.count !== count || message.totalBytes !== totalBytes) {
      this.drop(messageId);
      return refuse(
        'inconsistent',
        `chunk says ${count} chunks / ${totalBytes} bytes, the message began with ${message.count} / ${message.totalBytes}`,
      );
    }
    if (message.seen[index]) return refuse('duplicate', `chunk ${index} of message ${messageId} arrived twice`);

    message.seen[index] = 1;
    message.received++;
    message.lastActivity = this.now();
    message.bytes.set(chunk.subarray(CHUNK_HEADER_BYTES), start);
    if (message.received < count) return { status: 'pending', messageId, received: message.received, count };
    this.release(messageId);
    return { status: 'complete', messageId, bytes: message.bytes };
  }

  /** Evicts messages idle for timeoutMs or more; returns what was evicted. */
  evictExpired(): Eviction[] {
    const now = this.now();
    const evicted: Eviction[] = [];
    for (const [messageId, message] of this.pending) {
      if (now - message.lastActivity >= this.timeoutMs) {
        evicted.push({ messageId, received: message.received, count: message.count });
        this.drop(messageId);
      }
    }
    return evicted;
  }

  /** Forgets everything (the peer went down). */
  clear(): void {
    this.pending.clear();
    this.dropped.clear();
    this.reservedBytes = 0;
  }

  private release(messageId: number): void {
    const message = this.pending.get(messageId);
    if (!message) return;
    this.reservedBytes -= message.totalBytes + message.count;
    this.pending.delete(messageId);
  }

  private drop(messageId: number): void {
    this.release(messageId);
    this.dropped.delete(messageId);
    this.dropped.add(messageId);
    if (this.dropped.size > DROPPED_MEMORY) {
      const oldest = this.dropped.values().next().value as number;
      this.dropped.delete(oldest);
    }
  }
}

function reject(reason: ChunkRejectReason, detail: string, messageId?: number): PushResult {
  return messageId === undefined
    ? { status: 'rejected', reason, detail }
    : { status: 'rejected', reason, detail, messageId };
}
