/**
 * The room's progress in words, from its figures (store.ts roomFiguresOf), the same on the
 * dashboard, the watch page and the volunteer page: the step of the schedule and the time left,
 * when the first round comes, each fragment's
 * countdown to its next round (ticking down from the view's estimate between views), a rising
 * validation loss, and why a run ended. Pure: the page passes the time.
 */
import type { RoomStatus, RoomViewEvalTrend, RoomViewNextRound } from '@shoal/protocol';
import { BITS_PER_BYTE, formatBitsPerByte, formatSi } from '../charts/format.ts';
import { statusLabel } from '../session/room-link.ts';
import type { RoomFigures } from '../store.ts';

/**
 * The room's status as its badge says it: a started room without a volunteer waits for one
 * rather than trains. `tone` is the status whose colour the badge takes.
 */
export function statusWords(status: RoomStatus, volunteers: number): { words: string; tone: RoomStatus } {
  if (status === 'running' && volunteers === 0) return { words: 'waiting for volunteers', tone: 'waiting' };
  return { words: statusLabel[status], tone: status };
}

/** "~40 s", "~3 min", "~2.5 h". */
export function aboutTime(ms: number): string {
  const s = Math.max(1, Math.round(ms / 1000));
  if (s < 90) return `~${s} s`;
  if (s < 90 * 60) return `~${Math.round(s / 60)} min`;
  const hours = s / 3600;
  return `~${hours < 10 ? hours.toFixed(1).replace(/\.0$/, '') : Math.round(hours)} h`;
}

/**
 * ms until the schedule's last step: the steps left at the median volunteer's measured step time
 * (the room's step is the median volunteer's place on the schedule), ticking down from `at` while
 * the room trains. Null while no speed is known or the page does not know the schedule; 0 once
 * the room stopped.
 */
export function timeLeftMs(figures: RoomFigures, now: number): number | null {
  if (figures.status === 'stopped') return 0;
  if (figures.totalSteps === null || figures.step === null || figures.stepMs === null) return null;
  const ms = Math.max(0, figures.totalSteps - figures.step) * figures.stepMs;
  if (figures.status !== 'running') return ms;
  return Math.max(0, ms - Math.max(0, now - (figures.at ?? now)));
}

/**
 * Where the run is, in one line: "Step 120 of 400 · 1.2M tokens · ~3 min left", with why the time
 * left is not known (no volunteer has trained yet) or does not run down (paused).
 */
export function progressText(figures: RoomFigures, now: number): string {
  const step = (figures.step ?? 0).toLocaleString('en-US');
  const of = figures.totalSteps === null ? '' : ` of ${figures.totalSteps.toLocaleString('en-US')}`;
  const tokens = figures.tokens === null ? '' : ` · ${formatSi(figures.tokens)} tokens`;
  const head = `Step ${step}${of}${tokens}`;
  if (figures.status === 'stopped') return `${head} · ended`;
  if (figures.totalSteps === null) return head;
  const left = timeLeftMs(figures, now);
  if (figures.status === 'paused')
    return `${head} · paused${left === null ? '' : ` (${aboutTime(left)} left at the last speed)`}`;
  if (figures.status === 'waiting') {
    return `${head} · ${left === null ? 'the time left is known once volunteers train' : `${aboutTime(left)} at the last speed, once started`}`;
  }
  if (figures.volunteers === 0) return `${head} · waiting for volunteers`;
  if (left === null) return `${head} · time left: measuring the volunteers’ speed…`;
  return left === 0 ? `${head} · finishing` : `${head} · ${aboutTime(left)} left`;
}

/** ms left of a round's estimate made at `at` (epoch ms), at `now`; null without an estimate. */
export function remainingMs(next: RoomViewNextRound, at: number | null, now: number): number | null {
  if (next.etaMs === null) return null;
  return Math.max(0, next.etaMs - Math.max(0, now - (at ?? now)));
}

/** The fragment whose round comes first (an open one first of all). */
function soonest(rounds: readonly RoomViewNextRound[]): RoomViewNextRound | undefined {
  return [...rounds].sort((a, b) => Number(b.open) - Number(a.open) || a.steps - b.steps)[0];
}

/** Before the first commit: when it comes. Null once a round committed, or when nothing is known. */
export function firstRoundText(figures: RoomFigures, now: number): string | null {
  if ((figures.roundsCommitted ?? 0) > 0 || figures.status === 'stopped') return null;
  const next = soonest(figures.nextRounds);
  if (!next) return null;
  if (next.open) return 'First round open: the volunteers are exchanging their updates…';
  if (figures.status === 'waiting') return `First round ~${next.steps} steps after Start.`;
  if (figures.status === 'paused') return `First round ~${next.steps} steps after the room resumes.`;
  const left = remainingMs(next, figures.at, now);
  if (left === null) return `First round in ~${next.steps} steps (the volunteers’ speed is not known yet).`;
  return left === 0 ? 'First round due now.' : `First round in ~${next.steps} steps (${aboutTime(left)}).`;
}

/** A fragment's countdown: "round 4 in ~12 s", "round 4 open", "round 4 in ~30 steps". */
export function countdownText(next: RoomViewNextRound, at: number | null, now: number): string {
  if (next.open) return `round ${next.round} open`;
  const left = remainingMs(next, at, now);
  if (left === null) return `round ${next.round} in ~${next.steps} steps`;
  return left === 0 ? `round ${next.round} due` : `round ${next.round} in ${aboutTime(left)}`;
}

/** A rising validation loss (the trend is in nats), in words and bits per byte; null while it is not rising. */
export function risingText(trend: RoomViewEvalTrend | null): string | null {
  if (!trend?.rising) return null;
  const bits = `${formatBitsPerByte(trend.best, 2)} → ${formatBitsPerByte(trend.latest, 2)} ${BITS_PER_BYTE}`;
  const nats = `${trend.best.toFixed(2)} → ${trend.latest.toFixed(2)} nats`;
  return `Validation loss is rising: ${bits} (${nats}) since step ${trend.bestStep.toLocaleString('en-US')} — the model may be overfitting this text.`;
}

/** Why a stopped run ended; null while it runs. */
export function endText(figures: RoomFigures): string | null {
  if (figures.status !== 'stopped') return null;
  if (figures.endedBy === 'schedule') {
    const done =
      figures.totalSteps === null ? 'is done' : `’s ${figures.totalSteps.toLocaleString('en-US')} steps are done`;
    return `The learning-rate schedule${done}: the run stopped by itself.`;
  }
  return 'The host stopped the run.';
}
