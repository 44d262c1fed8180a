/**
 * The room's rank for each fragment's low-rank rounds (docs/lowrank.md, "Adaptive rank"): the
 * coordinator names it in every round-open, so replicas agree. After each round the participants
 * report, per fragment, the relative error their error-fed Δ would have had at each rank of the
 * ladder up to the round's. The next round takes the smallest rank whose median error is under
 * the target (a step down only below 90% of it, so the rank does not flap); where even the
 * round's rank misses it, one rung up, to at most the configured rank. With target 0 the rank
 * stays at the configured one. The median keeps a minority of liars from moving it.
 */
import { type LowRankSpec, lowRankRungs } from '@shoal/diloco';
import type { RunConfig } from '@shoal/protocol';
import { median } from './roster.ts';

/** A smaller rank is taken only when its median error is under this fraction of the target. */
const STEP_DOWN_MARGIN = 0.9;

export class AdaptiveRank {
  private readonly ranks: number[];
  private readonly rungs: number[];

  constructor(
    fragments: number,
    private readonly setting: NonNullable<RunConfig['diloco']['lowRank']>,
  ) {
    this.rungs = lowRankRungs(setting.rank);
    this.ranks = new Array<number>(fragments).fill(setting.rank);
  }

  /** The spec of round `round` of fragment p: its rank, and the side by the round's parity. */
  spec(p: number, round: number): LowRankSpec {
    return { rank: this.rank(p), side: round % 2 === 1 ? 'right' : 'left' };
  }

  rank(p: number): number {
    return this.ranks[p] ?? this.setting.rank;
  }

  /**
   * Moves fragment p's rank by the participants' reports of its last round: each an array of
   * errors at the ladder's ranks 1, 2, 4, … up to that round's. Reports that say nothing are skipped.
   */
  observe(p: number, reports: readonly (readonly number[])[]): void {
    const { target } = this.setting;
    const current = this.rank(p);
    const usable = reports.filter((r) => r.length > 0);
    if (target === 0 || usable.length === 0) return;
    let chosen: number | null = null;
    for (const [k, rung] of this.rungs.entries()) {
      if (rung > current) break;
      const errors = usable.flatMap((r) => (r[k] === undefined ? [] : [r[k] as number]));
      if (errors.length === 0) break;
      const limit = rung < current ? STEP_DOWN_MARGIN * target : target;
      if (median(errors) <= limit) {
        chosen = rung;
        break;
      }
    }
    if (chosen === null) chosen = this.rungs.find((r) => r > current) ?? current;
    this.ranks[p] = chosen;
  }
}
