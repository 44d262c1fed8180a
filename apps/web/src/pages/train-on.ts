/**
 * Training on from a finished room: whether its schedule ended it (then it is offered "train on
 * in a new room" rather than Resume, which would stop again at once), the new schedule's length
 * the form proposes and accepts, and what lengthening the schedule does to the learning rate.
 */
import type { RoomLinkRecord } from '../runtime/checkpoint-store.ts';
import type { CheckpointInfo } from '../runtime/messages.ts';

/**
 * The room stopped because its schedule ended: its record says so, or (a record from before it
 * said why) its checkpoint is at the end of its schedule.
 */
export function endedBySchedule(
  link: Pick<RoomLinkRecord, 'status' | 'endedBy'>,
  info: Pick<CheckpointInfo, 'step' | 'totalSteps'> | null,
): boolean {
  if (link.status !== 'stopped') return false;
  if (link.endedBy) return link.endedBy === 'schedule';
  return info?.totalSteps !== undefined && info.step >= info.totalSteps;
}

/** The new schedule the form proposes: twice the finished one, and always past the saved step. */
export function proposedScheduleSteps(info: Pick<CheckpointInfo, 'step' | 'totalSteps'>): number {
  return Math.max(info.step + 1, 2 * (info.totalSteps ?? info.step));
}

/** The typed schedule length, or why it cannot be: a whole number past the checkpoint's step. */
export function parseScheduleSteps(
  text: string,
  info: Pick<CheckpointInfo, 'step'>,
): { steps: number } | { error: string } {
  const steps = Number(text);
  if (text.trim() === '' || !Number.isInteger(steps)) return { error: 'A whole number of steps.' };
  if (steps <= info.step) {
    return { error: `More than ${info.step.toLocaleString('en-US')}: the checkpoint is at that step already.` };
  }
  if (steps > 10_000_000) return { error: 'At most 10,000,000 steps.' };
  return { steps };
}

/** What training on does to the schedule, in words. */
export function trainOnText(info: Pick<CheckpointInfo, 'step' | 'totalSteps'>, steps: number): string {
  const at = info.step.toLocaleString('en-US');
  const before = info.totalSteps === undefined ? '' : ` (it was ${info.totalSteps.toLocaleString('en-US')})`;
  return (
    `The room goes on from step ${at} on a schedule of ${steps.toLocaleString('en-US')} steps${before}: ` +
    `the learning rate rises again to the cosine's value at step ${at} of ${steps.toLocaleString('en-US')} ` +
    'and decays to its final value by the new last step. The step, the tokens and the rounds go on from the checkpoint.'
  );
}
