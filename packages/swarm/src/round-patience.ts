/**
 * How long a worker trains on past a due round, and past a due merge, before it waits
 * (docs/design.md, "Bounded staleness"): τ steps after a contribution, stretched by a slack from
 * the step times a round-open carries (so that faster workers do not idle while slower ones
 * finish their steps), never past H; and a round open far longer than its recent ones counts as
 * stuck, not waited for.
 */
import type { RoundOpenMessage } from '@shoal/protocol';
import type { DilocoSettings } from './config.ts';
import { median } from './roster.ts';

/** Step times within this ratio count as one pace (no slack between them). */
const EQUAL_PACE = 1.25;

/** Steps past its due merge, and past a due round, that a worker trains before it waits. */
export interface RoundSlack {
  merge: number;
  round: number;
}

/**
 * The slacks of participant `self` of `open`: a worker ρ times as fast as the median participant
 * trains H·(ρ − 1) steps past a due round before waiting for it (at most H·(weightCapFactor − 1));
 * one faster than the slowest participant trains past its due merge by that one's step in its own
 * steps (the slowest contributes at its next step boundary, so the round commits that much
 * later). Both are 0 in a room of equals (within 25%): there a merge lands exactly τ steps after
 * its contribution and a round carries exactly H steps.
 */
export function roundSlack(open: RoundOpenMessage, self: number, diloco: DilocoSettings): RoundSlack {
  const times = open.stepMs;
  const mine = times?.[self];
  if (!times || !mine) return { merge: 0, round: 0 };
  const { innerSteps: H, weightCapFactor } = diloco;
  const aboveMedian = median(times) / mine;
  const aboveSlowest = Math.max(...times) / mine;
  const round = aboveMedian < EQUAL_PACE ? 0 : Math.round(H * Math.min(weightCapFactor - 1, aboveMedian - 1));
  const merge = aboveSlowest < EQUAL_PACE ? 0 : Math.min(H, Math.ceil(aboveSlowest));
  return { merge, round };
}

/** τ plus the slack, below H (0 for τ = 0): steps after a due round at which its merge would be due. */
export function tauPatience(diloco: DilocoSettings, slack: number): number {
  const { overlap, innerSteps } = diloco;
  return overlap === 0 ? 0 : Math.min(innerSteps, overlap + slack);
}

/**
 * Steps after a contribution at which its merge is due: τ plus the slack, below H (0 for τ = 0);
 * H with the one-step delay, where the fragment's next round is due.
 */
export function mergePatience(diloco: DilocoSettings, slack: number): number {
  return diloco.overlapRounds === 1 ? diloco.innerSteps : tauPatience(diloco, slack);
}

/** A round open this many times as long as the median of its recent ones is stuck (see `stuck`). */
const STUCK_FACTOR = 3;
/** Recent round durations a worker keeps. */
const DURATIONS_KEPT = 8;

/** How long a worker's recent rounds took from open to commit, and so which open round is stuck. */
export class RoundDurations {
  /** Durations, ms (the newest last). */
  private readonly durations: number[] = [];

  /** A round committed `ms` after it opened. */
  record(ms: number): void {
    this.durations.push(ms);
    if (this.durations.length > DURATIONS_KEPT) this.durations.shift();
  }

  /**
   * A round open (since `openedAt`) for much longer than this worker's recent rounds took (a shard
   * owner withholding its result until the host referees it): the inner loop trains on past its
   * merge step, up to H, rather than let one member stall the room. Rounds slowed by the link are
   * all slow alike, so they are waited for, and the merge step stays τ.
   */
  stuck(openedAt: number, now: number): boolean {
    if (this.durations.length === 0) return false;
    return now - openedAt > STUCK_FACTOR * median(this.durations);
  }
}
