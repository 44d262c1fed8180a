/**
 * The host's room form: the model (with its size) and the text in the open, every other run
 * option (@shoal/room/run-options: labels, help, ranges and the rules between fields) under
 * Advanced, prefilled from the URL query and checked as the person types. Above it, the rooms
 * this browser hosted.
 */
import { decodeWeights, type GptConfig } from '@shoal/model';
import { ROOM_MODEL_DEFAULTS } from '@shoal/room/room-model-defaults';
import {
  checkRunOptions,
  parseRunOption,
  parseRunQuery,
  RUN_OPTION_DEFAULTS,
  RUN_OPTION_NAMES,
  RUN_OPTION_SECTIONS,
  RUN_OPTIONS,
  type RunOptionErrors,
  type RunOptionName,
  type RunOptionSection,
  type RunOptions,
  runQueryOf,
} from '@shoal/room/run-options';
import { useEffect, useMemo, useState } from 'react';
import { forgetRoom, listRooms, type RoomLinkRecord } from '../runtime/checkpoint-store.ts';
import type { CheckpointInfo } from '../runtime/messages.ts';
import { checkDatasetSpec, openRoomDataset } from '../runtime/packed-dataset.ts';
import { checkUploadedText, type RoomDataset, roomConfigOf, type UploadedText } from '../session/host-config.ts';
import { createRoom, type HostSession } from '../session/host-session.ts';
import { statusLabel } from '../session/room-link.ts';
import { fmt } from '../ui/parts.tsx';
import { presetChoice } from '../ui/RunConfigPanel.tsx';
import { useMeasuredInnerSteps } from './measured-h.ts';
import { PackedDatasetField } from './PackedDatasetField.tsx';
import {
  expectedVolunteers,
  formTokenBudget,
  type MadeRecommendation,
  type RecommendFields,
  RecommendSettings,
  recommendation,
} from './RecommendSettings.tsx';
import { scheduleTimeText } from './schedule-time.ts';
import { endedBySchedule } from './train-on.ts';

// Short labels, so the model, the text and Create fit a phone's first screen; the chosen one's
// hint follows the choices.
const DATASETS = [
  { value: 'moby-dick', label: 'Moby Dick (1.2 MB)', hint: 'Served by this server to every volunteer.' },
  { value: 'upload', label: 'Your own text file (≤ 64 MiB)', hint: null },
  {
    value: 'packed',
    label: 'A packed dataset, by URL',
    hint: 'Any size, packed with shoal data pack; each volunteer fetches only its own shards.',
  },
] as const;
type DatasetChoice = (typeof DATASETS)[number]['value'];

/** The options under Advanced, by section, in the table's order. */
const ADVANCED = (Object.keys(RUN_OPTION_SECTIONS) as RunOptionSection[])
  .filter((section) => section !== 'basic')
  .map((section) => ({
    section,
    names: RUN_OPTION_NAMES.filter((name) => RUN_OPTIONS[name].section === section),
  }));

const isAdvanced = (name: RunOptionName) => RUN_OPTIONS[name].section !== 'basic';

/**
 * Each field's error as the form shows it: the text's own (not a number, out of range) first,
 * then the rules between fields on the values as they stand (checkRunOptions), so an error
 * appears beside the field to change while the person types.
 */
export function formErrors(values: RunOptions, typed: RunOptionErrors, model?: GptConfig): RunOptionErrors {
  const rules = checkRunOptions(values, model);
  const errors: RunOptionErrors = {};
  for (const name of RUN_OPTION_NAMES) {
    const error = typed[name] ?? rules[name];
    if (error !== undefined) errors[name] = error;
  }
  return errors;
}

