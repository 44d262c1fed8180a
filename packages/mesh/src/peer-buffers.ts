/**
 * Everything the mesh holds for one remote peer, under one byte budget: the messages being
 * reassembled from its chunks, and the frames it sent before this side's 'connect' fired. A peer
 * that has filled its budget has its new messages refused (the reassembler says 'over-budget'),
 * and the other peers, each with its own budget, are unaffected.
 *
 * Messages this side queues *to* the peer are counted (`queuedSendBytes`) but not refused: they
 * are this side's own, and the swarm bounds what a peer can make it send (request quotas).
 */
import {
  ByteBudget,
  PENDING_CHUNK_OVERHEAD_BYTES,
  type PushResult,
  Reassembler,
  type ReassemblerOptions,
} from '@shoal/protocol';

/** Frames kept from a peer before its connection opened here (the remote may open first). */
export const EARLY_FRAMES_LIMIT = 1024;

export interface PeerBufferStats {
  /** Bytes held for the peer now: reassembly in progress and early frames, with overhead. */
  heldBytes: number;
  /** The most held at once. */
  peakHeldBytes: number;
  /** The budget `heldBytes` is checked against. */
  limitBytes: number;
  reassemblyBytes: number;
  earlyFrames: number;
  earlyBytes: number;
  /** Bytes of messages to the peer that send() accepted and has not yet handed to the channel. */
  queuedSendBytes: number;
}

export interface PeerBuffersOptions extends Pick<ReassemblerOptions, 'now' | 'maxMessageBytes'> {
  budgetBytes: number;
}

export class PeerBuffers {
  readonly reassembler: Reassembler;
  private readonly budget: ByteBudget;
  private early: Uint8Array[] = [];
  private earlyBytes = 0;
  queuedSendBytes = 0;

  constructor(options: PeerBuffersOptions) {
    this.budget = new ByteBudget(options.budgetBytes);
    this.reassembler = new Reassembler({
      now: options.now,
      maxMessageBytes: options.maxMessageBytes,
      budget: this.budget,
    });
  }

  /** One data frame (a chunk) from the peer; never throws. */
  push(frame: Uint8Array): PushResult {
    return this.reassembler.push(frame);
  }

  /** Keeps a frame that arrived before 'connect'; returns why not when it cannot. */
  holdEarly(frame: Uint8Array): string | null {
    if (this.early.length >= EARLY_FRAMES_LIMIT) return `${EARLY_FRAMES_LIMIT} frames arrived before the connection`;
    const cost = frame.byteLength + PENDING_CHUNK_OVERHEAD_BYTES;
    if (!this.budget.tryTake(cost)) {
      return `an early frame of ${frame.byteLength} bytes; ${this.budget.held} of ${this.budget.limit} held`;
    }
    this.early.push(frame);
    this.earlyBytes += cost;
    return null;
  }

  /** The early frames, in arrival order, handed back (their bytes released). */
  takeEarly(): Uint8Array[] {
    const frames = this.early;
    this.early = [];
    this.budget.release(this.earlyBytes);
    this.earlyBytes = 0;
    return frames;
  }

  /** New limits for messages that begin from now on; what is held stays held. */
  setLimits(maxMessageBytes: number, budgetBytes: number): void {
    this.reassembler.setMaxMessageBytes(maxMessageBytes);
    this.budget.setLimit(budgetBytes);
  }

  /** Forgets everything held (the peer went down). */
  clear(): void {
    this.takeEarly();
    this.reassembler.clear();
  }

  /** The most bytes held at once for this peer. */
  get peakHeldBytes(): number {
    return this.budget.peak;
  }

  stats(): PeerBufferStats {
    return {
      heldBytes: this.budget.held,
      peakHeldBytes: this.budget.peak,
      limitBytes: this.budget.limit,
      reassemblyBytes: this.reassembler.pendingBytes,
      earlyFrames: this.early.length,
      earlyBytes: this.earlyBytes,
      queuedSendBytes: this.queuedSendBytes,
    };
  }
}
