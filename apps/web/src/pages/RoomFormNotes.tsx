/**
 * The room form's notes on time: the H measured on this browser and when the first round opens
 * with it, and how long the schedule takes.
 */
import { RUN_OPTIONS, type RunOptions } from '@shoal/room/run-options';
import type { MeasuredInnerSteps } from './measured-h.ts';
import { scheduleTimeText } from './schedule-time.ts';

/** H as measured here: when the first round opens with it, and the speed it was measured at. */
export function MeasuredH({ measured }: { measured: MeasuredInnerSteps }) {
  return (
    <p className="span-2 muted" data-testid="measured-h">
      {RUN_OPTIONS.innerSteps.label}: {measured.innerSteps}, so the first round opens after about{' '}
      {Math.max(1, Math.round((measured.innerSteps * measured.stepMs) / 1000))} s of training, a few seconds more after
      Start while the volunteers load the model and the text (this browser trains this model at{' '}
      {Math.round(measured.stepMs)} ms a step on its {measured.engine === 'cpu' ? 'CPU' : 'GPU'}; volunteers' speeds
      vary).
    </p>
  );
}

/**
 * How long the schedule's steps take at this browser's speed (`measured`), with `volunteers`
 * expected; not measured for a checkpoint's model.
 */
export function ScheduleTime(props: {
  values: RunOptions;
  measured: MeasuredInnerSteps | null;
  volunteers: number | null;
  fromCheckpoint: boolean;
}) {
  const { values, measured } = props;
  return (
    <p className="small muted" data-testid="schedule-time">
      {props.fromCheckpoint
        ? `How long ${values.steps.toLocaleString('en-US')} schedule steps take is not measured for a checkpoint’s model.`
        : scheduleTimeText({
            steps: values.steps,
            tokensPerStep: values.batch * values.seq,
            stepMs: measured?.stepMs ?? null,
            engine: measured?.engine ?? null,
            volunteers: props.volunteers,
          })}{' '}
      {RUN_OPTIONS.steps.label} is under Advanced.
    </p>
  );
}
