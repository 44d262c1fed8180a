/**
 * The engine of a `--dry-run`: it trains nothing, its steps take no real time (the simulator's
 * clock models them) and its parameters move only where the worker's merges move them.
 *
 * Memory. A worker's θ_local is a whole model (4 bytes a parameter: 43 MB for `small`), and in a
 * dry run every worker's is the same: θ_local starts at the seeded init, Δ = θ_global − θ_local is
 * 0, so Δ̄ is 0, the outer step leaves θ_global at the init, and a merge α·x + (1 − α)·x gives x
 * back. So the workers of one run share one frozen copy (`SharedParams`); a trainer holds its own
 * only once `setParams` hands it values that differ from it (compared bit for bit, so −0 and NaN
 * payloads count as different). What callers see is unchanged: `getParams` is always a fresh copy.
 *
 * Time. A round reads and merges one fragment (`readRanges`, `writeRanges`): here a copy of the
 * fragment's ranges out of the shared copy, and a compare of what a merge writes back with it,
 * which in a dry run is what is there already, so nothing is copied or written. A whole model per
 * worker per round (`getParams`' copy, `setParams`' compare) would be most of a dry run's time.
 */
import {
  buildLayout,
  type GptConfig,
  type ParamLayout,
  type ParamRange,
  type TrainConfig,
  type Trainer,
} from '@shoal/model';
import { sameBytes } from './same-bytes.ts';

/** One run's frozen θ_local that its dry-run trainers share while theirs equals it. */
export class SharedParams {
  private base: Float32Array | null = null;

  /** The shared copy: the first vector offered (copied), or that one if `params` has the same bits. */
  adopt(params: Float32Array): Float32Array | null {
    this.base ??= params.slice();
    return sameBits(this.base, params) ? this.base : null;
  }

  /** Bytes of the shared copy (0 before the first trainer). */
  get bytes(): number {
    return this.base?.byteLength ?? 0;
  }
}

/** Whether two vectors hold the same bits (not the same numbers: −0 ≠ 0, NaNs by payload). */
export const sameBits = sameBytes;

export class NullTrainer implements Trainer {
  readonly backend = 'cpu' as const;
  readonly layout: ParamLayout;
  /** This trainer's θ_local where it differs from the shared one; null while it does not. */
  private own: Float32Array | null = null;
  private shared: Float32Array | null;

  constructor(
    model: GptConfig,
    readonly train: TrainConfig,
    params: Float32Array,
    private readonly sharing: SharedParams = new SharedParams(),
  ) {
    this.layout = buildLayout(model);
    this.check(params);
    this.shared = sharing.adopt(params);
    if (!this.shared) this.own = params.slice();
  }

  private check(params: Float32Array): void {
    if (params.length !== this.layout.size) {
      throw new RangeError(`params have ${params.length} values, the model needs ${this.layout.size}`);
    }
  }

  /** Bytes this trainer holds of its own: 0 while its θ_local is the shared one. */
  get ownBytes(): number {
    return this.own?.byteLength ?? 0;
  }

  async step(): Promise<number> {
    return Number.NaN;
  }
  async evaluate(): Promise<number> {
    return Number.NaN;
  }
  async getParams(): Promise<Float32Array> {
    return ((this.own ?? this.shared) as Float32Array).slice();
  }
  async setParams(params: Float32Array): Promise<void> {
    this.check(params);
    this.shared = this.sharing.adopt(params);
    this.own = this.shared ? null : params.slice();
  }
  async readRanges(ranges: readonly ParamRange[], out: Float32Array): Promise<void> {
    const params = (this.own ?? this.shared) as Float32Array;
    let at = 0;
    for (const [start, end] of ranges) {
      out.set(params.subarray(start, end), at);
      at += end - start;
    }
  }
  async writeRanges(ranges: readonly ParamRange[], values: Float32Array): Promise<void> {
    let at = 0;
    const parts = ranges.map(([start, end]) => {
      const part = { start, values: values.subarray(at, at + end - start) };
      at += end - start;
      return part;
    });
    if (!this.own) {
      const shared = this.shared as Float32Array;
      // the shared copy's values already: nothing to write (a dry run's every merge)
      if (parts.every((part) => sameBits(shared.subarray(part.start, part.start + part.values.length), part.values)))
        return;
      this.own = shared.slice();
      this.shared = null;
    }
    for (const part of parts) this.own.set(part.values, part.start);
  }
  async getOptimizerState() {
    return { m: new Float32Array(0), v: new Float32Array(0), step: 0 };
  }
  async setOptimizerState(): Promise<void> {}
  destroy(): void {}
}
