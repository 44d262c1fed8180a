/**
 * The join link's page. Nothing runs before the volunteer agrees. First the server is asked
 * whether the room exists and the link's token admits (a bad link is said at once, and there is
 * nothing to consent to); then what the room trains, what joining means in short, which engine
 * trains faster here (both measured on the room's model, the person may choose the other) and the
 * Join button, with the details and the GPU's facts folded below. After Join: the volunteer's own
 * numbers and controls, in a pipeline room its stage, and when the room ends, a clear end.
 */
import { formatAdapter } from '@shoal/gpu';
import { PRESETS } from '@shoal/model';
import { type ReactNode, useEffect, useRef, useState } from 'react';
import { useStore } from 'zustand';
import { type Engine, type EngineProbe, pickEngine, slowChoiceText } from '../runtime/engine-probe.ts';
import { checkRoom, corpusName, modelText, type RoomCheck, roomSentence } from '../session/room-check.ts';
import { statusLabel } from '../session/room-link.ts';
import { joinRoom, type VolunteerSession } from '../session/volunteer-session.ts';
import { LEFT_PHASE, metricsOf, store } from '../store.ts';
import { ConnectionBanner } from '../ui/ConnectionBanner.tsx';
import { ShardBudgetField, ShardLine } from '../ui/DatasetParts.tsx';
import { engineFigure, GpuCard, ProbeProgressLine, useEngineProbe } from '../ui/GpuCards.tsx';
import { OwnProgress } from '../ui/OwnProgress.tsx';
import { VolunteerStage } from '../ui/PipelineTables.tsx';
import { DatasetLine, ErrorBox, fmt, Header, StatTiles } from '../ui/parts.tsx';
import { stageWaiting } from '../ui/pipeline-text.ts';
import { RoomFigureTiles } from '../ui/RoomPanels.tsx';

export function VolunteerPage({ roomId, token }: { roomId: string; token: string | null }) {
  const [session, setSession] = useState<VolunteerSession | null>(null);
  return (
    <>
      <Header />
      <main>
        {session ? <Training session={session} /> : <JoinForm roomId={roomId} token={token} onJoined={setSession} />}
      </main>
    </>
  );
}

/** How often the join page asks again about a room whose host has not said what it trains. */
const RECHECK_MS = 3_000;

/** The model the probe measures: the room's preset, or nano when the room has not said (or names one unknown here). */
function probeModelOf(check: RoomCheck | null): { preset: string } | null {
  if (check === null || check.kind === 'refused') return null;
  const preset = check.kind === 'open' ? check.about?.preset : null;
  return { preset: preset && Object.hasOwn(PRESETS, preset) ? preset : 'nano' };
}

