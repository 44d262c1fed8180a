/**
 * The host dashboard: the room form (RoomForm.tsx) until a room exists, then the room: links,
 * Start / pause / stop (Stop and leaving a live room ask first), the numbers, the run's
 * configuration, charts and tables, checkpoints and sampling, and at the end what to do with the
 * trained model.
 */
import type { RoomStatus } from '@shoal/protocol';
import { lazy, Suspense, useEffect, useRef, useState } from 'react';
import { useStore } from 'zustand';
import { useShallow } from 'zustand/shallow';
import { type HostSession, resumeRoom } from '../session/host-session.ts';
import { type ShoalState, store, volunteerCountOf } from '../store.ts';
import { ConnectionBanner } from '../ui/ConnectionBanner.tsx';
import { ConfirmDialog, CopyField, DatasetLine, download, ErrorBox, fmt, Header } from '../ui/parts.tsx';
import { RoomNumbers, RoomPanels } from '../ui/RoomPanels.tsx';
import { formatRate, RunConfigPanel } from '../ui/RunConfigPanel.tsx';
import { statusWords } from '../ui/room-progress.ts';
import { RoomForm } from './RoomForm.tsx';
import { TrainOn } from './TrainOn.tsx';

// onnxruntime-web and the exporter load only when the host asks for text
const SamplePanel = lazy(() => import('../sampling/SamplePanel.tsx').then((m) => ({ default: m.SamplePanel })));

/**
 * The room's status as the dashboard shows it: the one the host set, except that a room the
 * schedule ended (the host runtime stops it by itself; its view says so) is stopped.
 */
export function dashboardStatus(state: Pick<ShoalState, 'status' | 'view'>): RoomStatus {
  if (state.view?.status === 'stopped' && state.view.endedBy === 'schedule') return 'stopped';
  return state.status ?? 'waiting';
}

export function HostPage({ roomId, trainOn = null }: { roomId: string | null; trainOn?: string | null }) {
  const [session, setSession] = useState<HostSession | null>(null);
  const error = useStore(store, (state) => state.error);
  const status = useStore(store, dashboardStatus);
  const hasCheckpoint = useStore(store, (state) => state.checkpoint !== null);
  const [leaving, setLeaving] = useState(false);
  const resuming = useRef(false);
  useEffect(() => {
    if (!roomId || resuming.current) return;
    resuming.current = true;
    resumeRoom(roomId).then(setSession, (e: Error) => store.getState().setSession({ role: 'host', error: e.message }));
  }, [roomId]);
  // a live room ends its host with this page: ask before a click on New room does that
  const live = session !== null && status !== 'stopped';
  return (
    <>
      <Header>
        <a
          href="/host"
          onClick={(event) => {
            if (!live) return;
            event.preventDefault();
            setLeaving(true);
          }}
        >
          New room
        </a>
      </Header>
      <ConfirmDialog
        open={leaving}
        title="Leave this room for a new one?"
        confirm="Leave the room"
        danger
        testId="leave-dialog"
        onConfirm={() => location.assign('/host')}
        onCancel={() => setLeaving(false)}
      >
        <p>
          This page is the room's host. Leaving it stops the rounds: volunteers keep their page open and wait for the
          host to come back, then stop.
        </p>
        <p>
          {hasCheckpoint
            ? 'The room is not deleted: Resume under “Rooms hosted from this browser” on the next page takes it back from its last checkpoint. To end it instead, press Stop first.'
            : 'It has no checkpoint yet (one is written after the first round), so it cannot be taken back.'}
        </p>
      </ConfirmDialog>
      <main className="wide">
        <ErrorBox error={error} />
        {session ? (
          <Dashboard session={session} />
        ) : roomId ? (
          <p className="muted" aria-busy="true">
            Taking room {roomId} back from this browser’s checkpoint…
          </p>
        ) : trainOn ? (
          <TrainOn fromId={trainOn} onCreated={setSession} />
        ) : (
          <RoomForm onCreated={setSession} />
        )}
      </main>
    </>
  );
}