export function RoomForm({ onCreated }: { onCreated: (session: HostSession) => void }) {
  const [{ values: initial, errors: queryErrors }] = useState(() => parseRunQuery(location.search));
  const [values, setValues] = useState<RunOptions>(initial);
  // a field whose query value was refused shows that value beside its error, to be corrected
  const [raw, setRaw] = useState<Record<string, string>>(() => {
    const query = new URLSearchParams(location.search);
    return Object.fromEntries(
      RUN_OPTION_NAMES.map((name) => [name, (queryErrors[name] && query.get(name)) || String(initial[name])]),
    );
  });
  const [typedErrors, setTypedErrors] = useState<RunOptionErrors>(queryErrors);
  const [checkpoint, setCheckpoint] = useState<{ name: string; params: Float32Array; model: GptConfig } | null>(null);
  const errors = useMemo(() => formErrors(values, typedErrors, checkpoint?.model), [values, typedErrors, checkpoint]);
  const [dataset, setDataset] = useState<DatasetChoice>('moby-dick');
  const [datasetUrl, setDatasetUrl] = useState('');
  // the last attempt to open the dataset's manifest failed: why (cleared when the URL changes)
  const [datasetProblem, setDatasetProblem] = useState<string | undefined>();
  const [text, setText] = useState<UploadedText | null>(null);
  // checked again when the sequence length changes (both splits must hold one window), not on
  // every keystroke: the UTF-8 check reads the whole file
  const uploadError = useMemo(() => (text ? checkUploadedText(text, values.seq) : undefined), [text, values.seq]);
  const textError =
    dataset === 'packed'
      ? (checkDatasetSpec(datasetUrl) ?? datasetProblem)
      : dataset !== 'upload'
        ? undefined
        : text
          ? uploadError
          : 'Choose a text file to upload.';
  const [busy, setBusy] = useState(false);
  const [problem, setProblem] = useState<string | null>(null);
  const [recommendFields, setRecommendFields] = useState(
    () => Object.fromEntries(Object.entries(ROOM_MODEL_DEFAULTS).map(([k, v]) => [k, String(v)])) as RecommendFields,
  );
  const [recommended, setRecommended] = useState<MadeRecommendation | null>(null);
  // Advanced opens by itself for what the person must see there: a value the link set, or an error
  const [advancedOpen, setAdvancedOpen] = useState(() =>
    RUN_OPTION_NAMES.some(
      (name) => isAdvanced(name) && (queryErrors[name] || initial[name] !== RUN_OPTION_DEFAULTS[name]),
    ),
  );
  const advancedWrong = RUN_OPTION_NAMES.filter((name) => isAdvanced(name) && errors[name]);
  const advancedWrongKey = advancedWrong.join();
  useEffect(() => {
    if (advancedWrongKey) setAdvancedOpen(true);
  }, [advancedWrongKey]);

  // H from this browser's speed until the link or the person sets it (measured-h.ts)
  const [autoH, setAutoH] = useState(() => !new URLSearchParams(location.search).has('innerSteps'));
  // measured whatever sets H: the schedule's duration needs the speed too
  const measured = useMeasuredInnerSteps(values, checkpoint === null);
  const measuredH = autoH ? measured : null;
  useEffect(() => {
    if (!measuredH) return;
    const text = String(measuredH.innerSteps);
    setRaw((r) => ({ ...r, innerSteps: text }));
    setTypedErrors((e) => ({ ...e, innerSteps: undefined }));
    setValues((v) => ({ ...v, innerSteps: measuredH.innerSteps }));
  }, [measuredH]);
  const update = (name: RunOptionName, text: string) => {
    if (name === 'innerSteps') setAutoH(false);
    setRaw((r) => ({ ...r, [name]: text }));
    const { value, error } = parseRunOption(name, text);
    setTypedErrors((e) => ({ ...e, [name]: error }));
    if (error === undefined) setValues((v) => ({ ...v, [name]: value }));
  };
  const recommend = () => {
    const result = recommendation(values.preset, recommendFields, values);
    setRecommended({ preset: values.preset, fields: recommendFields, result });
    if ('options' in result) {
      for (const [name, value] of Object.entries(result.options)) update(name as RunOptionName, String(value));
    }
  };
  // a refused choice in the query falls back to the default, which the select shows: not a blocker
  const blocking = RUN_OPTION_NAMES.filter(
    (name) => errors[name] && !(RUN_OPTIONS[name].kind === 'choice' && typedErrors[name]),
  );
  const invalid = blocking.length > 0 || textError !== undefined;
  useEffect(() => {
    if (blocking.length === 0) history.replaceState(null, '', `/host${runQueryOf(values)}`);
  }, [values, blocking.length]);

  const create = async () => {
    setProblem(null);
    setBusy(true);
    try {
      const upload = dataset === 'upload' && text ? text : undefined;
      let packed: RoomDataset | undefined;
      if (dataset === 'packed') {
        try {
          packed = await openRoomDataset(datasetUrl, location.origin);
        } catch (error) {
          // said beside the URL, which the person changes next
          setDatasetProblem((error as Error).message);
          setBusy(false);
          return;
        }
      }
      const config = roomConfigOf(values, checkpoint?.model, upload, packed);
      // copies: the worker takes the buffers, the form keeps its own
      const corpus = upload ? { name: config.data.corpus, bytes: upload.bytes.slice() } : null;
      onCreated(await createRoom(config, checkpoint ? checkpoint.params.slice() : null, corpus));
    } catch (error) {
      setProblem((error as Error).message);
      setBusy(false);
    }
  };
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
          {measuredH && (
            <p className="span-2 muted" data-testid="measured-h">
              {RUN_OPTIONS.innerSteps.label}: {measuredH.innerSteps}, so the first round opens after about{' '}
              {Math.max(1, Math.round((measuredH.innerSteps * measuredH.stepMs) / 1000))} s of training, a few seconds
              more after Start while the volunteers load the model and the text (this browser trains this model at{' '}
              {Math.round(measuredH.stepMs)} ms a step on its {measuredH.engine === 'cpu' ? 'CPU' : 'GPU'}; volunteers'
              speeds vary).
            </p>
          )}
          <fieldset className="span-2 field dataset" data-testid="dataset-choice">
            <legend>Text to train on</legend>
            {DATASETS.map(({ value, label }) => (
              <label className="inline" key={value}>
                <input
                  type="radio"
                  name="dataset"
                  value={value}
                  checked={dataset === value}
                  onChange={() => setDataset(value)}
                />
                {label}
              </label>
            ))}
            {DATASETS.map(({ value, hint }) =>
              value === dataset && hint ? (
                <small className="muted" key={value}>
                  {hint}
                </small>
              ) : null,
            )}
            {dataset === 'packed' && (
              <PackedDatasetField
                url={datasetUrl}
                error={textError}
                onChange={(url) => {
                  setDatasetUrl(url);
                  setDatasetProblem(undefined);
                }}
              />
            )}
            {dataset === 'upload' && (
              <input
                type="file"
                accept=".txt,.md,.csv,.json,.xml,.html,text/*"
                data-testid="dataset-file"
                aria-label="The text file"
                aria-invalid={text !== null && textError !== undefined}
                onChange={async (e) => {
                  const file = e.target.files?.[0];
                  setText(file ? { name: file.name, bytes: new Uint8Array(await file.arrayBuffer()) } : null);
                }}
              />
            )}
            {dataset === 'upload' &&
              (text && textError ? (
                <small className="field-error">{textError}</small>
              ) : (
                <small className="muted">
                  {text
                    ? `${text.name}: ${fmt.bytes(text.bytes.length)}; the last 10% is held out for validation. It stays in this browser and is sent only to the room’s volunteers.`
                    : 'UTF-8; volunteers receive it from this page over the mesh. The model reads bytes: any language, code or prose. The last 10% is held out for validation.'}
                </small>
              ))}
          </fieldset>
        </div>
        <details
          className="advanced"
          data-testid="advanced"
          open={advancedOpen}
          onToggle={(e) => setAdvancedOpen(e.currentTarget.open)}
        >
          <summary>
            Advanced: rounds, learning rates, the wire, a pipeline, a starting checkpoint
            {advancedWrong.length > 0 && (
              <span className="field-error">
                {' '}
                ({advancedWrong.length} to correct: {advancedWrong.map((name) => RUN_OPTIONS[name].label).join(', ')})
              </span>
            )}
          </summary>
          <p className="small muted">
            The defaults suit a first room. Each setting says what it does; docs/cli.md has the same options as{' '}
            <code>shoal host</code> flags.
          </p>
          {ADVANCED.map(({ section, names }) => (
            <fieldset key={section} className="form-grid options">
              <legend>{RUN_OPTION_SECTIONS[section]}</legend>
              {names.map(field)}
            </fieldset>
          ))}
          <div className="form-grid options">
            <div className="field span-2">
              <label htmlFor="run-checkpoint">Start from a checkpoint (optional)</label>
              <input
                id="run-checkpoint"
                type="file"
                accept=".safetensors"
                aria-describedby="run-checkpoint-help"
                onChange={async (e) => {
                  const file = e.target.files?.[0];
                  if (!file) return setCheckpoint(null);
                  try {
                    const { config, params } = decodeWeights(new Uint8Array(await file.arrayBuffer()));
                    setCheckpoint({ name: file.name, params, model: config });
                    setProblem(null);
                  } catch (error) {
                    setCheckpoint(null);
                    setProblem(`${file.name}: ${(error as Error).message}`);
                  }
                }}
              />
              <small id="run-checkpoint-help" className="muted">
                {checkpoint
                  ? `${checkpoint.name}: ${checkpoint.model.nLayer} layers × ${checkpoint.model.nEmbd}, replaces the model choice`
                  : 'The model starts from these weights (safetensors, nanoGPT names) instead of a fresh initialisation.'}
              </small>
            </div>
            <RecommendSettings
              preset={values.preset}
              fields={recommendFields}
              onField={(name, text) => setRecommendFields((r) => ({ ...r, [name]: text }))}
              budget={formTokenBudget(values, recommendFields.workers)}
              made={recommended}
              checkpoint={checkpoint !== null}
              onRecommend={recommend}
            />
          </div>
        </details>
        <div className="actions">
          <button type="submit" className="primary" disabled={invalid || busy} aria-describedby="create-problem">
            {busy ? 'Creating…' : 'Create room'}
          </button>
          <span id="create-problem" className="field-error" role={problem ? 'alert' : undefined}>
            {problem ??
              (blocking.length > 0
                ? `Correct ${blocking.map((name) => RUN_OPTIONS[name].label).join(', ')} first.`
                : (dataset === 'upload' && !text) || (dataset === 'packed' && !datasetProblem)
                  ? textError
                  : '')}
          </span>
        </div>
        <p className="small muted" data-testid="schedule-time">
          {checkpoint
            ? `How long ${values.steps.toLocaleString('en-US')} schedule steps take is not measured for a checkpoint’s model.`
            : scheduleTimeText({
                steps: values.steps,
                tokensPerStep: values.batch * values.seq,
                stepMs: measured?.stepMs ?? null,
                engine: measured?.engine ?? null,
                volunteers: expectedVolunteers(recommendFields.workers),
              })}{' '}
          {RUN_OPTIONS.steps.label} is under Advanced.
        </p>
      </form>
    </>
  );
}