function JoinForm({
  roomId,
  token,
  onJoined,
}: {
  roomId: string;
  token: string | null;
  onJoined(session: VolunteerSession): void;
}) {
  const gpu = useStore(store, (state) => state.gpu);
  const [check, setCheck] = useState<RoomCheck | null>(null);
  const [joining, setJoining] = useState(false);
  const [joinError, setJoinError] = useState<string | null>(null);
  const [override, setOverride] = useState<Engine | null>(null);
  const errorRef = useRef<HTMLDivElement>(null);

  useEffect(() => {
    let live = true;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const ask = () =>
      void checkRoom(roomId, token).then((answer) => {
        if (!live) return;
        setCheck(answer);
        // the host has not said yet what the room trains: ask again until it does
        if (answer.kind === 'open' && modelText(answer.about) === null) timer = setTimeout(ask, RECHECK_MS);
      });
    ask();
    return () => {
      live = false;
      clearTimeout(timer);
    };
  }, [roomId, token]);

  // measuring stops while joining: the room worker needs the cores and the GPU
  const probe = useEngineProbe(gpu, joining ? null : probeModelOf(check));
  const picked = probe.probe ? pickEngine(probe.probe) : null;
  const engine = override ?? picked;

  // an error after Join: next to the button, read out and scrolled into view
  useEffect(() => {
    if (!joinError) return;
    errorRef.current?.focus();
    errorRef.current?.scrollIntoView({ block: 'center' });
  }, [joinError]);

  const join = async () => {
    if (!engine || !token) return;
    setJoining(true);
    setJoinError(null);
    try {
      onJoined(await joinRoom(roomId, token, engine));
    } catch (e) {
      setJoinError((e as Error).message);
      setJoining(false);
    }
  };

  if (check?.kind === 'refused') {
    return (
      <>
        <h1>Join room {roomId}</h1>
        <div className="card bad" role="alert" data-testid="room-check">
          {check.message}
        </div>
      </>
    );
  }
  if (check?.kind === 'open' && check.status === 'stopped') {
    return (
      <>
        <h1>Join room {roomId}</h1>
        <div className="card" role="status" data-testid="room-check">
          Room {roomId} has stopped training: there is nothing to join now. If its host resumes it, reload this page to
          join.
        </div>
      </>
    );
  }
  const corpus = check?.kind === 'open' && check.about?.corpus ? corpusName(check.about.corpus) : 'the room’s text';
  return (
    <>
      <h1>Join room {roomId}</h1>
      <p data-testid="room-check" role="status">
        {check === null ? (
          <span className="muted">Checking the room…</span>
        ) : check.kind === 'open' ? (
          roomSentence(check)
        ) : (
          <span className="muted">{check.message} You can still try to join.</span>
        )}
      </p>
      <p className="consent" data-testid="consent">
        Joining lends this browser’s {engine === 'cpu' ? 'CPU' : engine === 'webgpu' ? 'GPU' : 'GPU or CPU'} to the room
        while this tab is open (pause or leave at any time). Your <strong>IP address becomes visible</strong> to the
        room’s other members; you download {corpus} and the model, and send compressed updates.
      </p>
      <EngineChoice
        probe={probe.probe}
        progressLine={<ProbeProgressLine progress={probe.progress} />}
        gpuName={gpu.kind === 'ready' ? `GPU (${formatAdapter(gpu.adapter)})` : 'GPU (WebGPU)'}
        gpuReady={gpu.kind === 'ready'}
        engine={engine}
        overridden={override !== null && override !== picked}
        onChoose={setOverride}
      />
      {probe.error && <p className="error small">Could not measure the engines: {probe.error}. Choose one above.</p>}
      <ShardBudgetField />
      <div className="actions">
        <button
          type="button"
          className="primary big"
          disabled={joining || !engine || !token || check === null}
          onClick={() => void join()}
        >
          {joining ? 'Joining…' : 'Join'}
        </button>
        <span className="muted small">
          {engine ? 'By joining you agree to the above.' : 'Join waits for the measurement, or your choice above.'}
        </span>
      </div>
      {joinError && (
        <div className="card bad" role="alert" tabIndex={-1} ref={errorRef} data-testid="join-error">
          {joinError}
        </div>
      )}
      <details className="card">
        <summary>What joining means, in full</summary>
        <ul>
          <li>
            <strong>Your processor is used</strong> for training while this tab is open: the GPU through WebGPU, or the
            CPU through WebAssembly, whichever you chose above. You can cap it, pause, or leave at any time; closing the
            tab leaves.
          </li>
          <li>
            <strong>Your IP address becomes visible</strong> to the room’s other members: updates travel directly
            between browsers over WebRTC.
          </li>
          <li>
            <strong>You receive the room’s text</strong> ({corpus}, at most 64 MiB) and the model’s weights, and send
            compressed model updates (a few kB to MB per round).
          </li>
        </ul>
      </details>
      <details className="card">
        <summary>This browser’s GPU</summary>
        <GpuCard gpu={gpu} />
      </details>
    </>
  );
}

