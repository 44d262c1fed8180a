/**
 * Puts one sender's chunks (chunks.ts) back into messages, with bounded memory and no timers of
 * its own: time comes from an injected clock, and expired messages are evicted on every push and
 * whenever the owner calls `evictExpired()` (the mesh does on its heartbeat, so a silent peer's
 * half-message does not stay forever).
 *
 * Policy:
 * - A chunk is checked on its own (size, magic, version, count against total, index in range,
 *   exact data length) and against its message (same count and total as its first chunk).
 * - Memory grows with the bytes that arrive, never with what a message declares: each chunk's
 *   data is kept as its own buffer and the message is joined once its last chunk is in (out of
 *   order is fine). So two chunks that announce a 256 MiB message cost two chunks.
 * - Every kept chunk is charged to a ByteBudget (its data plus PENDING_CHUNK_OVERHEAD_BYTES),
 *   which the owner may share with its other buffers for the same peer. A new message is
 *   admitted only when it declares at most `maxMessageBytes`, fewer than `maxPendingMessages`
 *   are incomplete, and its declared size (with overhead) fits what the budget has free. A
 *   message whose next chunk no longer fits (the budget filled meanwhile) is dropped.
 * - A refused message, or one whose chunk contradicts it (other count or total, wrong length),
 *   is dropped: the rest of its chunks are refused as 'dropped' (the last DROPPED_MEMORY ids are
 *   remembered). A duplicate chunk is refused and the message goes on (a copy cannot corrupt it).
 * - A message with no new chunk for `timeoutMs` is evicted.
 */
import { CHUNK_HEADER_BYTES, type ChunkHeaderProblem, chunkSpan, readChunkHeader } from './chunks.ts';
import {
  DEFAULT_MAX_MESSAGE_BYTES,
  DEFAULT_MAX_PENDING_BYTES,
  DEFAULT_MAX_PENDING_MESSAGES,
  DEFAULT_REASSEMBLY_TIMEOUT_MS,
  MAX_CHUNK_BYTES,
  PENDING_CHUNK_OVERHEAD_BYTES,
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
  /** The largest message accepted, by its declared total (changeable: setMaxMessageBytes). */
  maxMessageBytes?: number;
  /** The largest chunk accepted, header included (this side's max message size). */
  maxChunkBytes?: number;
  maxPendingMessages?: number;
  /** The limit of the reassembler's own budget, when no `budget` is given. */
  maxPendingBytes?: number;
  /** A budget shared with the owner's other buffers for the same sender. */
  budget?: ByteBudget;
  timeoutMs?: number;
}

interface Pending {
  count: number;
  totalBytes: number;
  /** Data of the chunks in so far, by index; joined when all `count` are in. */
  chunks: Map<number, Uint8Array>;
  /** Bytes charged to the budget for this message: data + overhead per chunk. */
  heldBytes: number;
  lastActivity: number;
}

/**
 * Bytes held for one peer, against a limit, shared by every buffer that peer can fill (its
 * reassembler, frames queued before its connection opened). Nothing is allocated here: the
 * buffers take bytes before they keep them and release them when they let go.
 */
export class ByteBudget {
  private heldBytes = 0;
  private peakBytes = 0;

  constructor(private limitBytes: number) {
    checkBudgetLimit(limitBytes);
  }

  get limit(): number {
    return this.limitBytes;
  }
  /** Bytes taken and not yet released. */
  get held(): number {
    return this.heldBytes;
  }
  /** The most bytes held at once since this budget was made. */
  get peak(): number {
    return this.peakBytes;
  }
  /** Bytes that can still be taken (0 when a lowered limit is already exceeded). */
  get free(): number {
    return Math.max(0, this.limitBytes - this.heldBytes);
  }

  /** Takes `bytes` when they fit under the limit; returns whether it did. */
  tryTake(bytes: number): boolean {
    if (this.heldBytes + bytes > this.limitBytes) return false;
    this.heldBytes += bytes;
    this.peakBytes = Math.max(this.peakBytes, this.heldBytes);
    return true;
  }

  release(bytes: number): void {
    this.heldBytes = Math.max(0, this.heldBytes - bytes);
  }

  /** A new limit for later takes; bytes already held stay held. */
  setLimit(bytes: number): void {
    checkBudgetLimit(bytes);
    this.limitBytes = bytes;
  }
}

function checkBudgetLimit(bytes: number): void {
  if (!Number.isSafeInteger(bytes) || bytes < 0) {
    throw new RangeError(`A byte budget must be a non-negative integer, got ${bytes}`);
  }
}

/** Ids of dropped messages remembered, to refuse their remaining chunks by name. */
const DROPPED_MEMORY = 64;

export class Reassembler {
  private readonly pending = new Map<number, Pending>();
  private readonly dropped = new Set<number>();
  private heldBytes = 0;
  private peakHeldBytes = 0;
  private readonly now: () => number;
  private maxMessageBytes: number;
  private readonly maxChunkBytes: number;
  private readonly maxPendingMessages: number;
  private readonly budget: ByteBudget;
  private readonly timeoutMs: number;

