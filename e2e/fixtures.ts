/**
 * What the e2e specs share: `window.shoal.getState()` typed, console-error recording, and a
 * long-task recorder for the main thread (Long Animation Frames with script attribution, so a
 * long task is traced to the code that ran it).
 */
import type { Page } from '@playwright/test';

export interface RoomState {
  role: string;
  roomId: string | null;
  joinUrl: string | null;
  watchUrl: string | null;
  status: string | null;
  error: string | null;
  peers: { peer: string; status: string; innerStep: number; reason: string }[];
  metrics: {
    step: number | null;
    tokens: number | null;
    trainLoss: number | null;
    evalLoss: number | null;
    tokensPerSecond: number | null;
    bytesSent: number | null;
    bytesReceived: number | null;
    roundsCommitted: number | null;
  };
  fragments: { round: number; hash: string }[] | null;
  rounds: {
    fragment: number;
    round: number;
    participants: number;
    outcome: string;
    openedAt: number;
    endedAt: number | null;
    detail: string;
  }[];
  /** Epoch ms when the run started: the rounds' times count from it. */
  startedAt: number | null;
  points: number;
  /** The room's bytes sent, as its last chart point says; null before one. */
  roomBytes: number | null;
  /** A volunteer page's own figures (its peer id among them); null elsewhere. */
  volunteer: { peer: string } | null;
  checkpoint: { savedAt: string; step: number; tokens: number; fragments: { round: number; hash: string }[] } | null;
  resumedFrom: RoomState['checkpoint'];
  /** The room's text (a volunteer's once its welcome names it). */
  dataset: { name: string; bytes: number; fingerprint: string; source: 'server' | 'host'; received: number } | null;
  gpu: { kind: string };
}

export interface LongTask {
  /** epoch ms */
  at: number;
  duration: number;
  /** Scripts that ran in it: source URL and what invoked them, with their own duration. */
  sources: string[];
  /** The longest script's own duration, ms. */
  scriptMs: number;
}

declare global {
  interface Window {
    __shoalLongTasks: LongTask[];
  }
}

export const readState = (page: Page) =>
  page.evaluate(() => (window as unknown as { shoal: { getState(): RoomState } }).shoal.getState());

export function recordErrors(page: Page, name: string, errors: string[]): void {
  page.on('console', (message) => {
    if (message.type() === 'error') errors.push(`[${name}] ${message.text()}`);
  });
  page.on('pageerror', (error) => errors.push(`[${name}] ${String(error)}`));
}

/** Records every animation frame over 50 ms on `page` (from its next load on). */
export async function watchLongTasks(page: Page): Promise<void> {
  await page.addInitScript(() => {
    window.__shoalLongTasks = [];
    type Script = { sourceURL: string; invoker: string; duration: number };
    new PerformanceObserver((list) => {
      for (const entry of list.getEntries() as (PerformanceEntry & { scripts?: Script[] })[]) {
        if (entry.duration <= 50) continue;
        const scripts = entry.scripts ?? [];
        window.__shoalLongTasks.push({
          at: Math.round(performance.timeOrigin + entry.startTime),
          duration: Math.round(entry.duration),
          sources: scripts.map(
            (s) => `${s.sourceURL.replace(location.origin, '')} (${s.invoker}, ${Math.round(s.duration)} ms)`,
          ),
          scriptMs: Math.round(Math.max(0, ...scripts.map((s) => s.duration))),
        });
      }
    }).observe({ type: 'long-animation-frame', buffered: true });
  });
}