/** The room's rounds that wait for someone, as the host's summary names them ("you" for this volunteer). */
function RoundWaits({
  waiting,
  self,
}: {
  waiting: { fragment: number; round: number; peers: string[] }[];
  self: string;
}) {
  if (waiting.length === 0) return null;
  return (
    <ul className="small muted" data-testid="round-waits">
      {waiting.map(({ fragment, round, peers }) => (
        <li key={`${fragment}-${round}`}>
          Round p{fragment} · r{round} waits for{' '}
          {peers.map((peer, i) => (
            <span key={peer}>
              {i > 0 && ', '}
              {peer === self ? <strong>you</strong> : <span className="mono">{peer}</span>}
            </span>
          ))}
        </li>
      ))}
    </ul>
  );
}

/** Both engines with their measured speeds, the faster one chosen; the person may choose the other. */
function EngineChoice({
  probe,
  progressLine,
  gpuName,
  gpuReady,
  engine,
  overridden,
  onChoose,
}: {
  probe: EngineProbe | null;
  progressLine: ReactNode;
  /** The GPU with its adapter, as the engine figures name it. */
  gpuName: string;
  gpuReady: boolean;
  engine: Engine | null;
  overridden: boolean;
  onChoose(engine: Engine): void;
}) {
  // the person chose the engine that measured several times slower: both figures, and what it means
  const warning = probe && engine && overridden ? slowChoiceText(probe, engine) : null;
  return (
    <fieldset className="engine-choice" data-testid="engine-choice">
      <legend>Train with</legend>
      <label>
        <input type="radio" name="engine" value="cpu" checked={engine === 'cpu'} onChange={() => onChoose('cpu')} /> CPU
        (WebAssembly)
      </label>
      <label>
        <input
          type="radio"
          name="engine"
          value="webgpu"
          checked={engine === 'webgpu'}
          disabled={!gpuReady}
          onChange={() => onChoose('webgpu')}
        />{' '}
        {gpuName}
        {!gpuReady && <span className="muted small"> (WebGPU is not available here)</span>}
      </label>
      <p className="small" data-testid="engine-verdict">
        {probe ? (
          <>
            {engineFigure(probe, 'cpu')} · {engineFigure(probe, 'webgpu')}
            {engine && ` → using the ${engine === 'cpu' ? 'CPU' : 'GPU'}${overridden ? ' (your choice)' : ''}`}
          </>
        ) : (
          progressLine
        )}
      </p>
      {warning && (
        <p className="warning small" data-testid="engine-warning">
          {warning}
        </p>
      )}
    </fieldset>
  );
}

