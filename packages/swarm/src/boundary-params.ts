/**
 * A step boundary's reads and writes of θ_local, a fragment at a time (worker-rounds.ts): through
 * the engine's readRanges / writeRanges where it has them (a GPU's fragment crosses the bus, not
 * the whole model), else one getParams for the boundary that fragments are gathered from and
 * scattered into, and one setParams at its end. Fragment buffers come from the vector pool.
 * Reads may be issued together (each is queued on the engine when called) and awaited later.
 */
import { type Fragment, gatherFragment, scatterFragment, vectorPool } from '@shoal/diloco';
import type { Trainer } from '@shoal/model';
import type { SwarmClock } from './member.ts';

export class BoundaryParams {
  /** The whole model, once a read or write without ranges fetched it (concurrent reads share it). */
  private whole: Promise<Float32Array> | null = null;
  private dirty = false;

  constructor(
    private readonly trainer: Trainer,
    private readonly clock: SwarmClock,
  ) {}

  private get ranged(): boolean {
    return this.whole === null && this.trainer.readRanges !== undefined && this.trainer.writeRanges !== undefined;
  }

  /** θ_local[p] as it stands, in a pool buffer the caller owns (and gives back). */
  async read(fragment: Fragment): Promise<Float32Array> {
    const out = vectorPool.take(fragment.size);
    const { readRanges } = this.trainer;
    if (this.ranged && readRanges) {
      await this.clock.track(readRanges.call(this.trainer, fragment.ranges, out));
      return out;
    }
    this.whole ??= this.clock.track(this.trainer.getParams());
    return gatherFragment(await this.whole, fragment, out);
  }

  /** θ_local[p] ← values (read back by later reads of this boundary). */
  async write(fragment: Fragment, values: Float32Array): Promise<void> {
    const { writeRanges } = this.trainer;
    if (this.ranged && writeRanges) {
      await this.clock.track(writeRanges.call(this.trainer, fragment.ranges, values));
      return;
    }
    this.whole ??= this.clock.track(this.trainer.getParams());
    scatterFragment(values, fragment, await this.whole);
    this.dirty = true;
  }

  /** Writes wait for flush(): the engine does not hold them yet. */
  get unflushed(): boolean {
    return this.dirty;
  }

  /** Hands the whole model back to the engine if a write went into it. */
  async flush(): Promise<void> {
    if (this.whole && this.dirty) await this.clock.track(this.trainer.setParams(await this.whole));
    this.dirty = false;
  }
}
