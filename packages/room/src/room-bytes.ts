/**
 * The room view's byte figures (RoomViewPoint.bytes, fp32Bytes, dpBytes): the bytes the room sent,
 * and what fp32 DiLoCo and data-parallel training of the same room would have sent.
 *
 * They count from the recorder's start, or, for a resumed run, from its last chart point and the
 * kept view's counters. The bytes sent add up what each counter grew by, the host's own and every
 * member's, so they never go back: not when members leave (a stopped room), not when a counter
 * restarts (the host's page reloaded).
 */

import type { PeerId, RoomViewPoint } from '@shoal/protocol';
import { ringAllReduceBytes } from './room-figures.ts';

export class RoomBytes {
  /** What fp32 DiLoCo would have sent: each committed round's fragment, all-reduced. */
  fp32Bytes: number;
  /** What data-parallel training would have sent: every synchronous step's gradients, all-reduced. */
  dpBytes: number;
  /** The room's bytes sent (RoomViewPoint.bytes): what each counter grew by, added up. */
  private sentBytes: number;
  /** Each counter's last reading, by peer (the host's own under its id). */
  private readonly sentSeen = new Map<PeerId, number>();
  /** The room's tokens already counted into dpBytes. */
  private dpTokens: number;

  /**
   * `parameters`: N, every parameter of the model; `roomTokens`: the room's tokens now;
   * `continueFrom` and `kept`: a resumed run's last chart point and each peer's bytes sent then.
   */
  constructor(
    private readonly parameters: number,
    roomTokens: number,
    continueFrom: RoomViewPoint | null | undefined,
    kept: Record<PeerId, number> | undefined,
  ) {
    this.fp32Bytes = continueFrom?.fp32Bytes ?? 0;
    this.dpBytes = continueFrom?.dpBytes ?? 0;
    this.sentBytes = continueFrom?.bytes ?? 0;
    for (const [peer, bytes] of Object.entries(kept ?? {})) this.sentSeen.set(peer, bytes);
    this.dpTokens = roomTokens;
  }

  /** A committed round: fp32 DiLoCo would have all-reduced its fragment among its participants. */
  committed(fragmentSize: number, participants: number): void {
    this.fp32Bytes += ringAllReduceBytes(fragmentSize, participants);
  }

  /**
   * The room at `tokens` with `n` workers now. Data-parallel on the same room: one synchronous
   * step of the n current workers is n inner steps of ours and a ring all-reduce of all N gradients
   * among them. So the inner steps trained since the last sample, divided by n, are synchronous
   * steps at today's n; summing per sample follows n as workers come and go (to the sampling
   * period's grain).
   */
  trained(tokens: number, n: number, tokensPerStep: number): void {
    if (n > 0 && tokens > this.dpTokens) {
      const steps = (tokens - this.dpTokens) / tokensPerStep / n;
      this.dpBytes += steps * ringAllReduceBytes(this.parameters, n);
    }
    this.dpTokens = tokens;
  }

  /**
   * The room's bytes sent, from each counter's reading now (by peer): each counted by what it grew
   * since its last reading (a counter that went back restarted: all of it is new), so members that
   * leave keep their part.
   */
  countSent(readings: readonly (readonly [PeerId, number])[]): number {
    for (const [peer, bytes] of readings) {
      const last = this.sentSeen.get(peer);
      this.sentBytes += last === undefined || bytes < last ? bytes : bytes - last;
      this.sentSeen.set(peer, bytes);
    }
    return this.sentBytes;
  }
}
