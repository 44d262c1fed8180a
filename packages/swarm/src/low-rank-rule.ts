/**
 * The room's rank for each fragment's rounds in a low-rank room (docs/lowrank.md, "Adaptive
 * rank"): the coordinator names it in every round-open, so replicas agree. Rank 0 is a dense
 * round (the fragment's values, quantised as in any room).
 *
 * A fragment's first round is dense: its outer momentum, where the bases come from, is still zero.
 * After each round the participants report, per fragment, the relative error their error-fed Δ
 * would have had at each rank of the ladder up to the configured one (from a dense round too).
 * The next round takes the smallest rank whose median error is under the target (a step down
 * only below 90% of it, so the rank does not flap). Where even the rank in use misses it (by
 * reports that measured that rank), one rung up; past the configured rank, dense. With target 0 the rank is the configured one after
 * the first round. The median keeps a minority of liars from moving it.
 */
import { type LowRankSpec, lowRankRungs } from '@shoal/diloco';
import type { RunConfig } from '@shoal/protocol';
import { median } from './roster.ts';

/** A smaller rank is taken only when its median error is under this fraction of the target. */
const STEP_DOWN_MARGIN = 0.9;
/** The rank of a dense round. */
export const DENSE = 0;

export class AdaptiveRank {
  private readonly ranks: number[];
  private readonly rungs: number[];

  constructor(
    fragments: number,
    private readonly setting: NonNullable<RunConfig['diloco']['lowRank']>,
  ) {
    this.rungs = lowRankRungs(setting.rank);
    this.ranks = new Array<number>(fragments).fill(DENSE);
  }

  /**
   * The low-rank spec of round `round` of fragment p (the side by the round's parity), or
   * undefined for a dense round.
   */
  spec(p: number, round: number): LowRankSpec | undefined {
    const rank = round === 1 ? DENSE : this.rank(p);
    return rank === DENSE ? undefined : { rank, side: round % 2 === 1 ? 'right' : 'left' };
  }

  /** Fragment p's rank for its next round (DENSE: its values as they are). */
  rank(p: number): number {
    return this.ranks[p] ?? DENSE;
  }

  /**
   * Moves fragment p's rank by the participants' reports of its last round: each an array of
   * errors at the ladder's ranks 1, 2, 4, … up to the configured one (or fewer). Reports that say
   * nothing are skipped.
   */
  observe(p: number, reports: readonly (readonly number[])[]): void {
    const { target } = this.setting;
    if (target === 0) {
      this.ranks[p] = this.setting.rank;
      return;
    }
    const usable = reports.filter((r) => r.length > 0);
    if (usable.length === 0) return;
    const current = this.rank(p);
    const level = current === DENSE ? this.rungs.length : this.rungs.indexOf(current);
    let chosen: number | null = null;
    for (const [k, rung] of this.rungs.entries()) {
      if (k > level) break;
      const errors = usable.flatMap((r) => (r[k] === undefined ? [] : [r[k] as number]));
      if (errors.length === 0) break;
      if (median(errors) <= (k < level ? STEP_DOWN_MARGIN * target : target)) {
        chosen = rung;
        break;
      }
    }
    if (chosen !== null) {
      this.ranks[p] = chosen;
      return;
    }
    // up only on reports that measured the rank in use: reports of an earlier round at a lower
    // rank (the next open came before they were renewed) say nothing about it
    if (current === DENSE || !usable.some((r) => r[level] !== undefined)) return;
    this.ranks[p] = this.rungs[level + 1] ?? DENSE;
  }
}