/**
 * One run option: its label, the control (a select, or a text field with the phone's numeric
 * keypad), its help always, and an error under the help; both describe the control.
 */
export function RunField(props: {
  name: RunOptionName;
  value: string;
  error: string | undefined;
  disabled?: boolean;
  onChange: (text: string) => void;
}) {
  const { name, value, error } = props;
  const spec = RUN_OPTIONS[name];
  const id = `run-${name}`;
  const described = error ? `${id}-help ${id}-error` : `${id}-help`;
  return (
    // the model's choices name its size ("nano — 121k parameters, 2 layers × 64 wide…"): a whole row
    <div className={name === 'preset' ? 'field span-2' : 'field'} data-testid={`field-${name}`}>
      <label htmlFor={id}>{spec.label}</label>
      {spec.kind === 'choice' ? (
        <select
          id={id}
          name={name}
          value={value}
          aria-invalid={Boolean(error)}
          aria-describedby={described}
          onChange={(e) => props.onChange(e.target.value)}
          disabled={props.disabled}
        >
          {spec.choices.map((choice) => (
            <option key={choice} value={choice}>
              {name === 'preset' ? presetChoice(choice) : choice}
            </option>
          ))}
        </select>
      ) : (
        <input
          id={id}
          name={name}
          type="text"
          inputMode={spec.kind === 'integer' ? 'numeric' : 'decimal'}
          // whole numbers: iOS shows its digit pad for this pattern; decimals may be written 3e-4
          pattern={spec.kind === 'integer' ? '[0-9]*' : undefined}
          autoComplete="off"
          value={value}
          aria-invalid={Boolean(error)}
          aria-describedby={described}
          onChange={(e) => props.onChange(e.target.value)}
        />
      )}
      <small id={`${id}-help`} className="muted">
        {spec.help}
      </small>
      {error && (
        <small id={`${id}-error`} className="field-error">
          {error}
        </small>
      )}
    </div>
  );
}

