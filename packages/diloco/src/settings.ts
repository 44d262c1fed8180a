/**
 * The defaults and ranges of the Streaming DiLoCo settings a room chooses, defined once: the run
 * options (`shoal host`, `shoal simulate`, the host form) take their defaults and bounds from here,
 * the wire's schema refuses a room whose settings fall outside them, and the outer optimizer
 * (outer.ts) checks its arguments against them.
 */
import { LOW_RANK_TARGET } from './lowrank/fragment.ts';

export interface SettingRange {
  readonly default: number;
  readonly min: number;
  readonly max: number;
}

export const DILOCO_RANGES = {
  /** H: inner steps of the median worker between two rounds of one fragment. */
  innerSteps: { default: 50, min: 1, max: 100_000 },
  /** τ: inner steps between a contribution and the merge of its round. */
  overlap: { default: 2, min: 0, max: 10_000 },
  /** α: the share of θ_local kept at the merge. */
  alpha: { default: 0.5, min: 0, max: 1 },
  /** η, the outer learning rate: 0.7, DiLoCo's and Streaming DiLoCo's value for Nesterov. */
  outerLr: { default: 0.7, min: 1e-6, max: 10 },
  /** μ, the outer momentum: 0.9 as in DiLoCo; below 1, or the momentum never decays. */
  outerMomentum: { default: 0.9, min: 0, max: 0.999 },
  /** 1: DiLoCoX's one-step delay; 0: the merge at τ. */
  overlapRounds: { default: 0, min: 0, max: 1 },
  /** The relative error the adaptive low rank keeps under (0: the rank stays fixed). */
  lowRankTarget: { default: LOW_RANK_TARGET, min: 0, max: 1 },
} as const satisfies Record<string, SettingRange>;

/** Whether `value` is a finite number within `range`. */
export function inRange(value: number, range: SettingRange): boolean {
  return Number.isFinite(value) && value >= range.min && value <= range.max;
}
