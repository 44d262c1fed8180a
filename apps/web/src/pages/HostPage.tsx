/**
 * The host dashboard: the room form (prefilled from the URL query), then the room: links,
 * Start / pause / stop, the numbers, charts and tables, checkpoints and sampling.
 */
import { decodeWeights, type GptConfig } from '@shoal/model';
import { ROOM_MODEL_DEFAULTS } from '@shoal/swarm/room-model-defaults';
import {
  parseRunOption,
  parseRunQuery,
  RUN_OPTION_NAMES,
  RUN_OPTIONS,
  type RunOptionErrors,
  type RunOptionName,
  type RunOptions,
  runQueryOf,
} from '@shoal/swarm/run-options';
import { lazy, Suspense, useEffect, useMemo, useRef, useState } from 'react';
import { useStore } from 'zustand';
import { useShallow } from 'zustand/shallow';
import { forgetRoom, listRooms, type RoomLinkRecord } from '../runtime/checkpoint-store.ts';
import type { CheckpointInfo } from '../runtime/messages.ts';
import { checkUploadedText, roomConfigOf, type UploadedText } from '../session/host-config.ts';
import { createRoom, type HostSession, resumeRoom } from '../session/host-session.ts';
import { statusLabel } from '../session/room-link.ts';
import { store } from '../store.ts';
import { CopyField, DatasetLine, download, ErrorBox, fmt, Header } from '../ui/parts.tsx';
import { RoomNumbers, RoomPanels } from '../ui/RoomPanels.tsx';
import {
  formTokenBudget,
  type MadeRecommendation,
  type RecommendFields,
  RecommendSettings,
  recommendation,
} from './RecommendSettings.tsx';

// onnxruntime-web and the exporter load only when the host asks for text
const SamplePanel = lazy(() => import('../sampling/SamplePanel.tsx').then((m) => ({ default: m.SamplePanel })));

const DATASETS = [
  { value: 'moby-dick', label: 'Moby Dick: 1.2 MB of text, served by this server to every volunteer' },
  {
    value: 'upload',
    label: 'A text file of yours (UTF-8, up to 64 MiB): volunteers receive it from this page over the mesh',
  },
] as const;

export function HostPage({ roomId }: { roomId: string | null }) {
  const [session, setSession] = useState<HostSession | null>(null);
  const error = useStore(store, (state) => state.error);
  const resuming = useRef(false);
  useEffect(() => {
    if (!roomId || resuming.current) return;
    resuming.current = true;
    resumeRoom(roomId).then(setSession, (e: Error) => store.getState().setSession({ role: 'host', error: e.message }));
  }, [roomId]);
  return (
    <>
      <Header>
        <a href="/host">New room</a>
      </Header>
      <main className="wide">
        <ErrorBox error={error} />
        {session ? (
          <Dashboard session={session} />
        ) : roomId ? (
          <p className="muted" aria-busy="true">
            Taking room {roomId} back from this browser’s checkpoint…
          </p>
        ) : (
          <RoomForm onCreated={setSession} />
        )}
      </main>
    </>
  );
}