/**
 * The rooms this browser hosted: one row each, its status, when it was created, Resume (a room its
 * schedule ended: train on in a new room, or open it) and Forget.
 */
function HostedRooms({ onProblem }: { onProblem: (problem: string) => void }) {
  const [rooms, setRooms] = useState<{ link: RoomLinkRecord; info: CheckpointInfo | null }[]>([]);
  useEffect(() => {
    listRooms().then(setRooms, () => setRooms([]));
  }, []);
  const forget = async (roomId: string) => {
    if (!confirm(`Forget room ${roomId}? Its checkpoint, text and host key are deleted from this browser.`)) return;
    try {
      await forgetRoom(roomId);
      setRooms((all) => all.filter(({ link }) => link.roomId !== roomId));
    } catch (error) {
      onProblem(`Could not forget ${roomId}: ${(error as Error).message}`);
    }
  };
  if (rooms.length === 0) return null;
  return (
    <section className="card" aria-labelledby="hosted-rooms-title">
      <h2 id="hosted-rooms-title">Rooms hosted from this browser</h2>
      <div className="table-scroll">
        <table className="grid hosted-rooms" data-testid="hosted-rooms">
          <thead>
            <tr>
              <th scope="col">Room</th>
              <th scope="col">Status</th>
              <th scope="col">Created</th>
              <th scope="col">Checkpoint</th>
              <th scope="col">
                <span className="visually-hidden">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {rooms.map(({ link, info }) => (
              <tr key={link.roomId}>
                <th scope="row" className="mono">
                  {link.roomId}
                </th>
                <td>
                  <span className={`status ${link.status}`}>
                    {endedBySchedule(link, info) ? 'schedule done' : statusLabel[link.status]}
                  </span>
                </td>
                <td>{new Date(link.createdAt).toLocaleString()}</td>
                <td>
                  {info
                    ? `step ${fmt.count(info.step)}, saved ${new Date(info.savedAt).toLocaleString()}`
                    : 'none yet: it is written after the first round'}
                </td>
                <td className="row-actions">
                  {info && endedBySchedule(link, info) ? (
                    <>
                      <a
                        href={`/host?trainOn=${encodeURIComponent(link.roomId)}`}
                        aria-label={`Train on from room ${link.roomId}’s checkpoint in a new room`}
                      >
                        Train on from this checkpoint in a new room
                      </a>{' '}
                      <a href={`/host/${encodeURIComponent(link.roomId)}`} aria-label={`Open room ${link.roomId}`}>
                        Open
                      </a>
                    </>
                  ) : (
                    info && (
                      <a href={`/host/${encodeURIComponent(link.roomId)}`} aria-label={`Resume room ${link.roomId}`}>
                        Resume
                      </a>
                    )
                  )}{' '}
                  <button
                    type="button"
                    className="link small"
                    aria-label={`Forget room ${link.roomId}`}
                    title="delete this room's checkpoint and link from this browser"
                    onClick={() => void forget(link.roomId)}
                  >
                    Forget
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </section>
  );
}
