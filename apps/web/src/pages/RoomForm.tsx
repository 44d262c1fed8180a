/**
 * The host's room form: the model (with its size) and the text in the open, every other run
 * option (@shoal/room/run-options: labels, help, ranges and the rules between fields) under
 * Advanced, prefilled from the URL query and checked as the person types. Above it, the rooms
 * this browser hosted.
 */
import { ROOM_MODEL_DEFAULTS } from '@shoal/room/room-model-defaults';
import { RUN_OPTION_NAMES, RUN_OPTIONS, type RunOptionName } from '@shoal/room/run-options';
import { useState } from 'react';
import type { HostSession } from '../session/host-session.ts';
import { AdvancedOptions, isAdvanced, useAdvancedOpen } from './AdvancedOptions.tsx';
import { CheckpointField, type StartingCheckpoint } from './CheckpointField.tsx';
import { type DatasetChoice, DatasetFieldset, useDatasetChoice } from './DatasetChoice.tsx';
import { HostedRooms } from './HostedRooms.tsx';
import {
  expectedVolunteers,
  formTokenBudget,
  type MadeRecommendation,
  type RecommendFields,
  RecommendSettings,
  recommendation,
} from './RecommendSettings.tsx';
import { MeasuredH, ScheduleTime } from './RoomFormNotes.tsx';
import { RunField } from './RunField.tsx';
import { useCreateRoom } from './use-create-room.ts';
import { useRunOptions } from './use-run-options.ts';

/** What the form says beside Create: the problem that stopped it, else the fields to correct, else the text's. */
function createProblemText(
  problem: string | null,
  blocking: RunOptionName[],
  dataset: DatasetChoice,
): string | undefined {
  if (problem !== null) return problem;
  if (blocking.length > 0) return `Correct ${blocking.map((name) => RUN_OPTIONS[name].label).join(', ')} first.`;
  const unchosen = (dataset.kind === 'upload' && !dataset.text) || (dataset.kind === 'packed' && !dataset.problem);
  return unchosen ? dataset.error : '';
}

export function RoomForm({ onCreated }: { onCreated: (session: HostSession) => void }) {
  const [checkpoint, setCheckpoint] = useState<StartingCheckpoint | null>(null);
  const options = useRunOptions(checkpoint?.model);
  const { values, raw, errors, blocking, update } = options;
  const dataset = useDatasetChoice(values.seq);
  const { busy, problem, setProblem, create } = useCreateRoom(values, checkpoint, dataset, onCreated);
  const [recommendFields, setRecommendFields] = useState(
    () => Object.fromEntries(Object.entries(ROOM_MODEL_DEFAULTS).map(([k, v]) => [k, String(v)])) as RecommendFields,
  );
  const [recommended, setRecommended] = useState<MadeRecommendation | null>(null);
  const advanced = useAdvancedOpen(options.initial, options.queryErrors, errors);

  const recommend = () => {
    const result = recommendation(values.preset, recommendFields, values);
    setRecommended({ preset: values.preset, fields: recommendFields, result });
    if ('options' in result) {
      for (const [name, value] of Object.entries(result.options)) update(name as RunOptionName, String(value));
    }
  };
  const invalid = blocking.length > 0 || dataset.error !== undefined;
  const field = (name: RunOptionName) => (
    <RunField
      key={name}
      name={name}
      value={RUN_OPTIONS[name].kind === 'choice' ? String(values[name]) : (raw[name] ?? '')}
      error={errors[name]}
      disabled={name === 'preset' && checkpoint !== null}
      onChange={(text) => update(name, text)}
    />
  );

  return (
    <>
      <h1>Host a training room</h1>
      <p className="lede">
        Pick the model and the text, create the room, share its link. Volunteers who open it train the model in their
        browsers; this page coordinates them, measures the model's validation loss and keeps checkpoints.
      </p>
      <HostedRooms onProblem={setProblem} />
      <form
        className="card room-form"
        data-testid="room-form"
        noValidate
        onSubmit={(event) => {
          event.preventDefault();
          if (!invalid && !busy) void create();
        }}
      >
        <div className="form-grid">
          {RUN_OPTION_NAMES.filter((name) => !isAdvanced(name)).map(field)}
          {options.measuredH && <MeasuredH measured={options.measuredH} />}
          <DatasetFieldset dataset={dataset} />
        </div>
        <AdvancedOptions open={advanced.open} onToggle={advanced.setOpen} wrong={advanced.wrong} field={field}>
          <CheckpointField checkpoint={checkpoint} onCheckpoint={setCheckpoint} onProblem={setProblem} />
          <RecommendSettings
            preset={values.preset}
            fields={recommendFields}
            onField={(name, text) => setRecommendFields((r) => ({ ...r, [name]: text }))}
            budget={formTokenBudget(values, recommendFields.workers)}
            made={recommended}
            checkpoint={checkpoint !== null}
            onRecommend={recommend}
          />
        </AdvancedOptions>
        <div className="actions">
          <button type="submit" className="primary" disabled={invalid || busy} aria-describedby="create-problem">
            {busy ? 'Creating…' : 'Create room'}
          </button>
          <span id="create-problem" className="field-error" role={problem ? 'alert' : undefined}>
            {createProblemText(problem, blocking, dataset)}
          </span>
        </div>
        <ScheduleTime
          values={values}
          measured={options.measured}
          volunteers={expectedVolunteers(recommendFields.workers)}
          fromCheckpoint={checkpoint !== null}
        />
      </form>
    </>
  );
}
