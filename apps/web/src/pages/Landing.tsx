/**
 * The landing page: what Shoal is, host a room or join one, whether this browser's GPU works,
 * and last, what this browser can lend: the faster engine and its speed, measured on nano.
 */
import { useState } from 'react';
import { useStore } from 'zustand';
import { type EngineProbe, measureText, pickEngine } from '../runtime/engine-probe.ts';
import { store } from '../store.ts';
import { engineFigure, GpuCard, ProbeProgressLine, SelfTestCard, useEngineProbe } from '../ui/GpuCards.tsx';
import { Header } from '../ui/parts.tsx';
import { readJoinInput } from './join-input.ts';

/** The landing page measures the smallest model: a room's own is measured on its join page. */
const LANDING_MODEL = { preset: 'nano' } as const;

export function Landing() {
  const gpu = useStore(store, (s) => s.gpu);
  const selfTest = useStore(store, (s) => s.selfTest);
  const probe = useEngineProbe(gpu, LANDING_MODEL);
  const [link, setLink] = useState('');
  const read = readJoinInput(link, location.origin);
  return (
    <>
      <Header>
        <a href="/host">Host a room</a>
      </Header>
      <main>
        <h1>Shoal</h1>
        <p className="lede">
          Shoal trains a language model on volunteers’ GPUs, right in their browsers. A host opens a room and shares a
          link; everyone who opens it lends their GPU, and the model learns from all of them at once.
        </p>
        <div className="choice">
          <section className="card">
            <h2>Host a room</h2>
            <p>Choose a model and schedule, share the link, watch it learn.</p>
            <a className="button primary" href="/host">
              Host a room
            </a>
          </section>
          <section className="card">
            <h2>Join a room</h2>
            <form
              onSubmit={(event) => {
                event.preventDefault();
                if (read.kind === 'go') location.assign(read.href);
              }}
            >
              <input
                aria-label="Join link or room code"
                aria-describedby="join-box-problem"
                aria-invalid={read.kind === 'invalid'}
                placeholder="Paste the join link, or: ROOM TOKEN"
                value={link}
                onChange={(e) => setLink(e.target.value)}
                data-testid="join-box"
              />
              <button type="submit" disabled={read.kind !== 'go'}>
                Join
              </button>
              <p id="join-box-problem" className="error small" aria-live="polite" data-testid="join-box-problem">
                {read.kind === 'invalid' ? read.problem : ''}
              </p>
            </form>
          </section>
        </div>
        <GpuCard gpu={gpu} />
        {gpu.kind === 'ready' && <SelfTestCard result={selfTest} />}
        <section className="card" data-testid="can-volunteer">
          <h2>What this browser can lend</h2>
          {probe.probe ? (
            <CanVolunteer probe={probe.probe} />
          ) : probe.error ? (
            <p className="error">Could not measure this browser: {probe.error}</p>
          ) : (
            <p>
              <ProbeProgressLine progress={probe.progress} />
              {!probe.progress && <span className="muted">Waiting for the GPU check…</span>}
            </p>
          )}
        </section>
      </main>
    </>
  );
}

/** The landing page's last word: which engine this browser would train with, and how fast. */
function CanVolunteer({ probe }: { probe: EngineProbe }) {
  const engine = pickEngine(probe);
  if (!engine) {
    return (
      <p className="error" data-testid="can-volunteer-line">
        This browser cannot volunteer: neither engine trains here ({measureText(probe.cpu)}).
      </p>
    );
  }
  const other = engine === 'cpu' ? 'webgpu' : 'cpu';
  const noGpu = probe.webgpu.kind === 'unavailable';
  return (
    <>
      <p className="lede" data-testid="can-volunteer-line">
        {noGpu ? 'Without WebGPU, this browser can still volunteer: ' : 'This browser can volunteer: '}
        on the {engine === 'cpu' ? 'CPU' : 'GPU'}, {measureText(probe[engine])} on the nano model.
      </p>
      <p className="muted small" data-testid="engine-figures">
        {engineFigure(probe, engine)} · {engineFigure(probe, other)}. A join page measures again on its room’s model and
        uses the faster engine.
      </p>
    </>
  );
}
