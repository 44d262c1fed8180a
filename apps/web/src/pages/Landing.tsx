/**
 * The landing page: what Shoal is, then what to do: host a room, join one or watch one (a link
 * the host shared); this browser's GPU and its self-test one click away (open at once where
 * WebGPU is missing), and last, what this browser can lend: the faster engine and its speed,
 * measured on nano.
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
          <LinkCard
            title="Join a room"
            text="Lend this browser to a room: paste the link its host shared. Nothing runs before you agree."
            label="Join link or room code"
            placeholder="Join link, or: ROOM TOKEN"
            button="Join"
            testId="join-box"
          />
          <LinkCard
            title="Watch a room"
            text="Follow a room’s loss, speed and rounds, read-only, from its watch link."
            label="Watch link"
            placeholder="…/watch/ROOM?key=…"
            button="Watch"
            testId="watch-box"
          />
        </div>
        {/* a browser without WebGPU is told at once; the adapter's details are one click away */}
        {gpu.kind === 'unavailable' ? (
          <GpuCard gpu={gpu} />
        ) : (
          <details className="card" data-testid="gpu-details">
            <summary>This browser’s GPU: the adapter and a WGSL self-test</summary>
            <GpuCard gpu={gpu} />
            {gpu.kind === 'ready' && <SelfTestCard result={selfTest} />}
          </details>
        )}
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

/** A card with a box for a link the host shared (join or watch), read strictly (readJoinInput). */
function LinkCard(props: {
  title: string;
  text: string;
  label: string;
  placeholder: string;
  button: string;
  testId: string;
}) {
  const [link, setLink] = useState('');
  const read = readJoinInput(link, location.origin);
  const problemId = `${props.testId}-problem`;
  return (
    <section className="card">
      <h2>{props.title}</h2>
      <p>{props.text}</p>
      <form
        onSubmit={(event) => {
          event.preventDefault();
          if (read.kind === 'go') location.assign(read.href);
        }}
      >
        <input
          aria-label={props.label}
          aria-describedby={problemId}
          aria-invalid={read.kind === 'invalid'}
          placeholder={props.placeholder}
          value={link}
          onChange={(e) => setLink(e.target.value)}
          data-testid={props.testId}
        />
        <button type="submit" disabled={read.kind !== 'go'}>
          {props.button}
        </button>
        <p id={problemId} className="error small" aria-live="polite" data-testid={problemId}>
          {read.kind === 'invalid' ? read.problem : ''}
        </p>
      </form>
    </section>
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