function Training({ session }: { session: VolunteerSession }) {
  const state = useStore(store);
  const own = state.volunteer;
  const summary = state.summary;
  const phase = own?.phase ?? 'connecting';
  // a pipeline stage whose group cannot train yet is waiting, not training
  const stageWait = phase === 'training' ? stageWaiting(own?.pipeline ?? null) : null;
  const roomFinished = summary?.status === 'stopped';
  const left = state.phase === LEFT_PHASE;
  // after Leave nothing trains here: the badge says so, whatever the worker said last
  const badge = left ? 'left' : stageWait ? 'waiting' : phase;
  const speed = metricsOf(state).tokensPerSecond;
  // the end, in words: the host ended the run, the volunteer left, or training stopped (the error says why)
  const ended = roomFinished
    ? 'The room has finished.'
    : left
      ? 'You have left the room.'
      : phase === 'stopped'
        ? 'Training has stopped here.'
        : null;
  const phaseText: Record<typeof phase, string> = {
    connecting: 'Connecting to the room…',
    waiting: 'Joined. Waiting for the host to press Start.',
    training: stageWait ? 'Not training yet: your stage waits for its group (below).' : 'Training.',
    paused:
      state.settings.paused || (state.settings.pauseWhenHidden && document.hidden)
        ? 'Paused by you.'
        : 'Paused by the host.',
    stopped: 'Stopped.',
  };
  const processor = own?.backend === 'cpu' ? 'CPU' : 'GPU';
  return (
    <>
      <ErrorBox error={state.error} />
      <h1>
        Room <span className="mono">{state.roomId}</span>{' '}
        <span className={`status ${left ? 'stopped' : badge}`} data-testid="volunteer-phase">
          {badge}
        </span>{' '}
        <ConnectionBanner />
      </h1>
      {!left && (
        <p className="muted">
          {phaseText[phase]} {summary && `Room: ${statusLabel[summary.status]}.`}
        </p>
      )}
      <p data-testid="volunteer-id">
        Your id in the room: <code className="mono">{session.peerId}</code>{' '}
        <span className="muted small">(the host’s table lists you by its first characters)</span>
      </p>
      <p data-testid="volunteer-adapter">
        {own ? (
          <>
            <span className="badge">{own.backend}</span> {own.adapter}
          </>
        ) : (
          'Starting the engine…'
        )}
      </p>
      {!left && own?.leftOut && (
        <p className="warning small" data-testid="left-out">
          The host leaves you out of rounds for now: {own.leftOut}.
        </p>
      )}
      {!left && <RoundWaits waiting={summary?.waiting ?? []} self={session.peerId} />}
      <DatasetLine dataset={own?.dataset ?? null} own />
      <ShardLine shards={own?.shards ?? null} />
      {own?.pipeline && <VolunteerStage pipeline={own.pipeline} />}
      <StatTiles
        stats={[
          { label: 'Your speed', value: left ? '— (left)' : fmt.rate(speed), testId: 'own-speed' },
          {
            label: 'Your steps',
            value: fmt.count(own?.innerStep),
            hint: 'the steps you trained; the room’s step is the median volunteer’s place on the schedule',
            testId: 'own-steps',
          },
          { label: 'Your loss', value: fmt.loss(own?.loss), testId: 'own-loss' },
          { label: 'Sent', value: fmt.bytes(own?.bytesSent), testId: 'own-sent' },
          { label: 'Received', value: fmt.bytes(own?.bytesReceived), testId: 'own-received' },
          {
            label: 'Contributions sent',
            value: fmt.count(own?.contributions),
            hint: 'rounds you sent your Δ to; the host counts those that committed',
          },
        ]}
      />
      <OwnProgress />
      {/* the room's figures: the host's summary of its view, shown as the dashboard shows them */}
      <RoomFigureTiles progress={!left || roomFinished} />
      {ended ? (
        <section className="card" role="status" data-testid="volunteer-end">
          <h2>{ended} Thank you — you can close this tab.</h2>
          <p>
            You trained {fmt.count(own?.innerStep ?? 0)} steps ({fmt.tokens(own?.tokens ?? 0)}) and contributed to{' '}
            {fmt.count(own?.contributions ?? 0)} rounds. Nothing runs on this page any more.
          </p>
        </section>
      ) : (
        <section className="card controls">
          <h2>Controls</h2>
          <div className="actions">
            <button type="button" onClick={() => session.setPaused(!state.settings.paused)}>
              {state.settings.paused ? 'Resume' : 'Pause'}
            </button>
            <button type="button" className="danger" onClick={() => session.leave()}>
              Leave the room
            </button>
          </div>
          <label className="inline">
            {processor} duty cycle: {Math.round(state.settings.dutyCycle * 100)}%
            <input
              type="range"
              min={10}
              max={100}
              step={10}
              value={Math.round(state.settings.dutyCycle * 100)}
              aria-label={`${processor} duty cycle`}
              onChange={(e) => session.setDutyCycle(Number(e.target.value) / 100)}
            />
            <small className="muted">
              the share of time the {processor} may work; the rest it idles, so the machine stays cool
            </small>
          </label>
          <label className="inline">
            <input
              type="checkbox"
              checked={state.settings.pauseWhenHidden}
              onChange={(e) => session.setPauseWhenHidden(e.target.checked)}
            />
            Pause while this tab is hidden
          </label>
        </section>
      )}
    </>
  );
}