function Dashboard({ session }: { session: HostSession }) {
  // only what this part shows: the charts and tables subscribe to their own slices
  const state = useStore(
    store,
    useShallow(({ roomId, phase, joinUrl, watchUrl, checkpoint, resumedFrom, dataset, view }) => ({
      dataset,
      roomId,
      phase,
      joinUrl,
      watchUrl,
      checkpoint,
      resumedFrom,
      config: view?.config ?? null,
      endedBy: view?.status === 'stopped' ? (view.endedBy ?? null) : null,
    })),
  );
  const status = useStore(store, dashboardStatus);
  const volunteers = useStore(store, volunteerCountOf);
  const badge = statusWords(status, volunteers);
  const [rotating, setRotating] = useState(false);
  const [stopping, setStopping] = useState(false);
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
          <span className={`status ${badge.tone}`} data-testid="room-status">
            {badge.words}
          </span>{' '}
          <ConnectionBanner />
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
            <button type="button" className="danger" onClick={() => setStopping(true)}>
              Stop
            </button>
          )}
        </div>
      </div>
      <ConfirmDialog
        open={stopping}
        title="Stop the run?"
        confirm="Stop the run"
        danger
        testId="stop-dialog"
        onConfirm={() => {
          setStopping(false);
          session.setStatus('stopped');
        }}
        onCancel={() => setStopping(false)}
      >
        <p>
          No new rounds open, and the volunteers are told the run is over: they stop training and may close their tabs.
        </p>
        <p>
          The last checkpoint stays in this browser: you can download it, sample text from it, or resume the room from
          this page.
        </p>
      </ConfirmDialog>
      <p className="muted" data-testid="host-phase">
        {status === 'running' && volunteers === 0
          ? 'Started: no volunteer is in the room yet. Share the join link; training begins when the first one joins.'
          : state.phase}
      </p>
      <DatasetLine dataset={state.dataset} />
      {status === 'stopped' && (
        <RunEnded
          roomId={state.roomId}
          endedBy={state.endedBy}
          finalLr={state.config?.train.minLr ?? null}
          onDownload={() => void downloadFiles()}
          onResume={() => session.setStatus('running')}
        />
      )}
      <section className="card links">
        {status !== 'stopped' && state.joinUrl && (
          <CopyField label="Join link" value={state.joinUrl} testId="join-url" />
        )}
        {state.watchUrl && <CopyField label="Watch link (read-only)" value={state.watchUrl} testId="watch-url" />}
        {status !== 'stopped' && (
          <div className="actions">
            <button
              type="button"
              className="ghost small"
              disabled={rotating}
              aria-describedby="rotate-help"
              onClick={async () => {
                setRotating(true);
                await session.rotateToken().finally(() => setRotating(false));
              }}
            >
              Rotate join token
            </button>
            <span id="rotate-help" className="muted small">
              The old link stops admitting; volunteers in the room stay.
            </span>
          </div>
        )}
      </section>
      <RoomNumbers />
      <RunConfigPanel config={state.config} />
      <RoomPanels onKick={session.kick} />
      <section className="card">
        <h2>Checkpoints</h2>
        <p data-testid="checkpoint">
          {state.checkpoint
            ? `Saved in this browser at step ${fmt.count(state.checkpoint.step)} (${new Date(state.checkpoint.savedAt).toLocaleTimeString()}), each fragment's last round: ${state.checkpoint.fragments.map((f) => f.round).join(', ')}.`
            : 'Written to this browser (IndexedDB) after each committed round; a reload resumes the room.'}
          {state.resumedFrom && ` Resumed from step ${fmt.count(state.resumedFrom.step)}.`}
        </p>
        {/* a stopped room offers its download in the end panel above: one button, not two */}
        {status !== 'stopped' && (
          <button type="button" onClick={() => void downloadFiles()} aria-describedby="download-help">
            Download checkpoint
          </button>
        )}{' '}
        <span id="download-help" className="muted small">
          two files: the weights (safetensors, nanoGPT names) and the run state a room resumes from
        </span>
      </section>
      <div id="sample">
        <Suspense fallback={<p className="muted">Loading the sampler…</p>}>
          <SamplePanel
            getParams={async () => {
              const { params, config, key } = await session.params();
              return { params, model: config.model, key };
            }}
          />
        </Suspense>
      </div>
    </>
  );
}

/**
 * A stopped room: why it ended, and what the host can do with the model now. A room the schedule
 * ended is not offered Resume (past the schedule the host runtime would stop it again at once)
 * but training on in a new room with a longer schedule (TrainOn.tsx).
 */
function RunEnded(props: {
  roomId: string | null;
  endedBy: 'host' | 'schedule' | null;
  finalLr: number | null;
  onDownload: () => void;
  onResume: () => void;
}) {
  const bySchedule = props.endedBy === 'schedule';
  return (
    <section className="card run-ended" aria-labelledby="run-ended-title" data-testid="run-ended">
      <h2 id="run-ended-title">The run has ended</h2>
      {/* why it ended is the room's progress line (endText), the same on every page */}
      <p>Volunteers were told it is over. The last checkpoint is kept in this browser.</p>
      <div className="actions">
        <button type="button" onClick={props.onDownload}>
          Download checkpoint
        </button>
        <a className="button" href="#sample">
          Sample text
        </a>
        {!bySchedule && (
          <button type="button" className="primary" onClick={props.onResume}>
            Resume training
          </button>
        )}
        {bySchedule && props.roomId && (
          <a className="button primary" href={`/host?trainOn=${encodeURIComponent(props.roomId)}`}>
            Train on from this checkpoint in a new room
          </a>
        )}
      </div>
      {bySchedule && (
        <p className="small muted">
          Past the schedule the learning rate would stay at its final value
          {props.finalLr === null ? '' : ` (${formatRate(props.finalLr)})`}: training on opens a new room with a longer
          schedule, going on from this checkpoint’s step and tokens.
        </p>
      )}
    </section>
  );
}