function RoomForm({ onCreated }: { onCreated: (session: HostSession) => void }) {
  const [{ values: initial, errors: queryErrors }] = useState(() => parseRunQuery(location.search));
  const [values, setValues] = useState<RunOptions>(initial);
  // a field whose query value was refused shows that value beside its error, to be corrected
  const [raw, setRaw] = useState<Record<string, string>>(() => {
    const query = new URLSearchParams(location.search);
    return Object.fromEntries(
      RUN_OPTION_NAMES.map((name) => [name, (queryErrors[name] && query.get(name)) || String(initial[name])]),
    );
  });
  const [errors, setErrors] = useState<RunOptionErrors>(queryErrors);
  const [checkpoint, setCheckpoint] = useState<{ name: string; params: Float32Array; model: GptConfig } | null>(null);
  const [dataset, setDataset] = useState<'moby-dick' | 'upload'>('moby-dick');
  const [text, setText] = useState<UploadedText | null>(null);
  // checked again when the sequence length changes (both splits must hold one window), not on
  // every keystroke: the UTF-8 check reads the whole file
  const uploadError = useMemo(() => (text ? checkUploadedText(text, values.seq) : undefined), [text, values.seq]);
  const textError = dataset !== 'upload' ? undefined : text ? uploadError : 'Choose a text file to upload.';
  const [busy, setBusy] = useState(false);
  const [problem, setProblem] = useState<string | null>(null);
  const [saved, setSaved] = useState<{ link: RoomLinkRecord; info: CheckpointInfo | null }[]>([]);
  const [recommendFields, setRecommendFields] = useState(
    () => Object.fromEntries(Object.entries(ROOM_MODEL_DEFAULTS).map(([k, v]) => [k, String(v)])) as RecommendFields,
  );
  const [recommended, setRecommended] = useState<MadeRecommendation | null>(null);
  useEffect(() => {
    listRooms().then(setSaved, () => setSaved([]));
  }, []);

  const update = (name: RunOptionName, text: string) => {
    setRaw((r) => ({ ...r, [name]: text }));
    const { value, error } = parseRunOption(name, text);
    setErrors((e) => ({ ...e, [name]: error }));
    if (error === undefined) setValues((v) => ({ ...v, [name]: value }));
  };
  const forget = async (roomId: string) => {
    if (!confirm(`Forget room ${roomId}? Its checkpoint, text and host key are deleted from this browser.`)) return;
    try {
      await forgetRoom(roomId);
      setSaved((rooms) => rooms.filter(({ link }) => link.roomId !== roomId));
    } catch (error) {
      setProblem(`Could not forget ${roomId}: ${(error as Error).message}`);
    }
  };
  const recommend = () => {
    const result = recommendation(values.preset, recommendFields, values);
    setRecommended({ preset: values.preset, fields: recommendFields, result });
    if ('options' in result) {
      for (const [name, value] of Object.entries(result.options)) update(name as RunOptionName, String(value));
    }
  };
  // a refused choice in the query falls back to the default, which the select shows: not a blocker
  const fieldsValid = !RUN_OPTION_NAMES.some((name) => RUN_OPTIONS[name].kind !== 'choice' && errors[name]);
  const invalid = !fieldsValid || textError !== undefined;
  useEffect(() => {
    if (fieldsValid) history.replaceState(null, '', `/host${runQueryOf(values)}`);
  }, [values, fieldsValid]);

  const create = async () => {
    setProblem(null);
    setBusy(true);
    try {
      const upload = dataset === 'upload' && text ? text : undefined;
      const config = roomConfigOf(values, checkpoint?.model, upload);
      // copies: the worker takes the buffers, the form keeps its own
      const corpus = upload ? { name: config.data.corpus, bytes: upload.bytes.slice() } : null;
      onCreated(await createRoom(config, checkpoint ? checkpoint.params.slice() : null, corpus));
    } catch (error) {
      setProblem((error as Error).message);
      setBusy(false);
    }
  };

  return (
    <>
      <h1>Host a training room</h1>
      <p className="lede">
        Pick the model and the schedule, create the room, share its link. Volunteers who open it train the model in
        their browsers; this page coordinates the rounds, evaluates θ_global and keeps checkpoints.
      </p>
      {saved.length > 0 && (
        <section className="card">
          <h2>Rooms hosted from this browser</h2>
          <ul className="plain">
            {saved.map(({ link, info }) => (
              <li key={link.roomId}>
                <a href={`/host/${encodeURIComponent(link.roomId)}`}>Resume {link.roomId}</a>{' '}
                <span className="muted small">
                  {info
                    ? `step ${fmt.count(info.step)}, saved ${new Date(info.savedAt).toLocaleString()}`
                    : 'no checkpoint yet'}
                </span>{' '}
                <button
                  type="button"
                  className="link small"
                  title="delete this room's checkpoint and link from this browser"
                  onClick={() => void forget(link.roomId)}
                >
                  Forget
                </button>
              </li>
            ))}
          </ul>
        </section>
      )}
      <form
        className="card form-grid"
        data-testid="room-form"
        onSubmit={(event) => {
          event.preventDefault();
          if (!invalid && !busy) void create();
        }}
      >
        {RUN_OPTION_NAMES.map((name) => {
          const spec = RUN_OPTIONS[name];
          return (
            <label key={name} title={spec.help} htmlFor={`run-${name}`}>
              <span>{spec.label}</span>
              {spec.kind === 'choice' ? (
                <select
                  id={`run-${name}`}
                  name={name}
                  value={values[name]}
                  onChange={(e) => update(name, e.target.value)}
                  disabled={name === 'preset' && checkpoint !== null}
                >
                  {spec.choices.map((choice) => (
                    <option key={choice}>{choice}</option>
                  ))}
                </select>
              ) : (
                <input
                  id={`run-${name}`}
                  name={name}
                  inputMode="decimal"
                  value={raw[name] ?? ''}
                  aria-invalid={Boolean(errors[name])}
                  onChange={(e) => update(name, e.target.value)}
                />
              )}
              {errors[name] ? (
                <small className="field-error">{errors[name]}</small>
              ) : (
                <small className="muted">{spec.help}</small>
              )}
            </label>
          );
        })}
        <fieldset className="span-2 field dataset" data-testid="dataset-choice">
          <legend>Dataset</legend>
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
          {dataset === 'upload' && (
            <input
              type="file"
              accept=".txt,.md,.csv,.json,.xml,.html,text/*"
              data-testid="dataset-file"
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
                  : 'The model reads bytes: any language, code or prose. The last 10% is held out for validation.'}
              </small>
            ))}
        </fieldset>
        <label className="span-2">
          <span>Start from a checkpoint (optional)</span>
          <input
            type="file"
            accept=".safetensors"
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
          <small className="muted">
            {checkpoint
              ? `${checkpoint.name}: ${checkpoint.model.nLayer} layers × ${checkpoint.model.nEmbd}, replaces the model choice`
              : 'θ_global starts from these weights (safetensors, nanoGPT names) instead of the seeded init.'}
          </small>
        </label>
        <RecommendSettings
          preset={values.preset}
          fields={recommendFields}
          onField={(name, text) => setRecommendFields((r) => ({ ...r, [name]: text }))}
          budget={formTokenBudget(values, recommendFields.workers)}
          made={recommended}
          checkpoint={checkpoint !== null}
          onRecommend={recommend}
        />
        <div className="span-2 actions">
          <button type="submit" className="primary" disabled={invalid || busy}>
            {busy ? 'Creating…' : 'Create room'}
          </button>
          {problem && <span className="field-error">{problem}</span>}
        </div>
      </form>
    </>
  );
}

