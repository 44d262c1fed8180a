/**
 * How long the host form's schedule will take, from this browser's measured step time (the
 * engine probe's, measured-h.ts). The room's step is its median volunteer's place on the
 * schedule, so the run lasts about Schedule steps × one volunteer's step time whatever the number
 * of volunteers: more volunteers train more tokens in that time, not a shorter schedule.
 */
import { formatSi } from '../charts/format.ts';
import { aboutTime } from '../ui/room-progress.ts';

export interface ScheduleTimeInput {
  steps: number;
  /** Tokens per volunteer per step: batch × sequence. */
  tokensPerStep: number;
  /** This browser's ms per step on the form's model; null while not measured (or not measurable). */
  stepMs: number | null;
  engine: 'cpu' | 'webgpu' | null;
  /** The expected volunteers (Recommend's field); null when it is not a whole number ≥ 1. */
  volunteers: number | null;
}

/** The schedule's duration in words, per volunteer and with the expected volunteers. */
export function scheduleTimeText(input: ScheduleTimeInput): string {
  const steps = `${input.steps.toLocaleString('en-US')} schedule steps`;
  if (input.stepMs === null) {
    return `How long ${steps} take is not known yet: it is measured from this browser’s speed on this model.`;
  }
  const processor = input.engine === 'cpu' ? 'CPU' : 'GPU';
  const per = `${steps} take about ${aboutTime(input.steps * input.stepMs).slice(1)} on a volunteer as fast as this browser (${Math.round(input.stepMs)} ms a step on its ${processor}), plus the rounds’ waits`;
  if (input.volunteers === null) return `${per}.`;
  const tokens = formatSi(input.steps * input.tokensPerStep * input.volunteers);
  return `${per}; with ${input.volunteers} such volunteers as long, and ${tokens} tokens trained.`;
}
