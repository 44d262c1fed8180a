/** The landing page: what Shoal is, host a room or join one, and whether this browser can help. */
import { useState } from 'react';
import { useStore } from 'zustand';
import { store } from '../store.ts';
import { GpuCard, SelfTestCard } from '../ui/GpuCards.tsx';
import { Header } from '../ui/parts.tsx';

/** A pasted join link, or "ROOM TOKEN" / "ROOM?token=TOKEN": the path to go to, or null. */
export function joinPathOf(input: string): string | null {
  const text = input.trim();
  if (!text) return null;
  try {
    const url = new URL(text);
    if (/^\/(join|watch)\//.test(url.pathname)) return url.pathname + url.search;
  } catch {
    // not a URL: a code
  }
  const match = /^([A-Za-z0-9_-]+)(?:\s+|\?token=)([A-Za-z0-9_-]+)$/.exec(text);
  return match ? `/join/${match[1]}?token=${match[2]}` : null;
}

export function Landing() {
  const gpu = useStore(store, (s) => s.gpu);
  const selfTest = useStore(store, (s) => s.selfTest);
  const [link, setLink] = useState('');
  const path = joinPathOf(link);
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
                if (path) location.assign(path);
              }}
            >
              <input
                aria-label="Join link or room code"
                placeholder="Paste the join link, or: ROOM TOKEN"
                value={link}
                onChange={(e) => setLink(e.target.value)}
              />
              <button type="submit" disabled={!path}>
                Join
              </button>
            </form>
          </section>
        </div>
        <GpuCard gpu={gpu} />
        {gpu.kind === 'ready' && <SelfTestCard result={selfTest} />}
      </main>
    </>
  );
}