function Dashboard({ session }: { session: HostSession }) {
  // only what this part shows: the charts and tables subscribe to their own slices
  const state = useStore(
    store,
    useShallow(({ roomId, status, phase, joinUrl, watchUrl, checkpoint, resumedFrom, dataset }) => ({
      dataset,
      roomId,
      status,
      phase,
      joinUrl,
      watchUrl,
      checkpoint,
      resumedFrom,
    })),
  );
  const status = state.status ?? 'waiting';
  const [rotating, setRotating] = useState(false);
  const downloadFiles = async () => {
    const files = await session.files();
    download(`shoal-${files.roomId}.safetensors`, files.weights);
    download(`shoal-${files.roomId}.state.safetensors`, files.state);
  };
  return (
    <>
      <div className="room-head">
        <h1>
          Room <span className="mono">{state.roomId}</span>{' '}
          <span className={`status ${status}`} data-testid="room-status">
            {statusLabel[status]}
          </span>
        </h1>
        <div className="actions">
          {status === 'waiting' && (
            <button type="button" className="primary" onClick={() => session.setStatus('running')}>
              Start
            </button>
          )}
          {status === 'running' && (
            <button type="button" onClick={() => session.setStatus('paused')}>
              Pause
            </button>
          )}
          {status === 'paused' && (
            <button type="button" className="primary" onClick={() => session.setStatus('running')}>
              Resume
            </button>
          )}
          {status !== 'stopped' && (
            <button type="button" className="danger" onClick={() => session.setStatus('stopped')}>
              Stop
            </button>
          )}
        </div>
      </div>
      <p className="muted">{state.phase}</p>
      <DatasetLine dataset={state.dataset} />
      <section className="card links">
        {state.joinUrl && <CopyField label="Join link" value={state.joinUrl} testId="join-url" />}
        {state.watchUrl && <CopyField label="Watch link (read-only)" value={state.watchUrl} testId="watch-url" />}
        <button
          type="button"
          className="ghost small"
          disabled={rotating}
          onClick={async () => {
            setRotating(true);
            await session.rotateToken().finally(() => setRotating(false));
          }}
        >
          Rotate join token
        </button>
        <span className="muted small">The old link stops admitting; volunteers in the room stay.</span>
      </section>
      <RoomNumbers />
      <RoomPanels onKick={session.kick} />
      <section className="card">
        <h2>Checkpoints</h2>
        <p data-testid="checkpoint">
          {state.checkpoint
            ? `Saved in this browser at step ${fmt.count(state.checkpoint.step)} (${new Date(state.checkpoint.savedAt).toLocaleTimeString()}), rounds ${state.checkpoint.fragments.map((f) => f.round).join(' / ')}.`
            : 'Written to this browser (IndexedDB) after each committed round; a reload resumes the room.'}
          {state.resumedFrom && ` Resumed from step ${fmt.count(state.resumedFrom.step)}.`}
        </p>
        <button type="button" onClick={() => void downloadFiles()}>
          Download weights + run state
        </button>
      </section>
      <Suspense fallback={<p className="muted">Loading the sampler…</p>}>
        <SamplePanel
          getParams={async () => {
            const { params, config, key } = await session.params();
            return { params, model: config.model, key };
          }}
        />
      </Suspense>
    </>
  );
}
