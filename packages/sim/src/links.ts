/**
 * The arithmetic of the simulated network's links: access-link rates, serialisation delay and the
 * one-way latency between peers. See network.ts for how they combine.
 */
import type { PeerId } from '@shoal/protocol';

/** A peer's access link. Home links are asymmetric: typically down is several times up. */
export interface LinkRates {
  /** Uplink rate, Mbit/s (10⁶ bits per second); Infinity puts messages on the wire instantly. */
  upMbps: number;
  /** Downlink rate, Mbit/s; Infinity takes them off the wire instantly. */
  downMbps: number;
}

/**
 * Time to put `bytes` on a link of `mbps` Mbit/s, ms: bytes·8 / (mbps·1000), since one Mbit/s
 * moves 1000 bits per ms. 1000 bytes at 8 Mbit/s take exactly 1 ms.
 */
export function serializationMs(bytes: number, mbps: number): number {
  return mbps === Number.POSITIVE_INFINITY ? 0 : (bytes * 8) / (mbps * 1000);
}

/** Throws unless `mbps` is a usable rate (> 0, Infinity allowed). */
export function checkRate(name: string, mbps: number): void {
  if (!(mbps > 0)) throw new RangeError(`${name} must be a rate in Mbit/s > 0 (or Infinity), got ${mbps}`);
}

/** Throws unless `ms` is a usable delay (finite, ≥ 0). */
export function checkDelay(name: string, ms: number): void {
  if (!(ms >= 0) || !Number.isFinite(ms)) throw new RangeError(`${name} must be a finite number of ms ≥ 0, got ${ms}`);
}

/** One-way propagation delay per directed pair of peers, ms. */
export type LatencyModel = number | ((from: PeerId, to: PeerId) => number);

/** The base latency model plus per-pair overrides. */
export class LatencyTable {
  private readonly overrides = new Map<PeerId, Map<PeerId, number>>();

  constructor(private readonly base: LatencyModel) {
    if (typeof base === 'number') checkDelay('latencyMs', base);
  }

  /** The one-way delay from `from` to `to`, ms. */
  get(from: PeerId, to: PeerId): number {
    const override = this.overrides.get(from)?.get(to);
    if (override !== undefined) return override;
    if (typeof this.base === 'number') return this.base;
    const ms = this.base(from, to);
    checkDelay(`latencyMs(${from}, ${to})`, ms);
    return ms;
  }

  /** Sets the one-way delay from `from` to `to`, ms. */
  set(from: PeerId, to: PeerId, ms: number): void {
    checkDelay('latencyMs', ms);
    let row = this.overrides.get(from);
    if (row === undefined) {
      row = new Map();
      this.overrides.set(from, row);
    }
    row.set(to, ms);
  }
}