  constructor(options: ReassemblerOptions) {
    this.now = options.now;
    this.maxMessageBytes = options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
    this.maxChunkBytes = options.maxChunkBytes ?? MAX_CHUNK_BYTES;
    this.maxPendingMessages = options.maxPendingMessages ?? DEFAULT_MAX_PENDING_MESSAGES;
    this.budget = options.budget ?? new ByteBudget(options.maxPendingBytes ?? DEFAULT_MAX_PENDING_BYTES);
    this.timeoutMs = options.timeoutMs ?? DEFAULT_REASSEMBLY_TIMEOUT_MS;
  }

  /** Incomplete messages held now. */
  get pendingMessages(): number {
    return this.pending.size;
  }
  /** Bytes held now for incomplete messages: data received plus the per-chunk overhead. */
  get pendingBytes(): number {
    return this.heldBytes;
  }
  /** The most bytes held at once for incomplete messages since this reassembler was made. */
  get peakPendingBytes(): number {
    return this.peakHeldBytes;
  }

  /** Messages that begin after this call may declare at most `bytes`; those in progress go on. */
  setMaxMessageBytes(bytes: number): void {
    if (!Number.isInteger(bytes) || bytes < 1 || bytes > 0xffff_ffff) {
      throw new RangeError(`maxMessageBytes must be an integer from 1 to ${0xffff_ffff}, got ${bytes}`);
    }
    this.maxMessageBytes = bytes;
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
    if (totalBytes > this.maxMessageBytes && !this.pending.has(messageId)) {
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
      const refusal = this.admissionProblem(totalBytes, count);
      if (refusal) {
        this.drop(messageId);
        return refuse(refusal[0], refusal[1]);
      }
      // the whole message in one chunk: nothing to keep, so nothing to charge
      if (count === 1) return { status: 'complete', messageId, bytes: chunk.slice(CHUNK_HEADER_BYTES) };
      message = { count, totalBytes, chunks: new Map(), heldBytes: 0, lastActivity: this.now() };
      this.pending.set(messageId, message);
    } else if (message.count !== count || message.totalBytes !== totalBytes) {
      this.drop(messageId);
      return refuse(
        'inconsistent',
        `chunk says ${count} chunks / ${totalBytes} bytes, the message began with ${message.count} / ${message.totalBytes}`,
      );
    }
    if (message.chunks.has(index)) return refuse('duplicate', `chunk ${index} of message ${messageId} arrived twice`);

    const cost = end - start + PENDING_CHUNK_OVERHEAD_BYTES;
    if (!this.budget.tryTake(cost)) {
      const { held, limit } = this.budget;
      this.drop(messageId);
      return refuse(
        'over-budget',
        `chunk ${index} of message ${messageId}: ${cost} more bytes, ${held} of ${limit} held`,
      );
    }
    // a copy: the frame may be a view into a larger buffer that must not be kept alive
    message.chunks.set(index, chunk.slice(CHUNK_HEADER_BYTES));
    message.heldBytes += cost;
    this.heldBytes += cost;
    this.peakHeldBytes = Math.max(this.peakHeldBytes, this.heldBytes);
    message.lastActivity = this.now();
    if (message.chunks.size < count) {
      return { status: 'pending', messageId, received: message.chunks.size, count };
    }
    const bytes = joinChunks(message);
    this.release(messageId);
    return { status: 'complete', messageId, bytes };
  }

  /** Evicts messages idle for timeoutMs or more; returns what was evicted. */
  evictExpired(): Eviction[] {
    const now = this.now();
    const evicted: Eviction[] = [];
    for (const [messageId, message] of this.pending) {
      if (now - message.lastActivity >= this.timeoutMs) {
        evicted.push({ messageId, received: message.chunks.size, count: message.count });
        this.drop(messageId);
      }
    }
    return evicted;
  }

  /** Forgets everything (the peer went down), and gives its bytes back to the budget. */
  clear(): void {
    for (const messageId of [...this.pending.keys()]) this.release(messageId);
    this.dropped.clear();
  }

  /** Why a message of `totalBytes` in `count` chunks may not begin now, or null. */
  private admissionProblem(totalBytes: number, count: number): [ChunkRejectReason, string] | null {
    if (this.pending.size >= this.maxPendingMessages) {
      return ['too-many-pending', `${this.pending.size} messages are already incomplete`];
    }
    // Declared, not allocated: a message that could never fit is refused at its first chunk.
    const needed = count > 1 ? totalBytes + count * PENDING_CHUNK_OVERHEAD_BYTES : 0;
    if (needed > this.budget.free) {
      const { held, limit } = this.budget;
      return ['over-budget', `a message of ${totalBytes} bytes needs ${needed}; ${held} of ${limit} are held`];
    }
    return null;
  }

  private release(messageId: number): void {
    const message = this.pending.get(messageId);
    if (!message) return;
    this.budget.release(message.heldBytes);
    this.heldBytes -= message.heldBytes;
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

/** The message's bytes, its chunks copied into place in index order. */
function joinChunks(message: Pending): Uint8Array {
  const bytes = new Uint8Array(message.totalBytes);
  for (const [index, data] of message.chunks) {
    bytes.set(data, chunkSpan(index, message.count, message.totalBytes)[0]);
  }
  return bytes;
}

function reject(reason: ChunkRejectReason, detail: string, messageId?: number): PushResult {
  return messageId === undefined
    ? { status: 'rejected', reason, detail }
    : { status: 'rejected', reason, detail, messageId };
}
