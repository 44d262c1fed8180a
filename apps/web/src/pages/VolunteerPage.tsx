/**
 * The join link's page. Nothing runs before the volunteer agrees: first what joining means, the
 * GPU check and a Join button (or, without WebGPU, the explanation and an offer to help slowly on
 * the CPU); then the volunteer's own numbers and controls, and in a pipeline room its stage: which
 * group and stage it holds, and while its group lacks a stage, that it waits for a volunteer for it.
 */
import { formatAdapter } from '@shoal/gpu';
import { useState } from 'react';
import { useStore } from 'zustand';
import { statusLabel } from '../session/room-link.ts';
import { ConnectionBanner } from '../ui/ConnectionBanner.tsx';
import { joinRoom, type VolunteerSession } from '../session/volunteer-session.ts';
import { store } from '../store.ts';
import { GpuCard } from '../ui/GpuCards.tsx';
import { VolunteerStage } from '../ui/PipelineTables.tsx';
import { DatasetLine, ErrorBox, fmt, Header, StatTiles } from '../ui/parts.tsx';
import { stageWaiting } from '../ui/pipeline-text.ts';

export function VolunteerPage({ roomId, token }: { roomId: string; token: string | null }) {
  const gpu = useStore(store, (state) => state.gpu);
  const error = useStore(store, (state) => state.error);
  const [session, setSession] = useState<VolunteerSession | null>(null);
  const [joining, setJoining] = useState(false);

  const join = async (backend: 'webgpu' | 'cpu') => {
    setJoining(true);
    store.getState().setSession({ error: null });
    try {
      setSession(await joinRoom(roomId, token ?? '', backend));
    } catch (e) {
      store.getState().setSession({ error: (e as Error).message });
      setJoining(false);
    }
  };

  return (
    <>
      <Header />
      <main>
        <ErrorBox error={error} />
        {session ? (
          <Training session={session} />
        ) : (
          <>
            <h1>Lend your GPU to room {roomId}</h1>
            <p className="lede">
              This room trains a small language model together. Your browser would run its training steps and share what
              it learned with the other volunteers.
            </p>
            {!token && (
              <div className="card bad" role="alert">
                This link has no join token (<code>?token=…</code>). Ask the host for the full link.
              </div>
            )}
            <section className="card" data-testid="consent">
              <h2>What joining means</h2>
              <ul>
                <li>
                  <strong>Your GPU is used</strong> for training while this tab is open (you can cap it, pause, or leave
                  at any time; closing the tab leaves).
                </li>
                <li>
                  <strong>Your IP address becomes visible</strong> to the room’s other members: updates travel directly
                  between browsers over WebRTC.
                </li>
                <li>
                  <strong>You receive the room’s text data</strong> (Moby Dick, 1.2 MB, or a text the host chose, up to
                  64 MiB) and the model’s weights, and send compressed model updates (a few kB to MB per round).
                </li>
              </ul>
            </section>
            <GpuCard gpu={gpu}>
              <p>
                You can still help on the CPU: much slower (WebAssembly), but every step counts.{' '}
                <button
                  type="button"
                  disabled={joining || !token}
                  onClick={() => void join('cpu')}
                  data-testid="join-cpu"
                >
                  Join on the CPU
                </button>
              </p>
            </GpuCard>
            {gpu.kind !== 'unavailable' && (
              <div className="actions">
                <button
                  type="button"
                  className="primary big"
                  disabled={joining || gpu.kind !== 'ready' || !token}
                  onClick={() => void join('webgpu')}
                >
                  {joining ? 'Joining…' : 'Join'}
                </button>
                <span className="muted small">By joining you agree to the above.</span>
              </div>
            )}
          </>
        )}
      </main>
    </>
  );
}

function Training({ session }: { session: VolunteerSession }) {
  const state = useStore(store);
  const own = state.volunteer;
  const summary = state.summary;
  const share = own && summary && summary.tokens > 0 ? Math.min(1, own.tokens / summary.tokens) : null;
  const phase = own?.phase ?? 'connecting';
  // a pipeline stage whose group cannot train yet is waiting, not training
  const stageWait = phase === 'training' ? stageWaiting(own?.pipeline ?? null) : null;
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
  return (
    <>
      <h1>
        Room <span className="mono">{state.roomId}</span>{' '}
        <span className={`status ${stageWait ? 'waiting' : phase}`} data-testid="volunteer-phase">
          {stageWait ? 'waiting' : phase}
        </span>{' '}
        <ConnectionBanner />
      </h1>
      <p className="muted">
        {phaseText[phase]} {summary && `Room: ${statusLabel[summary.status]}.`}
      </p>
      <p data-testid="volunteer-adapter">
        {own ? (
          <>
            <span className="badge">{own.backend}</span> {own.adapter}
          </>
        ) : state.gpu.kind === 'ready' ? (
          formatAdapter(state.gpu.adapter)
        ) : (
          'CPU (WebAssembly)'
        )}
      </p>
      <DatasetLine dataset={own?.dataset ?? null} own />
      {own?.pipeline && <VolunteerStage pipeline={own.pipeline} />}
      <StatTiles
        stats={[
          { label: 'Your speed', value: fmt.rate(own?.tokensPerSecond), testId: 'own-speed' },
          { label: 'Your steps', value: fmt.count(own?.innerStep), testId: 'own-steps' },
          { label: 'Your loss', value: fmt.loss(own?.loss), testId: 'own-loss' },
          { label: 'Sent', value: fmt.bytes(own?.bytesSent), testId: 'own-sent' },
          { label: 'Received', value: fmt.bytes(own?.bytesReceived), testId: 'own-received' },
          { label: 'Rounds contributed', value: fmt.count(own?.contributions) },
          { label: 'Your share of the room', value: fmt.percent(share), hint: 'your tokens ÷ the room’s tokens' },
          { label: 'Room validation loss', value: fmt.loss(summary?.evalLoss) },
        ]}
      />
      <section className="card controls">
        <h2>Controls</h2>
        <div className="actions">
          <button
            type="button"
            onClick={() => session.setPaused(!state.settings.paused)}
            disabled={phase === 'stopped'}
          >
            {state.settings.paused ? 'Resume' : 'Pause'}
          </button>
          <button type="button" className="danger" onClick={() => session.leave()} disabled={phase === 'stopped'}>
            Leave the room
          </button>
        </div>
        <label className="inline">
          GPU duty cycle: {Math.round(state.settings.dutyCycle * 100)}%
          <input
            type="range"
            min={10}
            max={100}
            step={10}
            value={Math.round(state.settings.dutyCycle * 100)}
            onChange={(e) => session.setDutyCycle(Number(e.target.value) / 100)}
          />
          <small className="muted">
            the share of time the GPU may work; the rest it idles, so the machine stays cool
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
    </>
  );
}
