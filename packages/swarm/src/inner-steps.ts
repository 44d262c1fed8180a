/**
 * H from measured speed: the inner steps between two rounds of one fragment, picked so that a
 * new room commits its first round soon after Start. Fragment 0's first round opens when the
 * median worker has done H steps (coordinator.ts: fragment p at H + ⌊p·H/P⌋), so the first
 * commit comes H step times after Start, plus the round's own exchange. A room that shows
 * nothing for minutes looks broken; one that syncs every few steps spends its time on the
 * network. A leaf module: the dashboard's main thread reads it without the swarm.
 *
 *   innerStepsFor({ stepMs: 120 })  // 250: about 30 s of steps at 120 ms a step
 */

/** Seconds of steps before the first round: well inside a minute, with room for the exchange. */
export const FIRST_ROUND_TARGET_S = 30;
/**
 * The range H is kept in: below 10 the outer step sees too little training per round (and the
 * rounds' bytes dominate); above 500 a fragment's θ_local drifts far from θ_global.
 */
export const INNER_STEPS_RANGE = { min: 10, max: 500 } as const;

/** The nice numbers H is rounded down to: 10, 15, 20, 25, 30, 40, 50, 60, 80, 100, 120, … */
const NICE = [1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8];

function niceFloor(value: number): number {
  const decade = 10 ** Math.floor(Math.log10(value));
  const mantissa = value / decade;
  const nice = NICE.findLast((n) => n <= mantissa + 1e-9) ?? 1;
  return Math.round(nice * decade);
}

export interface InnerStepsInput {
  /** Measured ms per inner step of a typical volunteer (the median, or the host's own probe). */
  stepMs: number;
  /** Seconds from Start to the first round's opening; default FIRST_ROUND_TARGET_S. */
  targetS?: number;
}

/**
 * H so that the first round opens about `targetS` after Start at `stepMs` a step: rounded down
 * to a nice number, within INNER_STEPS_RANGE. Null when the speed is unknown (not a finite
 * positive number): keep the form's H.
 */
export function innerStepsFor({ stepMs, targetS = FIRST_ROUND_TARGET_S }: InnerStepsInput): number | null {
  if (!Number.isFinite(stepMs) || stepMs <= 0) return null;
  const steps = (targetS * 1000) / stepMs;
  const { min, max } = INNER_STEPS_RANGE;
  return Math.min(max, Math.max(min, niceFloor(Math.max(1, steps))));
}
